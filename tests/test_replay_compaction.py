"""Replay with the host's compaction: as recorded, or modelled on the history as if the host had not
compacted, past the host's threshold, on the context the policy sent."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import xxhash

from lightmem_plugin.config import Config
from lightmem_plugin.measure import compaction
from lightmem_plugin.measure.replay import LightMemPolicy, Vanilla, replay_trace
from lightmem_plugin.measure.traces.base import RecordedCompaction, Trace, TraceCall
from lightmem_plugin.metering.chat_tokens import ChatChunker
from lightmem_plugin.reduction.base import stub
from lightmem_plugin.tokens import TokenCounter

QUOTED = "line 0-5: value 0 of the module state"
THRESHOLD = 2_000  # the fixture's context passes it before call 4 (2,390 tokens; 1,798 before call 3)


def _output(n: int) -> str:
    """A tool output of about 500 tokens, its lines distinct from every other output's; the first
    ends in an error line."""
    lines = [f"line {n}-{j}: value {n * j} of the module state" for j in range(40)]
    return "\n".join(lines + (["ValueError: part0 has no module state"] if n == 0 else []))


def _answer(text: str, n: int | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if n is not None:
        args = json.dumps({"command": f"cat part{n}.py"})
        message["tool_calls"] = [
            {"id": f"c{n}", "type": "function", "function": {"name": "Bash", "arguments": args}}
        ]
    return message


def compacted_trace() -> Trace:
    """Eight calls reading eight files; the recorded host compacted before call 4, and the last call
    quotes a line of the first file."""
    summary = {"role": "user", "content": "Summary: the agent read part0.py to part3.py."}
    answers = [_answer("", n) for n in range(7)] + [_answer(f"As part0 said: {QUOTED}", None)]
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read the parts."}]
    calls = []
    cut: int | None = None  # the recorded compaction summarised the history before call 4
    for i, out in enumerate(answers):
        whole = list(history)
        cut = len(whole) if i == 4 else cut
        if cut is None:
            calls.append(TraceCall(whole, out, 0, 0, 9))
        else:
            calls.append(TraceCall([summary, *whole[cut:]], out, 0, 0, 9, whole=whole))
        history.append(out)
        if "tool_calls" in out:
            history.append({"role": "tool", "tool_call_id": f"c{i}", "content": _output(i)})
    return Trace(
        "compacted",
        "test",
        "anthropic",
        calls,
        kind="claude-code",
        model="claude-opus-4-6",
        compactions=[RecordedCompaction(4, "auto", 1_600, summary)],
    )


class StubTools(Vanilla):
    """Every tool output as a stub whose key recovers it: a policy that keeps the context small."""

    def __init__(self) -> None:
        self.archive: dict[str, str] = {}

    def transform(self, index: int, prompt: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for m in prompt:
            if m.get("role") == "tool":
                key = xxhash.xxh3_64_hexdigest(m["content"].encode())
                self.archive[key] = m["content"]
                m = {**m, "content": stub(key, len(m["content"]))}
            out.append(m)
        return out

    def lookup(self, key: str) -> str | None:
        return self.archive.get(key)


def compacting_config() -> Config:
    """Aggressive mode compacting before the fixture's small threshold, at every call."""
    settings = {
        "compactBeforeHost": True,
        "batchTurns": 1,
        "compactAtTokens": THRESHOLD,
        "compactMarginTokens": 600,
        "compactKeepTokens": 500,
    }
    cfg = Config(mode="aggressive")
    return cfg.model_copy(update={"eviction": cfg.eviction.model_copy(update=settings)})


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(compaction.HOST_LIMITS, "claude-code", compaction.HostLimit(THRESHOLD, "test"))


def _prompts(dump: Path) -> list[list[dict[str, Any]]]:
    return [json.loads(line)["messages"] for line in dump.read_text().splitlines()]


def test_the_modelled_host_compacts_past_its_threshold_and_pays_for_the_summary(
    small_window: None, tmp_path: Path
) -> None:
    """Vanilla passes the threshold where the recording compacted: the modelled prompts are the
    recorded ones, and the session costs them plus the summarising call."""
    trace = compacted_trace()
    counter = TokenCounter()
    modelled = replay_trace(trace, Vanilla(), dump=tmp_path / "m.jsonl", counter=counter)
    recorded = replay_trace(
        trace, Vanilla(), dump=tmp_path / "r.jsonl", counter=counter, compaction="recorded"
    )
    prompts = _prompts(tmp_path / "m.jsonl")
    summary = trace.compactions[0].summary
    # before the compaction the host sends the whole history; from it on, the summary and what followed
    assert all(prompts[i] == trace.calls[i].uncompacted for i in range(4))
    assert prompts[4] == [summary]
    assert prompts == [c.prompt for c in trace.calls] == _prompts(tmp_path / "r.jsonl")
    assert (modelled.host_compactions, modelled.recorded_compactions) == (1, 1)
    assert (recorded.host_compactions, recorded.compaction_output_tokens) == (1, 0)
    # the summarising call: it reads the context of call 3 and what was added since, and writes the
    # summary as output; the recorded replay has no such call
    summary_tokens = modelled.compaction_output_tokens
    assert summary_tokens == sum(map(len, ChatChunker(counter.encode, head=0).chunks([summary])))
    assert (
        modelled.output_tokens
        == recorded.output_tokens + summary_tokens
        == 9 * len(trace.calls) + summary_tokens
    )
    assert modelled.calls == recorded.calls == len(trace.calls)
    extra = modelled.input_tokens - recorded.input_tokens
    assert 2_390 + compaction.INSTRUCTION_TOKENS - 50 < extra < 2_390 + compaction.INSTRUCTION_TOKENS + 50
    assert modelled.K > recorded.K and modelled.usd is not None and recorded.usd is not None
    assert modelled.usd > recorded.usd
    # part0's error line: shown while the host showed part0 (calls 2 to 4), and not asked of the
    # policy once the host's compaction took it away
    assert (modelled.error_pairs, modelled.error_pairs_kept) == (3, 3)
    # the quote of part0 at the last call: gone with the compaction, in both
    assert (modelled.lost, modelled.lost_to_compaction) == (1, 1)
    assert (recorded.lost, recorded.lost_to_compaction) == (1, 1)


def test_a_later_compaction_summarises_more_and_a_stand_in_follows_the_recorded_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With a larger window the host compacts later, over the history up to then; past the recorded
    summaries, a stand-in of their size that repeats nothing."""
    monkeypatch.setitem(compaction.HOST_LIMITS, "claude-code", compaction.HostLimit(1_000, "test"))
    trace = compacted_trace()
    result = replay_trace(trace, Vanilla(), dump=tmp_path / "m.jsonl")
    prompts = _prompts(tmp_path / "m.jsonl")
    firsts = [p[0]["content"] for p in prompts]
    assert firsts[2] == trace.compactions[0].summary["content"]  # 1,206 tokens before call 2
    later = next(i for i, f in enumerate(firsts) if f.startswith("[the host's summary"))
    assert later > 2 and result.host_compactions >= 2
    assert prompts[later][0]["content"].startswith(
        "[the host's summary of the conversation before compaction 2]"
    )


def test_a_policy_that_keeps_the_context_small_meets_no_compaction(small_window: None) -> None:
    trace = compacted_trace()
    result = replay_trace(trace, StubTools())
    assert (result.host_compactions, result.compaction_output_tokens) == (0, 0)
    # the quote is recoverable from its stub, not lost
    assert (result.lost, result.recoverable, result.lost_to_compaction) == (0, 1, 0)


def test_a_host_without_compaction_never_compacts(small_window: None) -> None:
    """The same calls past the (small) Claude Code threshold: recorded by mini-swe-agent, which does
    not compact, the host never does."""
    trace = compacted_trace()
    swe = Trace(trace.id, "test", "deepseek", [TraceCall(c.uncompacted, c.output, 0, 0) for c in trace.calls])
    as_claude_code = dataclasses.replace(swe, kind="claude-code")
    assert replay_trace(as_claude_code, Vanilla()).host_compactions >= 1
    result = replay_trace(swe, Vanilla())
    assert (result.host_compactions, result.lost) == (0, 0)


def test_a_host_that_keeps_recent_messages_keeps_them_after_the_summary(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """OpenClaw keeps its latest messages (compaction.keepRecentTokens) after the summary, starting at
    a message that is not a tool result: here the last call and its output (~620 tokens of 700)."""
    monkeypatch.setitem(compaction.HOST_LIMITS, "openclaw", compaction.HostLimit(THRESHOLD, "test", 700))
    trace = dataclasses.replace(compacted_trace(), kind="openclaw")
    replay_trace(trace, Vanilla(), dump=tmp_path / "m.jsonl")
    prompts = _prompts(tmp_path / "m.jsonl")
    whole = trace.calls[4].uncompacted
    assert prompts[4] == [trace.compactions[0].summary, *whole[-2:]]
    assert [m["role"] for m in whole[-2:]] == ["assistant", "tool"]
    assert prompts[5][:3] == prompts[4]


def test_aggressive_compacts_first_losslessly_and_the_host_never_does(
    small_window: None, tmp_path: Path
) -> None:
    """lightmem2 pages out all but the newest history at a batch before the modelled host's threshold:
    the host never compacts, and nothing is lost: part0, the newest run of its command and ending in
    an error line, stays whole (the agent acts on such lines), the other parts leave behind stubs."""
    cfg = compacting_config()
    trace = compacted_trace()
    policy = LightMemPolicy(trace, "aggressive", tmp_path, cfg)
    res = replay_trace(trace, policy)
    vanilla = replay_trace(trace, Vanilla())
    assert (vanilla.host_compactions, vanilla.lost) == (1, 1)
    made = policy.session.evictor.state.compactions
    assert made and made[0].call <= 4  # at a batch before the call the host compacted before
    assert (res.host_compactions, res.lost, res.lost_to_compaction) == (0, 0, 0)
    assert made[0].outputs >= 1 and res.kept == res.uses  # the quote of part0 is of a kept output
    off = cfg.model_copy(update={"eviction": cfg.eviction.model_copy(update={"compactBeforeHost": False})})
    assert (
        replay_trace(trace, LightMemPolicy(trace, "aggressive", tmp_path / "off", off)).host_compactions == 1
    )
