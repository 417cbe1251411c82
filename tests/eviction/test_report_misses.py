"""``report`` names the cause of every uncached token of a live session (issue #43 item 2): the first
call, what the host appended, an expiry after a pause, a change lightmem2 made (its batch), a change
the host made, the host's compaction, and the provider's own drop; and what each cost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from eviction_helpers import Session, module

from lightmem_plugin.commands import report
from lightmem_plugin.config import Config
from lightmem_plugin.metering import misses
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.store.registry import Registry
from lightmem_plugin.store.session_state import StateStore

MODEL = "claude-sonnet-4-5"


def _plugin(tmp_path: Path, mode: str) -> LightMem:
    return LightMem(
        config=Config.model_validate({"mode": mode}),
        registry=Registry(tmp_path / "reg"),
        states=StateStore(tmp_path / "states.sqlite3"),
        ledger=Ledger(tmp_path / "ledger.sqlite3"),
    )


def _history() -> list[dict[str, Any]]:
    """Task 1 read a module whole; task 2 made seven small steps since."""
    s = Session("Fix the parser in parser.py")
    s.call("cat parser.py", module("parser", 160))
    s.say("Fixed.")
    s.say("Now add a docstring to every function of utils.py", role="user")
    for k in range(7):
        s.call(f"sed -n '{k * 10 + 1},{k * 10 + 10}p' utils.py", f"def util_{k}(x):\n    return x")
    return s.messages


def _causes(data: dict[str, Any], call: int) -> dict[str, int]:
    row = next(c for c in data["calls"] if c["call"] == call)
    return {c["cause"]: c["tokens"] for c in row["missCauses"] or []}


def test_each_call_s_uncached_input_is_named_and_the_causes_add_up(tmp_path: Path) -> None:
    lm = _plugin(tmp_path, "normal")
    s = lm.session("s")
    msgs = _history()

    def call(at: float, messages: list[dict[str, Any]]) -> None:
        s.before_model_call(messages, api="anthropic", model=MODEL, now=at)

    call(0.0, msgs)  # 0: first
    msgs = [*msgs, {"role": "assistant", "content": "Step done."}, {"role": "user", "content": "go on"}]
    call(60.0, msgs)  # 1: appended
    msgs = [*msgs, {"role": "assistant", "content": "Next."}, {"role": "user", "content": "go on"}]
    call(60.0 + 1860.0, msgs)  # 2: a 31-minute pause; normal reduces the finished task's read again
    # 3: the host rewrote an old request (a rewritten tool output would read as a retry of the last call:
    # lightmem2 sends the output it reduced once, so the request is the last one again)
    rewritten = [*msgs[:5], {**msgs[5], "content": "Now add a docstring to every function."}, *msgs[6:]]
    call(1930.0, rewritten)
    compacted = [msgs[0], {"role": "user", "content": "Summary: the parser is fixed."}, *msgs[-2:]]
    call(1940.0, compacted)  # 4: the host dropped its history
    s.settle()
    assert lm.ledger is not None
    data = json.loads(report.run(lm.ledger, "s", as_json=True))["sessions"][0]
    first, warm, cold, host, host_compacted = (_causes(data, c) for c in range(1, 6))
    assert set(first) == {misses.FIRST}
    assert set(warm) == {misses.NEW}
    assert set(cold) == {misses.NEW, misses.EXPIRY, misses.OURS}, cold
    assert set(host) >= {misses.HOST} and misses.OURS not in host, host
    assert set(host_compacted) >= {misses.HOST_COMPACTION}, host_compacted
    rows = {c["call"]: c for c in data["calls"]}
    cold_row = next(c for c in rows[3]["missCauses"] if c["cause"] == misses.EXPIRY)
    assert cold_row["detail"] == "a pause of 1,860 s past the 5-minute TTL"
    ours = next(c for c in rows[3]["missCauses"] if c["cause"] == misses.OURS)
    assert "reduced again at a cold start" in ours["detail"]
    # every uncached token of every call is named, and the money of the causes is the calls' uncached money
    total = data["missCauses"]
    uncached = sum(c["missTokens"] + c["writeTokens"] for c in data["calls"])
    assert total["uncachedTokens"] == uncached == sum(x["tokens"] for x in total["causes"])
    rows_usd = sum(r.uncached_usd or 0 for r in lm.ledger.calls("s"))
    assert rows_usd > 0 and total["uncachedUsd"] == pytest.approx(rows_usd, rel=1e-9)
    # the text names them too
    text = report.run(lm.ledger, "s")
    assert "uncached input by cause" in text and "expiry" in text and "host compaction" in text


def test_with_the_provider_s_usage_a_short_read_is_its_drop(tmp_path: Path) -> None:
    """A warm call that only appended, but the provider read less than the whole previous request:
    the rest is the provider's own drop, in its units, priced as it billed."""
    lm = _plugin(tmp_path, "conservative")
    s = lm.session("d")
    msgs = _history()
    s.before_model_call(msgs, api="anthropic", model=MODEL, now=0.0)
    s.after_model_call(None, usage={"input_tokens": 20, "cache_creation_input_tokens": 9_000, "cache_read_input_tokens": 0, "output_tokens": 10}, api="anthropic")  # fmt: skip
    msgs = [*msgs, {"role": "assistant", "content": "Step done."}, {"role": "user", "content": "go on"}]
    s.before_model_call(msgs, api="anthropic", model=MODEL, now=10.0)
    s.after_model_call(None, usage={"input_tokens": 30, "cache_creation_input_tokens": 5_000, "cache_read_input_tokens": 4_100, "output_tokens": 10}, api="anthropic")  # fmt: skip
    assert lm.ledger is not None
    data = json.loads(report.run(lm.ledger, "d", as_json=True))["sessions"][0]
    second = _causes(data, 2)
    assert sum(second.values()) == 5_030  # what the provider did not read
    assert set(second) == {misses.NEW, misses.DROP}
    assert second[misses.DROP] > second[misses.NEW]
    row = lm.ledger.calls("d")[-1]
    assert row.uncached_usd == pytest.approx((30 * 3 + 5_000 * 3.75) / 1e6)


def test_the_visual_page_and_the_chat_command_name_the_causes(tmp_path: Path) -> None:
    from lightmem_plugin.commands import visual

    lm = _plugin(tmp_path, "normal")
    s = lm.session("v")
    msgs = _history()
    s.before_model_call(msgs, api="anthropic", model=MODEL, now=0.0)
    msgs = [*msgs, {"role": "assistant", "content": "Next."}, {"role": "user", "content": "go on"}]
    s.before_model_call(msgs, api="anthropic", model=MODEL, now=1900.0)
    s.settle()
    assert lm.ledger is not None
    page = visual.page("v", lm.ledger.calls("v"))
    assert "<h2>Uncached input by cause</h2>" in page
    assert "<td>expiry</td>" in page and "a pause of 1,900 s past the 5-minute TTL" in page
    assert "<td>lightmem2 change</td>" in page and "reduced again at a cold start" in page
