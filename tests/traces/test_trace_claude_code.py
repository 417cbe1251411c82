"""The Claude Code reader: real transcripts and hand-made ones for each rule of the prompt rebuild."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.errors import TraceError
from lightmem_plugin.measure.traces import load_trace

DATA = Path(__file__).resolve().parents[1] / "data"

USAGE = {
    "input_tokens": 3,
    "cache_read_input_tokens": 1000,
    "cache_creation_input_tokens": 200,
    "output_tokens": 9,
}


class Transcript:
    """Builds Claude Code events chained by parentUuid, the way Claude Code writes them."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.last: str | None = None

    def add(self, kind: str, parent: str | None = "last", **fields: Any) -> str:
        uuid = f"u{len(self.events)}"
        event = {"type": kind, "uuid": uuid, "parentUuid": self.last if parent == "last" else parent}
        event.update(fields)
        self.events.append(event)
        self.last = uuid
        return uuid

    def user(self, content: Any, parent: str | None = "last", **fields: Any) -> str:
        return self.add("user", parent, message={"role": "user", "content": content}, **fields)

    def assistant(self, mid: str, block: dict[str, Any], parent: str | None = "last") -> str:
        message = {"id": mid, "role": "assistant", "model": "claude-x", "content": [block], "usage": USAGE}
        return self.add("assistant", parent, message=message, sessionId="s1", version="2.1.0")

    def progress(self) -> str:
        return self.add("progress", data={"type": "hook_progress"})

    def write(self, tmp_path: Path) -> Path:
        path = tmp_path / "t.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in self.events))
        return path


def tool_use(tid: str, name: str = "Bash", **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": args}


def result(tid: str, content: Any) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": tid, "content": content}]


def test_short_real_transcript() -> None:
    trace = load_trace(DATA / "short.jsonl.gz")
    assert (trace.kind, trace.provider, trace.model) == ("claude-code", "anthropic", "claude-opus-4-6")
    assert trace.source == "claude-code 2.1.38"
    assert trace.id == "55604662-cf2a-4331-851a-ec234028f8ca"
    [call] = trace.calls
    assert call.prompt == [{"role": "user", "content": "mix phx.server doesnt seem to start"}]
    assert (call.prompt_tokens, call.cached_tokens) == (3 + 13835 + 11515, 11515)
    assert (call.input_tokens, call.cache_creation_input_tokens, call.completion_tokens) == (3, 13835, 13)
    # the first assistant event's timestamp, 2026-02-10T21:11:59.186Z
    assert call.at == datetime(2026, 2, 10, 21, 11, 59, 186000, tzinfo=UTC).timestamp()
    out = call.output
    assert [c["function"]["name"] for c in out["tool_calls"]] == ["Bash", "Glob"]
    assert json.loads(out["tool_calls"][0]["function"]["arguments"]) == {
        "command": "mix phx.server 2>&1 | head -80",
        "timeout": 30000,
    }
    assert out["content"][1]["text"].startswith("Let me check the project structure")
    assert out["reasoning_content"].startswith("The user is having trouble")


def test_tool_heavy_real_transcript_is_append_only() -> None:
    trace = load_trace(DATA / "tool_heavy.jsonl.gz")
    assert [len(c.prompt) for c in trace.calls] == [1, 3, 10, 13]
    for before, after in zip(trace.calls, trace.calls[1:], strict=False):
        assert after.prompt[: len(before.prompt)] == before.prompt
        assert after.prompt[len(before.prompt)] is before.output
    for call in trace.calls:
        asked = [c["id"] for m in call.prompt if m["role"] == "assistant" for c in m.get("tool_calls", [])]
        answered = [m["tool_call_id"] for m in call.prompt if m["role"] == "tool"]
        assert asked == answered


def test_parallel_results_off_the_chain(tmp_path: Path) -> None:
    """Each result hangs off its own tool_use event; the next call follows only the last one."""
    t = Transcript()
    t.progress()
    t.user("go")
    first = t.assistant("m1", tool_use("a", command="ls"))
    t.progress()
    t.assistant("m1", tool_use("b", command="pwd"))
    t.user(result("a", "file.txt"), parent=first)
    t.user(result("b", "/home/USER"), parent="u4")
    t.assistant("m2", {"type": "text", "text": "done"})
    trace = load_trace(t.write(tmp_path))
    assert len(trace.calls) == 2
    assert [c.at for c in trace.calls] == [None, None]  # events without a timestamp: no time, no error
    prompt = trace.calls[1].prompt
    assert [m["role"] for m in prompt] == ["user", "assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in prompt[2:]] == ["a", "b"]
    assert prompt[3]["content"] == "/home/USER"
    assert prompt[1] is trace.calls[0].output


def test_sequential_results_between_blocks_merge_into_one_message(tmp_path: Path) -> None:
    t = Transcript()
    t.user("go")
    t.assistant("m1", {"type": "text", "text": "reading"})
    t.assistant("m1", tool_use("a", "Read", file_path="x.py"))
    t.user(
        result(
            "a",
            [
                {"type": "text", "text": "line 1"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QQ=="}},
            ],
        )
    )
    t.assistant("m1", tool_use("b", "Read", file_path="y.py"))
    t.user(result("b", "line 2"))
    t.user([{"type": "text", "text": "also check z"}])
    t.assistant("m2", {"type": "text", "text": "ok"})
    trace = load_trace(t.write(tmp_path))
    prompt = trace.calls[1].prompt
    assert [m["role"] for m in prompt] == ["user", "assistant", "tool", "tool", "user"]
    assert prompt[1]["content"] == "reading"
    assert [c["id"] for c in prompt[1]["tool_calls"]] == ["a", "b"]
    assert prompt[2]["content"] == [
        {"type": "text", "text": "line 1"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,QQ=="}},
    ]
    assert prompt[4] == {"role": "user", "content": "also check z"}


def test_compaction_starts_a_new_chain(tmp_path: Path) -> None:
    t = Transcript()
    t.user("old task")
    t.assistant("m1", {"type": "text", "text": "old answer"})
    t.add("system", parent=None, subtype="compact_boundary", logicalParentUuid="u1")
    t.user("Summary of the earlier conversation", isCompactSummary=True)
    t.progress()
    t.assistant("m2", {"type": "text", "text": "continuing"})
    trace = load_trace(t.write(tmp_path))
    assert trace.calls[0].prompt == [{"role": "user", "content": "old task"}]
    assert trace.calls[1].prompt == [{"role": "user", "content": "Summary of the earlier conversation"}]


def _compacted(t: Transcript, logical: str | None) -> None:
    t.user("old task")
    t.assistant("m1", tool_use("a", command="ls"))
    t.user(result("a", "a.py b.py"))
    t.add(
        "system",
        parent=None,
        subtype="compact_boundary",
        logicalParentUuid=logical,
        compactMetadata={"trigger": "auto", "preTokens": 167094},
    )
    t.user("Summary of the earlier conversation", isCompactSummary=True)
    t.progress()
    t.assistant("m2", tool_use("b", command="cat a.py"))
    t.user(result("b", "print(1)"))
    t.assistant("m3", {"type": "text", "text": "done"})


@pytest.mark.parametrize("logical", ["u2", "gone-from-the-file"])
def test_a_compacted_call_also_has_its_history_as_if_the_host_had_not_compacted(
    tmp_path: Path, logical: str
) -> None:
    """The whole prompt goes on from the event the compaction followed (by ``logicalParentUuid``, or
    the last message written before the boundary where that event is not in the file, as in a dev
    session), without the summary; the recorded compaction names the first call that saw it."""
    t = Transcript()
    _compacted(t, logical)
    trace = load_trace(t.write(tmp_path))
    assert trace.calls[0].whole is None and trace.calls[0].uncompacted is trace.calls[0].prompt
    summary = {"role": "user", "content": "Summary of the earlier conversation"}
    assert trace.calls[1].prompt == [summary]
    assert [m["role"] for m in trace.calls[1].uncompacted] == ["user", "assistant", "tool"]
    assert trace.calls[1].uncompacted[2]["content"] == "a.py b.py"
    assert [m.get("content") for m in trace.calls[2].prompt] == [summary["content"], "", "print(1)"]
    assert trace.calls[2].uncompacted[:3] == trace.calls[1].uncompacted
    assert trace.calls[2].uncompacted[3:] == trace.calls[2].prompt[1:]
    [compaction] = trace.compactions
    assert (compaction.before_call, compaction.trigger, compaction.pre_tokens) == (1, "auto", 167094)
    assert compaction.summary is trace.calls[1].prompt[0]


def test_result_recorded_after_the_call_is_not_in_its_prompt(tmp_path: Path) -> None:
    """A prompt only takes what was recorded before the call (no look-ahead)."""
    t = Transcript()
    t.user("go")
    t.assistant("m1", tool_use("a", command="sleep 1"))
    t.assistant("m2", {"type": "text", "text": "interrupted"})
    t.user(result("a", "late"), parent="u1")
    trace = load_trace(t.write(tmp_path))
    assert [m["role"] for m in trace.calls[1].prompt] == ["user", "assistant"]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"type": "user"}', "{not json"], "line 2 is not JSON"),
        (['{"type": "user"}', "[1, 2]"], "line 2 is not a Claude Code event"),
        (['{"type": "assistant", "uuid": "a"}'], "event 1 \\(assistant\\) has no 'message' object"),
        (
            ['{"type": "assistant", "uuid": "a", "message": {"id": "m", "content": []}}'],
            "assistant event on line 1 has no message.usage object",
        ),
        (
            [
                '{"type": "assistant", "uuid": "a", "message": {"id": "m", "content": [], '
                '"usage": {"input_tokens": "3"}}}'
            ],
            "message.usage.input_tokens is '3'",
        ),
        (
            [
                '{"type": "user", "uuid": "a", "parentUuid": "b", "message": {"content": "x"}}',
                '{"type": "user", "uuid": "b", "parentUuid": "a", "message": {"content": "y"}}',
                '{"type": "assistant", "uuid": "c", "parentUuid": "b", "message": {"id": "m", "usage": {}}}',
            ],
            "parentUuid cycle",
        ),
    ],
)
def test_bad_transcripts(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError, match=message) as info:
        load_trace(path)
    assert str(path) in str(info.value)
