"""The replay names the cause of every uncached token (issue #43 item 2): ``replay --json`` gives each
call's causes and the session's totals, and the causes' money is the session's uncached money."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from test_replay_compaction import compacted_trace, compacting_config, small_window  # noqa: F401

from lightmem_plugin.measure.replay import LightMemPolicy, SessionResult, Vanilla, replay_trace
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.metering import misses

DATA = Path(__file__).parent / "data"


def causes(res: SessionResult) -> dict[str, int]:
    return {c["cause"]: c["tokens"] for c in res.miss_causes["causes"]}


def call_causes(res: SessionResult, call: int | str) -> dict[str, int]:
    found = [m for m in res.misses if m["call"] == call]
    return {c["cause"]: c["tokens"] for m in found for c in m["causes"]}


def assert_whole(res: SessionResult) -> None:
    """Every uncached token named once, and the money of the causes is the session's uncached money."""
    assert res.miss_causes["uncachedTokens"] == res.miss_tokens > 0
    assert sum(causes(res).values()) == res.miss_tokens
    per_call = sum(c["tokens"] for m in res.misses for c in m["causes"])
    assert per_call == res.miss_tokens
    assert res.uncached_usd is not None and res.uncached_usd > 0
    assert res.miss_causes["uncachedUsd"] == pytest.approx(res.uncached_usd, rel=0.01)


def test_a_recorded_session_s_misses_are_its_first_call_new_content_and_the_provider_s_drops() -> None:
    """The bundled tool-heavy Claude Code session: the first call, what each call appended, and what the
    recorded provider read short of what it held (its luck, replayed)."""
    res = replay_trace(load_trace(DATA / "tool_heavy.jsonl.gz"), Vanilla())
    assert_whole(res)
    assert call_causes(res, 0) == {misses.FIRST: res.misses[0]["causes"][0]["tokens"]}
    assert set(causes(res)) <= {misses.FIRST, misses.NEW, misses.DROP}
    assert causes(res)[misses.NEW] > 0


def test_the_host_s_compaction_and_lightmem2_s_own_are_named(small_window: None, tmp_path: Path) -> None:  # noqa: F811
    """Vanilla: the summarising call and the call after it are the host's compaction. Aggressive,
    compacting before the host: its batch is named by what it paged out, and the host never is."""
    trace = compacted_trace()
    vanilla = replay_trace(trace, Vanilla())
    assert vanilla.host_compactions == 1
    assert_whole(vanilla)
    before = vanilla.compacted_before[0]
    assert set(call_causes(vanilla, f"summary before {before}")) == {misses.HOST_COMPACTION}
    assert misses.HOST_COMPACTION in call_causes(vanilla, before)
    policy = LightMemPolicy(trace, "aggressive", tmp_path, compacting_config())
    ours = replay_trace(trace, policy)
    assert ours.host_compactions == 0
    assert_whole(ours)
    assert misses.HOST_COMPACTION not in causes(ours)
    made = policy.session.evictor.state.compactions[0]
    named = [c for m in ours.misses if m["call"] == made.call - 1 for c in m["causes"]]
    mine = [c for c in named if c["cause"] == misses.OURS]
    assert mine and mine[0]["detail"].startswith("compaction before the host's limit"), named


def test_a_pause_past_the_ttl_is_an_expiry_with_its_idle_gap() -> None:
    """The tool-heavy session with a 2-hour pause before its third call: that call's prefix had
    expired (its recorded writes are 1-hour ones)."""
    trace = load_trace(DATA / "tool_heavy.jsonl.gz")
    first = trace.calls[0].at
    assert first is not None
    calls: list[Any] = [
        dataclasses.replace(c, at=(first + 10.0 * i + (7200.0 if i >= 2 else 0.0)))
        for i, c in enumerate(trace.calls)
    ]
    paused = dataclasses.replace(trace, calls=calls)
    res = replay_trace(paused, Vanilla())
    assert_whole(res)
    at2 = [c for m in res.misses if m["call"] == 2 for c in m["causes"]]
    expiry = [c for c in at2 if c["cause"] == misses.EXPIRY]
    assert expiry and expiry[0]["detail"].startswith("idle 7,210 s"), at2
    assert expiry[0]["tokens"] > 0.8 * sum(c["tokens"] for c in at2)


def test_a_change_another_policy_makes_is_the_peer_s() -> None:
    """A policy that is not lightmem2 (here one that drops the oldest tool output at the third call)
    changed the past: its cause is a peer change, never lightmem2's."""

    class DropsOldest(Vanilla):
        def transform(self, index: int, prompt: list[dict[str, Any]]) -> list[dict[str, Any]]:
            if index < 2:
                return prompt
            first = next(i for i, m in enumerate(prompt) if m.get("role") == "tool")
            return [*prompt[:first], {**prompt[first], "content": "[dropped]"}, *prompt[first + 1 :]]

    res = replay_trace(load_trace(DATA / "tool_heavy.jsonl.gz"), DropsOldest())
    assert_whole(res)
    assert misses.PEER in call_causes(res, 2) and misses.OURS not in causes(res)
