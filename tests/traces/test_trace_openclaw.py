"""The OpenClaw reader: two sessions recorded from OpenClaw 2026.9.6, and hand-made entries for the
rules the recordings do not reach (branches, compaction, reset, v1 files, entries OpenClaw writes
itself) and for each error."""

from __future__ import annotations

import gzip
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import zstandard

from lightmem_plugin.cli import main
from lightmem_plugin.errors import TraceError
from lightmem_plugin.measure.replay import replay_paths, result_dicts, trace_files
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.measure.traces.base import Trace

DATA = Path(__file__).resolve().parents[1] / "data" / "openclaw"
CHAT = DATA / "openclaw-2026.9.6-openai-completions.jsonl"
ANTHROPIC = DATA / "openclaw-2026.9.6-anthropic-messages.jsonl"
NOTES = "apple\nbanana\ncherry\n"
ROLES = [
    ["user"],
    ["user", "assistant", "tool"],
    ["user", "assistant", "tool", "assistant", "user"],
    ["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "tool"],
    ["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "tool", "assistant", "user"],
]
USAGE = {"input": 10, "output": 2, "cacheRead": 100, "cacheWrite": 0, "totalTokens": 112}


def test_recorded_chat_completions_session() -> None:
    trace = load_trace(CHAT)
    assert (trace.kind, trace.id, trace.source) == (
        "openclaw",
        "772536c6-fbfb-4409-936f-25234bc6d182",
        "openclaw session v4",
    )
    assert (trace.provider, trace.model, trace.meta) == (
        "openai",
        "fake-model",
        {"openclaw_provider": "fake", "api": "openai-completions"},
    )
    assert [[m["role"] for m in c.prompt] for c in trace.calls] == ROLES
    # the provider's figures: input + cacheRead + cacheWrite is all input, cacheRead the cached part
    assert [(c.prompt_tokens, c.cached_tokens, c.completion_tokens) for c in trace.calls] == [
        (15428, 0, 5),
        (15485, 15344, 3),
        (15519, 15408, 19),
        (15620, 15440, 7),
        (15651, 15536, 3),
    ]
    assert all(c.input_tokens is None and c.cache_creation_input_tokens is None for c in trace.calls)
    # when each request started (the assistant message's own timestamp, epoch ms)
    assert [c.at for c in trace.calls] == [
        1796524219.039,
        1796524219.381,
        1796524234.592,
        1796524235.42,
        1796524249.063,
    ]
    last = trace.calls[-1].prompt
    assert last[0] == {"role": "user", "content": "please read notes.txt"}
    assert last[1]["tool_calls"] == [
        {
            "id": "call_1_0",
            "type": "function",
            "function": {"name": "read", "arguments": '{"path":"notes.txt"}'},
        }
    ]
    assert last[2] == {"role": "tool", "tool_call_id": "call_1_0", "content": NOTES}
    assert last[5]["content"] == "Running both."  # text and parallel calls in one message
    assert [c["function"]["arguments"] for c in last[5]["tool_calls"]] == [
        '{"command":"wc -l notes.txt"}',
        '{"command":"grep -n an notes.txt"}',
    ]
    assert last[6:8] == [
        {"role": "tool", "tool_call_id": "call_3_0", "content": "3 notes.txt"},
        {"role": "tool", "tool_call_id": "call_3_1", "content": "2:banana"},
    ]
    assert trace.calls[-1].output == {"role": "assistant", "content": "You're welcome."}


def test_recorded_session_is_append_only_and_shares_messages() -> None:
    trace = load_trace(CHAT)
    for before, after in zip(trace.calls, trace.calls[1:], strict=False):
        assert after.prompt[: len(before.prompt)] == before.prompt
        assert after.prompt[len(before.prompt)] is before.output


def test_recorded_anthropic_session_has_the_split() -> None:
    trace = load_trace(ANTHROPIC)
    assert (trace.provider, trace.meta["api"]) == ("anthropic", "anthropic-messages")
    assert [[m["role"] for m in c.prompt] for c in trace.calls] == ROLES
    assert [
        (c.input_tokens, c.cache_read_input_tokens, c.cache_creation_input_tokens) for c in trace.calls
    ] == [
        (4, 0, 15360),
        (15, 15280, 128),
        (14, 15344, 112),
        (14, 15392, 176),
        (9, 15504, 112),
    ]
    assert [c.prompt_tokens for c in trace.calls] == [15364, 15423, 15470, 15582, 15625]


class Session:
    """Builds OpenClaw session entries chained by parentId, the way OpenClaw writes them."""

    def __init__(self, version: int = 4) -> None:
        self.lines: list[dict[str, Any]] = [
            {
                "type": "session",
                "version": version,
                "id": "s1",
                "timestamp": "2026-01-01T00:00:00.000Z",
                "cwd": "/w",
            }
        ]
        self.last: str | None = None

    def add(self, kind: str, parent: str | None = "last", **fields: Any) -> str:
        ident = f"e{len(self.lines)}"
        entry = {"type": kind, "id": ident, "parentId": self.last if parent == "last" else parent}
        entry["timestamp"] = f"2026-01-01T00:00:{len(self.lines):02d}.000Z"
        entry.update(fields)
        self.lines.append(entry)
        self.last = ident
        return ident

    def user(self, text: Any, parent: str | None = "last") -> str:
        return self.add("message", parent, message={"role": "user", "content": text})

    def assistant(self, *blocks: dict[str, Any], parent: str | None = "last", **fields: Any) -> str:
        message = {
            "role": "assistant",
            "content": list(blocks) or [{"type": "text", "text": "ok"}],
            "api": "openai-completions",
            "provider": "p",
            "model": "m",
            "usage": USAGE,
            "stopReason": "stop",
            **fields,
        }
        return self.add("message", parent, message=message)

    def result(self, call_id: str, text: str) -> str:
        message = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": "exec",
            "content": [{"type": "text", "text": text}],
            "isError": False,
        }
        return self.add("message", message=message)

    def write(self, tmp_path: Path, lines: list[str] | None = None) -> Path:
        path = tmp_path / "s.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in self.lines) + "".join(lines or []))
        return path


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def test_a_call_on_a_branch_sees_that_branch_only(tmp_path: Path) -> None:
    """The recorded session, then the user goes back to the end of turn 1 and asks something else:
    the new call's prompt is turn 1 and the new question, not turn 2 (which is still in the file)."""
    trace = load_trace(CHAT)
    entries = [json.loads(line) for line in CHAT.read_text().splitlines()]
    end_of_turn_1 = next(
        e["id"]
        for e in entries
        if e["type"] == "message" and e["message"].get("content") == [text("Three fruits.")]
    )
    branch = Session()
    branch.lines = entries
    branch.user("and what about pears?", parent=end_of_turn_1)
    branch.assistant(text("No pears."))
    branched = load_trace(branch.write(tmp_path))
    assert len(branched.calls) == len(trace.calls) + 1
    assert [c.prompt for c in branched.calls[:-1]] == [
        c.prompt for c in trace.calls
    ]  # the old branch as it was
    assert branched.calls[-1].prompt == [
        *trace.calls[1].prompt,
        trace.calls[1].output,
        {"role": "user", "content": "and what about pears?"},
    ]
    assert branched.calls[-1].output["content"] == "No pears."


def _compacted_after_two_tasks(tmp_path: Path) -> Trace:
    """Three tasks, a call each; OpenClaw compacted before the third, keeping the second task."""
    s = Session()
    s.user("first task")
    s.assistant(text("done 1"))
    kept = s.user("second task")
    s.assistant(text("done 2"))
    s.add("compaction", summary="they did two tasks", firstKeptEntryId=kept, tokensBefore=999)
    s.user("third task")
    s.assistant(text("done 3"))
    return load_trace(s.write(tmp_path))


def test_compaction_shows_its_summary_then_what_it_kept(tmp_path: Path) -> None:
    trace = _compacted_after_two_tasks(tmp_path)
    summary = (
        "The conversation history before this point was compacted into the following summary:\n\n"
        "<summary>\nthey did two tasks\n</summary>"
    )
    assert trace.calls[2].prompt == [
        {"role": "user", "content": summary},
        {"role": "user", "content": "second task"},
        {"role": "assistant", "content": "done 2"},
        {"role": "user", "content": "third task"},
    ]


def test_reset_starts_a_fresh_window(tmp_path: Path) -> None:
    s = Session()
    s.user("old")
    s.assistant(text("old answer"))
    s.add("reset", reason="new")
    s.user("new")
    s.assistant(text("new answer"))
    trace = load_trace(s.write(tmp_path))
    assert trace.calls[1].prompt == [{"role": "user", "content": "new"}]


def test_context_entries_and_entries_outside_it(tmp_path: Path) -> None:
    s = Session()
    s.add("model_change", provider="p", modelId="m")
    s.add("custom", customType="state", data={"x": 1})  # extension state: not in the context
    s.user([text("look"), {"type": "image", "data": "QQ==", "mimeType": "image/png"}])
    s.add("custom_message", customType="note", content="injected note", display=False)
    s.add("message", message={"role": "bashExecution", "command": "ls", "output": "a.txt", "exitCode": 2})
    s.add("message", message={"role": "user", "content": "hidden", "excludeFromContext": True})
    s.add("branch_summary", fromId="e1", summary="tried another way")
    s.assistant(
        {"type": "thinking", "thinking": "hmm"},
        {"type": "toolCall", "id": "c1", "name": "exec", "arguments": {"command": "echo é"}},
    )
    s.result("c1", "é")
    s.assistant(text("mirror"), provider="openclaw", model="delivery-mirror")  # OpenClaw wrote it itself
    s.assistant(stopReason="error", usage={"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0})
    s.assistant(text("done"))
    trace = load_trace(s.write(tmp_path))
    assert len(trace.calls) == 2  # the mirror and the failed request are not calls
    first, second = trace.calls
    assert first.prompt == [
        {
            "role": "user",
            "content": [
                text("look"),
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QQ=="}},
            ],
        },
        {"role": "user", "content": "injected note"},
        {"role": "user", "content": "Ran `ls`\n```\na.txt\n```\n\nCommand exited with code 2"},
        {
            "role": "user",
            "content": "The following is a summary of a branch that this conversation came back from:\n\n"
            "<summary>\ntried another way</summary>",
        },
    ]
    assert first.output == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "hmm",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "exec", "arguments": '{"command":"echo é"}'},
            }
        ],
    }
    # the mirror is in the context of later calls (the model sees it), the failed request's reply is not
    assert [m["role"] for m in second.prompt[4:]] == ["assistant", "tool", "assistant"]
    assert second.prompt[6]["content"] == "mirror"
    assert (second.prompt_tokens, second.cached_tokens, second.completion_tokens) == (110, 100, 2)
    assert second.at == 1767225612.0  # no message timestamp: the entry's own


def test_version_1_file_is_one_chain_in_file_order(tmp_path: Path) -> None:
    lines = [
        {"type": "session", "id": "old", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"},
        {"type": "message", "message": {"role": "hookMessage", "content": "hook says hi"}},
        {"type": "message", "message": {"role": "user", "content": "q1"}},
        {"type": "message", "message": {"role": "assistant", "content": [text("a1")], "usage": USAGE}},
        {"type": "compaction", "summary": "s", "firstKeptEntryIndex": 2, "tokensBefore": 5},
        {"type": "message", "message": {"role": "user", "content": "q2"}},
        {"type": "message", "message": {"role": "assistant", "content": [text("a2")], "usage": USAGE}},
    ]
    path = tmp_path / "v1.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    trace = load_trace(path)
    assert trace.source == "openclaw session v1"
    assert trace.calls[0].prompt == [
        {"role": "user", "content": "hook says hi"},
        {"role": "user", "content": "q1"},
    ]
    assert [m["content"] for m in trace.calls[1].prompt[1:]] == ["q1", "a1", "q2"]  # kept from line 2 on


def test_gzipped_and_renamed_session_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "session.bin"
    path.write_bytes(gzip.compress(CHAT.read_bytes()))
    assert len(load_trace(path).calls) == 5


def _cut(tmp_path: Path) -> Path:
    data = CHAT.read_text()
    path = tmp_path / "cut.jsonl"
    path.write_text(data[: len(data) - 40])  # copied while OpenClaw was writing the last line
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_cut, "line 22 is not JSON .*; the file is cut or damaged, pass a complete OpenClaw session"),
        (lambda p: Session().write(p, ["[1, 2]\n"]), "line 2 is not an OpenClaw session entry"),
        (
            lambda p: Session().write(p, ['{"type": "message", "id": "x"}\n']),
            "line 2 is a message entry without a 'message' object",
        ),
        (
            lambda p: Session().write(
                p, ['{"type": "message", "id": "x", "message": {"role": "assistant", "content": []}}\n']
            ),
            "assistant message on line 2 has no usage object",
        ),
        (
            lambda p: Session().write(
                p,
                [
                    '{"type": "message", "id": "x", "message": {"role": "assistant", "usage": {"input": -1}}}\n'
                ],
            ),
            "line 2 message.usage.input is -1, expected a non-negative integer",
        ),
        (
            lambda p: Session().write(
                p,
                [
                    '{"type": "message", "id": "a", "parentId": "b", "message": {"role": "user", "content": "x"}}\n',
                    '{"type": "message", "id": "b", "parentId": "a", "message": {"role": "user", "content": "y"}}\n',
                    '{"type": "message", "id": "c", "parentId": "b", "message": {"role": "assistant", "usage": {}}}\n',
                ],
            ),
            "parentId cycle at",
        ),
    ],
)
def test_bad_session_files(tmp_path: Path, make: Any, message: str) -> None:
    path = make(tmp_path)
    with pytest.raises(TraceError, match=message) as info:
        load_trace(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty; pass a recorded session file"),
        (
            b'{"hello": 1}\n{"hello": 2}\n',
            "is not a swe session .* an OpenClaw session .* or a Claude Code transcript",
        ),
        (b"\x28\xb5\x2f\xfd\x00\x58", "is a damaged zstd file .*; re-copy the file"),
    ],
)
def test_foreign_and_empty_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=message) as info:
        load_trace(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_zstd_archive_is_read_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "772536c6.jsonl.zst"  # OpenClaw's archive of a cold or deleted session
    path.write_bytes(zstandard.ZstdCompressor().compress(CHAT.read_bytes()))
    assert load_trace(path).calls == load_trace(CHAT).calls
    assert trace_files([tmp_path]) == [path]


def _store(path: Path, sessions: dict[str, Path]) -> Path:
    """An OpenClaw 2026.9.x store holding each file as a session: one row per line in ``seq`` order,
    long rows zstd-compressed with ``event_json`` NULL, as OpenClaw writes them. OpenClaw compresses
    from 1 KiB; the recorded lines are all shorter, so this compresses from 512 bytes."""
    packer = zstandard.ZstdCompressor()
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "CREATE TABLE transcript_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "event_json TEXT, event_zstd BLOB, created_at INTEGER, PRIMARY KEY (session_id, seq))"
        )
        for sid, file in sessions.items():
            lines = file.read_text().splitlines()
            packed = [len(line.encode()) >= 512 for line in lines]
            assert any(packed) and not all(packed)  # both kinds of row in each session
            # rows go in out of order: the store's seq, not its row order, is the file's order
            for seq in reversed(range(len(lines))):
                line = lines[seq]
                row = (None, packer.compress(line.encode())) if packed[seq] else (line, None)
                conn.execute("INSERT INTO transcript_events VALUES (?, ?, ?, ?, 0)", (sid, seq, *row))
    return path


def test_replay_reads_every_session_of_an_openclaw_store(tmp_path: Path) -> None:
    store = _store(tmp_path / "openclaw-agent.sqlite", {"b-chat": CHAT, "a-anthropic": ANTHROPIC})
    with closing(sqlite3.connect(store)) as conn, conn:  # not a session: no header, skipped
        conn.execute("INSERT INTO transcript_events VALUES ('c-other', 0, '{\"type\": \"note\"}', NULL, 0)")
    sources = trace_files([store])
    assert [str(s) for s in sources] == [f"{store}#a-anthropic", f"{store}#b-chat"]  # sorted by id
    assert load_trace(sources[1]) == load_trace(CHAT)
    from_store = result_dicts(replay_paths([store], "vanilla"))
    from_files = result_dicts(replay_paths([ANTHROPIC, CHAT], "vanilla"))
    assert [r["calls"] for r in from_store] == [5, 5]
    assert from_store == from_files


def test_replay_command_takes_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path / "openclaw-agent.sqlite", {"s1": CHAT, "s2": ANTHROPIC})
    assert main(["replay", str(store), "--json", "--mode", "vanilla"]) == 0
    from_store = json.loads(capsys.readouterr().out)
    assert main(["replay", str(CHAT), str(ANTHROPIC), "--json", "--mode", "vanilla"]) == 0
    from_files = json.loads(capsys.readouterr().out)
    assert (from_store["sessions"], from_store["calls"]) == (2, 10)
    assert {k: v for k, v in from_store.items() if "overhead" not in k} == {
        k: v for k, v in from_files.items() if "overhead" not in k
    }


def test_a_sqlite_file_that_is_not_a_store_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "other.sqlite"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    with pytest.raises(TraceError, match="is an SQLite database but not an OpenClaw session store") as info:
        trace_files([path])
    assert str(path) in str(info.value) and "openclaw-agent.sqlite" in str(info.value)
    assert "\n" not in str(info.value) and info.value.exit_code == 2
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no such table: transcript_events" in err and len(err.strip().splitlines()) == 1


def test_a_damaged_store_is_one_line(tmp_path: Path) -> None:
    store = _store(tmp_path / "openclaw-agent.sqlite", {"s1": CHAT})
    data = bytearray(store.read_bytes())
    data[100:] = b"\xff" * (len(data) - 100)  # the header survives, the pages do not
    store.write_bytes(bytes(data))
    with pytest.raises(TraceError, match="is a damaged or unreadable SQLite database") as info:
        trace_files([store])
    assert str(store) in str(info.value) and "\n" not in str(info.value)


def test_a_store_is_not_one_session_file(tmp_path: Path) -> None:
    store = _store(tmp_path / "openclaw-agent.sqlite", {"s1": CHAT})
    with pytest.raises(TraceError, match=r"is an SQLite database .* pass it to lightmem2 replay") as info:
        load_trace(store)  # continuous, resume: one session each
    assert "\n" not in str(info.value)


def test_replay_and_continuous_take_openclaw_sessions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(DATA), "--json", "--mode", "normal"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["sessions"], summary["calls"], summary["retention_lost"]) == (2, 10, 0.0)
    # the system prompt and tools are not in the file: the head is estimated from the first call's usage,
    # so unchanged prompts hit the simulated cache as they hit the provider's
    assert main(["replay", str(DATA), "--json", "--mode", "vanilla"]) == 0
    vanilla = json.loads(capsys.readouterr().out)
    assert abs(vanilla["hit_rate"] - vanilla["recorded_hit_rate"]) < 0.02, vanilla
    out = tmp_path / "chain.json.gz"
    assert main(["continuous", str(out), str(CHAT), str(ANTHROPIC)]) == 0
    chained = load_trace(out)
    first, second = load_trace(CHAT), load_trace(ANTHROPIC)
    assert len(chained.calls) == 10
    history = [*first.calls[-1].prompt, first.calls[-1].output]
    assert chained.calls[5].prompt == [*history, *second.calls[0].prompt]


def test_an_aborted_call_counts_but_is_in_no_later_prompt(tmp_path: Path) -> None:
    s = Session()
    s.user("go")
    s.assistant(text("partial ans"), stopReason="aborted")  # the user stopped it: billed, not replayed
    s.user("go again")
    s.assistant(text("full answer"))
    trace = load_trace(s.write(tmp_path))
    assert [c.output["content"] for c in trace.calls] == ["partial ans", "full answer"]
    assert trace.calls[1].prompt == [
        {"role": "user", "content": "go"},
        {"role": "user", "content": "go again"},
    ]


def test_a_compacted_call_also_has_its_history_as_if_openclaw_had_not_compacted(tmp_path: Path) -> None:
    """Its compaction is left out of the whole history, and the trace records it: the first call
    that saw it, the tokens OpenClaw counted, the summary the calls see."""
    trace = _compacted_after_two_tasks(tmp_path)
    assert trace.calls[1].whole is None
    assert [m["content"] for m in trace.calls[2].uncompacted] == [
        "first task",
        "done 1",
        "second task",
        "done 2",
        "third task",
    ]
    [compaction] = trace.compactions
    assert (compaction.before_call, compaction.pre_tokens) == (2, 999)
    assert compaction.summary is trace.calls[2].prompt[0]
