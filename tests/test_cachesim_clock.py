"""The cache model with time and luck: prefixes expire after their TTL unless read again, the
provider's recorded short reads and warm heads reach every replayed policy, and the replay's K approaches
what the provider billed (issue #41)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lightmem_plugin.measure.luck import HOUR_S, recorded_luck, ttl_of
from lightmem_plugin.measure.replay import Vanilla, replay_trace
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.measure.traces.base import Trace, TraceCall
from lightmem_plugin.metering.cachesim import make_cache

DATA = Path(__file__).parent / "data"
HEAD = list(range(2048))


def _prompt(extra: int) -> list[list[int]]:
    return [HEAD, list(range(5000, 5000 + extra))]


@pytest.mark.parametrize("provider", ["anthropic", "deepseek"])
def test_a_prefix_expires_after_its_ttl_unless_read_again(provider: str) -> None:
    def observe(cache: object, extra: int, at: float | None) -> tuple[int, bool]:
        chunks = _prompt(extra)
        marks = [len(HEAD), len(HEAD) + extra] if provider == "anthropic" else None
        usage = cache.observe(chunks, marks, at=at)  # type: ignore[attr-defined]
        return usage.hit_tokens, usage.cold

    cache = make_cache(provider, ttl=300)
    assert observe(cache, 64, 0.0) == (0, False)
    assert observe(cache, 128, 200.0)[0] >= len(HEAD)  # within the TTL
    assert observe(cache, 192, 450.0)[0] >= len(HEAD)  # read at 200: its time started again
    assert observe(cache, 256, 800.0) == (0, True)  # 350 s after the last use: gone
    never = make_cache(provider)  # no TTL: the pause does not matter
    observe(never, 64, 0.0)
    assert observe(never, 128, 1e6)[0] >= len(HEAD)
    untimed = make_cache(provider, ttl=300)  # calls without a time never expire
    observe(untimed, 64, None)
    assert observe(untimed, 128, None)[0] >= len(HEAD)


@pytest.mark.parametrize("provider", ["anthropic", "deepseek"])
def test_a_cap_limits_one_read_and_keeps_what_was_cached(provider: str) -> None:
    cache = make_cache(provider)
    a, b, c = list(range(5000, 5640)), list(range(6000, 6064)), list(range(7000, 7064))

    def call(chunks: list[list[int]], cap: int | None = None) -> int:
        ends = [sum(len(x) for x in chunks[: i + 1]) for i in range(len(chunks))]
        marks = [ends[0], ends[-1]] if provider == "anthropic" else None
        return cache.observe(chunks, marks, cap=cap).hit_tokens

    call([HEAD, a])
    assert call([HEAD, a, b], cap=len(HEAD)) == len(HEAD)
    assert call([HEAD, a, b, c]) >= len(HEAD) + len(a)  # what the provider held is read again next call


def test_a_warm_head_is_read_on_the_first_call() -> None:
    cache = make_cache("anthropic")
    cache.warm(len(HEAD))
    usage = cache.observe(_prompt(64), [len(HEAD), len(HEAD) + 64])
    assert (usage.hit_tokens, usage.write_tokens) == (len(HEAD), 64)
    cold = make_cache("anthropic").observe(_prompt(64), [len(HEAD), len(HEAD) + 64])
    assert cold.hit_tokens == 0


def _call(prompt: list[dict[str, str]], read: int, write: int, at: float, hour: int = 0) -> TraceCall:
    total = read + write + 10
    return TraceCall(
        prompt, {"role": "assistant", "content": "ok"}, total, read, 5, 10, read, write, at, hour
    )


def test_recorded_luck_caps_short_reads_but_not_pauses_or_rewritten_prompts() -> None:
    a, b, c, d = ({"role": "user", "content": str(n)} for n in range(4))
    calls = [
        _call([a], 20_000, 10_000, 0.0),
        _call([a, b], 30_000, 500, 60.0),  # read all the last call left: no drop
        _call([a, b, c], 20_000, 11_000, 120.0),  # read only the head, 60 s later: a drop
        _call([a, b, c, d], 0, 31_500, 1000.0),  # after 880 s: the 5-minute TTL explains it
        _call([d], 0, 5_000, 1010.0),  # the prompt was rewritten (a compaction): the policy's part
    ]
    trace = Trace("t", "test", "anthropic", calls, "claude-code")
    luck = recorded_luck(trace, "anthropic")
    assert luck.caps == {2: 20_000} and luck.ttl == 300.0 and luck.write_factor == 1.25
    assert luck.warm == 20_000
    assert recorded_luck(trace, "openai").caps == {}  # another provider would have had its own luck
    hourly = Trace("h", "test", "anthropic", [_call([a], 0, 9_000, 0.0, hour=9_000)], "claude-code")
    assert ttl_of(hourly, "anthropic") == HOUR_S and recorded_luck(hourly, "anthropic").write_factor == 2.0
    untimed = Trace("u", "test", "deepseek", [TraceCall([a], {}, 100, 0)], "swe")
    assert ttl_of(untimed, "deepseek") is None


def test_the_replay_with_a_clock_bills_what_the_provider_billed_a_short_session() -> None:
    """The bundled one-call Claude Code session, whose head an earlier session left warm: the cache
    that never forgets billed it 1.72x what the provider did; with the recorded luck, within 3%."""
    trace = load_trace(DATA / "short.jsonl.gz")
    never = replay_trace(trace, Vanilla(), clock="none")
    timed = replay_trace(trace, Vanilla(), clock="recorded")
    assert never.K / never.recorded_K > 1.5  # both at the five-minute write price it assumed
    assert abs(timed.K / timed.recorded_K - 1) < 0.03, (timed.K, timed.recorded_K)
    assert timed.hit_tokens > 0 and never.hit_tokens == 0


def test_a_tool_heavy_session_is_billed_within_3_percent_with_its_unseen_input() -> None:
    """The bundled 12-call Claude Code session: its transcript holds 4% less input than was billed
    (thinking kept as a summary); put back where it was sent, the replay bills it within 3%."""
    trace = load_trace(DATA / "tool_heavy.jsonl.gz")
    never = replay_trace(trace, Vanilla(), clock="none")
    timed = replay_trace(trace, Vanilla(), clock="recorded")
    assert timed.input_tokens == timed.recorded_prompt_tokens > never.input_tokens
    assert abs(timed.K / timed.recorded_K - 1) < 0.03, (timed.K, timed.recorded_K)
    assert abs(never.K / never.recorded_K - 1) > 0.10
