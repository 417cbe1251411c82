"""The provider's cache goes cold after a pause past its TTL, or drops on its own: lightmem2 tells both
(issue #42 item 1), counts them per session, says them in ``status`` and ``report``, and a replay
meets the same pauses as its cache model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.commands import report, status
from lightmem_plugin.config import Config
from lightmem_plugin.eviction import cold_cache
from lightmem_plugin.eviction.cold_cache import HOUR_S, WARM, Verdict
from lightmem_plugin.measure.replay import LightMemPolicy, replay_trace
from lightmem_plugin.measure.traces.base import Trace, TraceCall
from lightmem_plugin.model import Message, Request, TextPart
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.store.registry import Registry
from lightmem_plugin.store.session_state import StateStore


# -- the decision ----------------------------------------------------------------------------------
def test_a_pause_past_the_ttl_is_cold_and_one_within_it_is_warm() -> None:
    assert cold_cache.by_pause(1000.0, 1301.0, 300.0) == Verdict(True, "pause 301 300")
    assert cold_cache.by_pause(1000.0, 1300.0, 300.0) is WARM  # kept up to the TTL, as the cache model
    assert cold_cache.by_pause(1000.0, 1060.0, 300.0) is WARM


def test_no_previous_call_no_time_or_no_known_ttl_is_warm() -> None:
    assert cold_cache.by_pause(None, 5000.0, 300.0) is WARM  # the session's first call
    assert cold_cache.by_pause(1000.0, None, 300.0) is WARM  # a call without a time
    assert cold_cache.by_pause(1000.0, 90_000.0, None) is WARM  # DeepSeek: kept hours, no TTL known


def _asking(ttl: str | None) -> Request:
    mark = {"cache_control": {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}}
    return Request(
        [Message("system", [TextPart("You code.", extra=mark)]), Message("user", [TextPart("hi")])]
    )


def test_the_ttl_in_force_is_the_setting_else_the_request_s_else_the_provider_s() -> None:
    assert cold_cache.requested_ttl(_asking("1h"), "anthropic") == HOUR_S
    assert cold_cache.requested_ttl(_asking(None), "anthropic") is None  # five minutes: nothing longer
    hour_tool = Request([], [{"name": "t", "cache_control": {"type": "ephemeral", "ttl": "1h"}}])
    assert cold_cache.requested_ttl(hour_tool, "anthropic") == HOUR_S
    day = Request(extra={"prompt_cache_retention": "24h"})
    assert cold_cache.requested_ttl(day, "openai") == 24 * HOUR_S
    assert cold_cache.requested_ttl(day, "deepseek") is None
    assert cold_cache.ttl_in_force("anthropic", None, None) == 300.0
    assert cold_cache.ttl_in_force("anthropic", HOUR_S, None) == HOUR_S
    assert cold_cache.ttl_in_force("openai", None, None) == 600.0
    assert cold_cache.ttl_in_force("deepseek", None, None) is None
    assert cold_cache.ttl_in_force(None, None, None) is None
    assert cold_cache.ttl_in_force("anthropic", HOUR_S, 120.0) == 120.0  # eviction.cacheTtlS wins
    # a 1h request keeps a 20-minute pause warm that the default would call cold
    assert cold_cache.by_pause(0.0, 1200.0, cold_cache.ttl_in_force("anthropic", HOUR_S, None)) is WARM
    assert cold_cache.by_pause(0.0, 1200.0, cold_cache.ttl_in_force("anthropic", None, None)).cold


def test_a_drop_is_a_read_at_least_1024_short_with_the_prefix_unchanged() -> None:
    left = cold_cache.left_cached(20_000, 10_000, 30_010)  # Anthropic: reads plus writes
    assert left == 30_000 and cold_cache.left_cached(None, None, 7_000) == 7_000  # else the prompt
    assert cold_cache.by_drop(left, 21_460, True) == Verdict(True, "drop 8540")
    assert cold_cache.by_drop(left, 29_000, True) is WARM  # 1,000 short: where cache blocks fall
    assert cold_cache.by_drop(left, 21_460, False) is WARM  # the prefix changed: our break, not a drop
    assert cold_cache.by_drop(None, 0, True) is WARM  # the call before reported no usage


def test_the_summary_line_says_count_kind_ttl_and_last_call() -> None:
    assert cold_cache.summary([]) == "cold starts: none seen"
    two = [(12, "pause 1800 300"), (57, "pause 400 300")]
    assert cold_cache.summary(two) == "cold starts: 2 (pauses past the 5-minute TTL), the last at call 57"
    mixed = [(3, "pause 4000 3600"), (9, "drop 45000")]
    assert cold_cache.summary(mixed) == (
        "cold starts: 2 (1 pause past the 1-hour TTL, 1 drop shown by the provider's usage), the last at call 9"
    )
    assert cold_cache.describe("drop 45000") == "a drop of 45,000 tokens shown by the provider's usage"


# -- the session -----------------------------------------------------------------------------------
def _usage(read: int, write: int) -> dict[str, int]:
    return {"input_tokens": 10, "cache_read_input_tokens": read, "cache_creation_input_tokens": write}


def _session(tmp_path: Path, **eviction: Any) -> tuple[LightMem, Any]:
    cfg = Config.model_validate({"mode": "normal", "eviction": eviction})
    lm = LightMem(config=cfg, registry=Registry(tmp_path / "reg"), ledger=Ledger(tmp_path / "ledger.sqlite3"))
    return lm, lm.session("s")


def _run(s: Any, times: list[float], reads: list[tuple[int, int]] | None = None) -> None:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You code."}]
    for k, at in enumerate(times):
        msgs.append({"role": "user", "content": f"step {k}"})
        s.before_model_call(msgs, api="anthropic", now=at)
        answer = {"role": "assistant", "content": f"done {k}"}
        s.after_model_call(answer, _usage(*reads[k]) if reads else None, api="anthropic")
        msgs.append(answer)


def test_the_session_counts_cold_starts_and_status_and_report_say_them(tmp_path: Path) -> None:
    lm, s = _session(tmp_path)
    # calls 1-4 a minute apart, a 30-minute pause before call 5, another before call 7
    _run(s, [0.0, 60.0, 120.0, 180.0, 1980.0, 2040.0, 3900.0, 3960.0])
    assert s.cold_starts == [(5, "pause 1800 300"), (7, "pause 1860 300")]
    line = "cold starts: 2 (pauses past the 5-minute TTL), the last at call 7"
    assert line in report.run(lm.ledger, "s")
    assert line in status.run(lm.ledger, lm.registry, lm.config, "s")
    # the price of a break at the last call, which was warm, is the cache's own again
    assert s.evictor.break_cost.per_token == 1.15 and not s.evictor.break_cost.cold


def test_a_cold_call_prices_its_break_free(tmp_path: Path) -> None:
    _, s = _session(tmp_path)
    _run(s, [0.0, 1000.0])
    assert s.cold.cold and s.evictor.break_cost.per_token == 0.0 and s.evictor.break_cost.cold


def test_the_setting_overrides_the_provider_ttl(tmp_path: Path) -> None:
    _, s = _session(tmp_path, cacheTtlS=3600)
    _run(s, [0.0, 1000.0, 5000.0])
    assert s.cold_starts == [(3, "pause 4000 3600")]


def test_a_drop_the_usage_shows_is_a_cold_start_of_that_call(tmp_path: Path) -> None:
    lm, s = _session(tmp_path)
    # call 3 read 8,540 tokens short of what call 2 left (20,000 + 10,000), a minute after it
    _run(s, [0.0, 60.0, 120.0, 180.0], [(0, 20_000), (20_000, 10_000), (21_460, 8_600), (30_060, 100)])
    assert s.cold_starts == [(3, "drop 8540")]
    assert not s.cold.cold  # call 4 found what call 3 wrote again: its break is not free
    assert "cold starts: 1 (drop shown by the provider's usage), the last at call 3" in report.run(
        lm.ledger, "s"
    )
    assert [c.cold_start for c in lm.ledger.calls("s")] == [None, None, "drop 8540", None]


def test_the_session_clock_decides_when_no_time_is_passed(tmp_path: Path) -> None:
    _, s = _session(tmp_path)
    now = [0.0]
    s.clock = lambda: now[0]
    msgs = [{"role": "user", "content": "a"}]
    s.before_model_call(msgs, api="anthropic")
    now[0] = 200.0  # the answer came 200 s later: the cache was used until then
    s.after_model_call({"role": "assistant", "content": "b"}, _usage(0, 2_000), api="anthropic")
    now[0] = 450.0  # 450 s after the call was sent, 250 s after its answer: still warm
    s.before_model_call(
        [*msgs, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}], api="anthropic"
    )
    assert not s.cold.cold
    now[0] = 800.0
    s.before_model_call([*msgs, {"role": "user", "content": "d"}], api="anthropic")
    assert s.cold == Verdict(True, "pause 350 300")


# -- the replay ------------------------------------------------------------------------------------
def _timed_trace(times: list[float]) -> Trace:
    task = "Fix the parser.\n" + "".join(f"line {n} of the failing log\n" for n in range(600))
    history: list[dict[str, Any]] = [{"role": "user", "content": task}]  # past the 1,024-token minimum
    calls = []
    for k, at in enumerate(times):
        out = {"role": "assistant", "content": f"step {k}"}
        calls.append(TraceCall(list(history), out, 100, 0, at=at))
        history += [out, {"role": "user", "content": f"go on {k}"}]
    return Trace("timed", "test", "anthropic", calls)


@pytest.mark.parametrize("clock", ["recorded", "none"])
def test_a_replayed_session_meets_the_recorded_pauses(tmp_path: Path, clock: Any) -> None:
    trace = _timed_trace([0.0, 30.0, 60.0, 2000.0, 2030.0])  # a 32-minute pause before call 4
    policy = LightMemPolicy(trace, "aggressive", tmp_path, clock=clock)
    result = replay_trace(trace, policy, clock=clock)
    if clock == "recorded":
        assert result.cold_starts == 1  # the cache model's cold start ...
        assert policy.session.cold_starts == [(4, "pause 1940 300")]  # ... is the session's too
        assert result.session_cold_starts == 1
    else:  # a cache that never forgets: no time in the session either
        assert result.cold_starts == 0 and policy.session.cold_starts == []


def test_a_session_whose_request_asks_for_an_hour_keeps_a_20_minute_pause_warm(tmp_path: Path) -> None:
    _, s = _session(tmp_path)
    mark = {"type": "ephemeral", "ttl": "1h"}
    system = {"role": "system", "content": [{"type": "text", "text": "You code.", "cache_control": mark}]}
    msgs: list[dict[str, Any]] = [system, {"role": "user", "content": "a"}]
    s.before_model_call(msgs, api="anthropic", now=0.0)
    msgs += [{"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    s.before_model_call(msgs, api="anthropic", now=1200.0)
    assert not s.cold.cold  # 20 minutes: past the default five, within the hour the request asked
    msgs += [{"role": "assistant", "content": "d"}, {"role": "user", "content": "e"}]
    s.before_model_call(msgs, api="anthropic", now=5000.0)
    assert s.cold == Verdict(True, "pause 3800 3600")


def test_a_session_reloaded_from_the_store_still_sees_the_pause(tmp_path: Path) -> None:
    """A session that left memory (idle past ``server.sessionIdleS``, a restart) keeps when the cache
    was last used, so the call after a long pause, the very one that is cold, is still told."""
    cfg = Config.model_validate({"mode": "normal"})

    def plugin() -> LightMem:
        return LightMem(
            config=cfg, registry=Registry(tmp_path / "reg"), states=StateStore(tmp_path / "s.sqlite3")
        )

    msgs: list[dict[str, Any]] = [{"role": "user", "content": "a"}]
    plugin().session("s").before_model_call(msgs, api="anthropic", now=100.0)
    msgs += [{"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    again = plugin().session("s")  # another process: the decisions come from the store
    again.before_model_call(msgs, api="anthropic", now=2000.0)
    assert again.calls == 2 and again.cold == Verdict(True, "pause 1900 300")
