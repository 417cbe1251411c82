"""The price of a batch's cache break follows the provider's cache, and decides whether a batch runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from eviction_helpers import Session as Host
from eviction_helpers import module

from lightmem_plugin.config import Config
from lightmem_plugin.eviction.break_cost import ANTHROPIC, PREFIX, break_cost
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.store.registry import Registry


def test_a_prefix_break_invalidates_what_follows_it_and_an_anthropic_one_every_message() -> None:
    sizes = [500, 40, 300, 200, 100]  # system prompt, then messages
    assert PREFIX.tokens(sizes, head=1, at=3) == 300
    assert ANTHROPIC.tokens(sizes, head=1, at=3) == 640
    assert (PREFIX.per_token, ANTHROPIC.per_token) == (0.9, 1.15)  # a miss over a read; a write over a read


@pytest.mark.parametrize(
    ("setting", "wire", "want"),
    [
        ("auto", "anthropic", ANTHROPIC),
        ("auto", "prefix", PREFIX),
        ("auto", None, PREFIX),  # the Python API does not say which provider it calls
        ("prefix", "anthropic", PREFIX),  # the user's setting wins over the wire
        ("anthropic", None, ANTHROPIC),
    ],
)
def test_the_setting_wins_else_the_wire_api(setting: str, wire: str | None, want: object) -> None:
    assert break_cost(setting, wire) is want  # type: ignore[arg-type]


def batches(
    tmp_path: Path, cache_model: str, remaining: int, pause_before: int | None = None
) -> list[tuple[int, list[str]]]:
    """A task that read twelve modules it still needs, then a parser it rewrote whole (the read is
    stale) and ran six more steps: the stale read sits after ~8k tokens of live context. Calls come
    ten seconds apart; ``pause_before``: a call that comes after a 30-minute pause instead."""
    cfg = Config.model_validate(
        {
            "mode": "aggressive",
            "eviction": {
                "expectedRemainingCalls": remaining,
                "keepRecentTurns": 2,
                "cacheModel": cache_model,
            },
            "stabilizer": {"shortCallIds": False},
        }
    )
    lm = LightMem(config=cfg, registry=Registry(tmp_path / cache_model / str(remaining) / str(pause_before)))
    s = lm.session("priced")
    host = Host("Make the parser accept empty input.")
    at = 0.0

    def call() -> None:
        nonlocal at
        at += 1800.0 if s.calls + 1 == pause_before else 10.0
        s.before_model_call(host.messages, now=at)

    for k in range(12):
        host.call(f"cat pkg/mod{k}.py", module(f"m{k}", 40))
        call()
    host.call("cat pkg/parser.py", module("parse", 120))
    call()
    host.call("cat > pkg/parser.py << 'EOF'\nimport re\nEOF")
    call()
    for k in range(6):
        host.call(f"echo step {k}", f"step {k}")
        call()
    return [(b.call_index, list(b.call_ids)) for b in s.evictor.state.batches]


def test_a_batch_that_pays_on_a_prefix_cache_waits_on_anthropic_until_it_pays_there(tmp_path: Path) -> None:
    stale = (15, ["call_26"])  # the parser read, paged out at the first batch after its rewrite
    assert batches(tmp_path, "prefix", 20) == [stale]
    # on Anthropic the break re-writes all ~10k message tokens at 1.25x, not the ~1k after the read at
    # 1.0x: 20 expected calls of saving do not pay for it; 300 do, so it is the price that decided
    assert batches(tmp_path, "anthropic", 20) == []
    assert batches(tmp_path, "anthropic", 300) == [stale]


def test_a_batch_its_break_does_not_pay_for_when_warm_runs_at_a_cold_call(tmp_path: Path) -> None:
    """At a call after a pause past Anthropic's five-minute TTL the whole prompt is written again
    anyway, so the break is priced at zero: the batch refused on the warm cache runs there."""
    assert batches(tmp_path, "anthropic", 20) == []  # warm all along: the break does not pay
    assert batches(tmp_path, "anthropic", 20, pause_before=18) == [(18, ["call_26"])]
    assert batches(tmp_path, "anthropic", 20, pause_before=5) == []  # cold, but nothing stale yet
    assert break_cost("anthropic", None, cold=True) == ANTHROPIC.at_cold()
    assert ANTHROPIC.at_cold().per_token == 0.0 and ANTHROPIC.at_cold().from_head
