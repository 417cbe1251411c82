"""When Claude Code compacts anyway: PreCompact archives what the summary drops, and the SessionStart
after it answers the session record and how to search and recover the archive."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.commands import recover
from lightmem_plugin.eviction.compaction_note import MAX_CHARS
from lightmem_plugin.hosts import hook_runtime
from lightmem_plugin.hosts.claude_code import hooks as claude_code
from lightmem_plugin.hosts.shared import serve_ctl
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys
from lightmem_plugin.store.registry import content_key
from lightmem_plugin.store.search_index import SearchIndex
from lightmem_plugin.views import search

SESSION = "0b7c9a52-compact-test"
GOAL = "Fix the failing import of frobnicate_widget in pkg/core.py and keep the tests green"
SMALL = (
    "============ test session starts ============\n"
    "collected 12 items\n\n"
    "tests/test_core.py F\n"
    "E   ImportError: cannot import name 'frobnicate_widget' from 'pkg.core' (pkg/core.py)\n"
    "============ 1 failed, 11 passed in 0.41s ============\n"
)
LOG = "\n".join(f"[build] step {i:04d} compiled module_{i % 41}.c ok" for i in range(600))


def _event(uuid: str, parent: str | None, kind: str, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": SESSION,
        "message": message,
        **extra,
    }


def _call(uuid: str, parent: str, mid: str, tool_id: str, command: str) -> dict[str, Any]:
    block = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}
    usage = {"input_tokens": 10, "output_tokens": 5}
    return _event(
        uuid, parent, "assistant", {"id": mid, "role": "assistant", "content": [block], "usage": usage}
    )


def _result(uuid: str, parent: str, tool_id: str, text: str) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": text}
    return _event(uuid, parent, "user", {"role": "user", "content": [block]})


def reduced_by_hook(text: str) -> str:
    """What Claude Code's transcript keeps of a Bash output the PostToolUse hook reduced."""
    answer = claude_code.post_tool_use(
        {
            "session_id": SESSION,
            "tool_name": "Bash",
            "tool_use_id": "toolu_b",
            "tool_response": {"stdout": text},
        }
    )
    assert answer is not None
    out = answer["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert stub_keys(out)
    return str(out)


def transcript(folder: Path, goal: str = GOAL) -> Path:
    """A Claude Code transcript before its compaction: a goal, a test run kept whole (small), a build
    log the PostToolUse hook reduced, and the agent's answer."""
    usage = {"input_tokens": 10, "output_tokens": 5}
    events = [
        _event("u1", None, "user", {"role": "user", "content": goal}),
        _call("a1", "u1", "m1", "toolu_a", "pytest -x"),
        _result("r1", "a1", "toolu_a", SMALL),
        _call("a2", "r1", "m2", "toolu_b", "make build"),
        _result("r2", "a2", "toolu_b", reduced_by_hook(LOG)),
        _event(
            "a3",
            "r2",
            "assistant",
            {
                "id": "m3",
                "role": "assistant",
                "content": [{"type": "text", "text": "Build passes; now the import."}],
                "usage": usage,
            },
        ),
    ]
    path = folder / f"{SESSION}.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    return path


def compacted(path: Path) -> None:
    """Append what Claude Code writes when it compacts: the boundary and the summary after it."""
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "b1",
        "parentUuid": None,
        "logicalParentUuid": "a3",
        "sessionId": SESSION,
        "compactMetadata": {"trigger": "manual"},
    }
    summary = _event(
        "s1", "b1", "user", {"role": "user", "content": "Summary: fixing an import."}, isCompactSummary=True
    )
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(boundary) + "\n" + json.dumps(summary) + "\n")


@pytest.fixture(autouse=True)
def no_proxy_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve_ctl, "ensure_running", lambda *a, **k: "running")


def hook(event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The hook as Claude Code runs it: JSON in, the printed JSON out (None: nothing printed)."""
    text, code = hook_runtime.run("claude-code", event, json.dumps(payload), budget=60)
    assert code == 0
    return json.loads(text) if text else None


def pre_compact(path: Path) -> dict[str, Any] | None:
    payload = {
        "session_id": SESSION,
        "transcript_path": str(path),
        "hook_event_name": "PreCompact",
        "trigger": "manual",
        "custom_instructions": "",
    }
    return hook("PreCompact", payload)


def after_compact(path: Path) -> str:
    payload = {
        "session_id": SESSION,
        "transcript_path": str(path),
        "hook_event_name": "SessionStart",
        "source": "compact",
    }
    answer = hook("SessionStart", payload)
    assert answer is not None
    out = answer["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    return str(out["additionalContext"])


def found(query: str) -> list[dict[str, Any]]:
    with SearchIndex.default() as index:
        return list(json.loads(search.run(index, query, session=SESSION, as_json=True))["hits"])


def test_an_output_kept_whole_before_precompact_is_recoverable_and_found_after_it(tmp_path: Path) -> None:
    path = transcript(tmp_path)
    assert not LightMem().registry.exists(content_key(SMALL.encode()))  # kept whole: never archived
    assert pre_compact(path) is None  # PreCompact answers nothing: Claude Code compacts as it would
    hits = found("frobnicate_widget")
    registry = LightMem().registry
    whole = [h for h in hits if recover.run(registry, h["key"]) == SMALL]
    assert whole, hits  # the test run itself, byte-exact, under a key the search names
    line = whole[0]["line"]
    assert "frobnicate_widget" in recover.run(registry, whole[0]["key"], f"{line}:{line}")
    # the output the PostToolUse hook reduced: its original is found too (it was archived, not indexed)
    assert any(recover.run(registry, h["key"]) == LOG for h in found("module_17.c"))


def test_session_start_after_compaction_carries_the_record_and_how_to_search(tmp_path: Path) -> None:
    path = transcript(tmp_path)
    pre_compact(path)
    compacted(path)
    note = after_compact(path)
    assert f'lightmem2 search "WORDS" --session {SESSION}' in note
    assert "lightmem2 recover KEY" in note
    assert "Session record" in note and "frobnicate_widget" in note  # the goal, from the record
    assert len(note) <= MAX_CHARS
    conversation = note.split("The whole conversation before the compaction: run: lightmem2 recover ")[
        1
    ].split()[0]
    doc = LightMem().registry.recover(conversation)
    assert GOAL in doc and "-> Bash(" in doc and "Build passes" in doc
    small_key = next(h["key"] for h in found("frobnicate_widget") if h["key"] != conversation)
    assert f"archived as {small_key}" in doc  # the conversation names each output's key
    assert after_compact(path) == note  # asked again: the same bytes (I1)


def test_without_precompact_the_session_start_archives_and_answers_itself(tmp_path: Path) -> None:
    path = transcript(tmp_path)
    compacted(path)  # an install from before PreCompact was registered, or a PreCompact that timed out
    note = after_compact(path)
    assert "Session record" in note and "lightmem2 recover" in note
    assert any(recover.run(LightMem().registry, h["key"]) == SMALL for h in found("frobnicate_widget"))


def test_the_note_is_the_same_bytes_in_another_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notes = []
    for n in range(2):
        monkeypatch.setenv("LIGHTMEM2_HOME", str(tmp_path / f"home{n}"))
        folder = tmp_path / f"t{n}"
        folder.mkdir()
        path = transcript(folder)
        pre_compact(path)
        compacted(path)
        notes.append(after_compact(path))
    assert notes[0] == notes[1]


def test_the_note_stays_bounded_for_a_huge_goal(tmp_path: Path) -> None:
    goal = "Refactor " + " ".join(f"pkg/module_{i}.py" for i in range(3000))
    path = transcript(tmp_path, goal)
    compacted(path)
    note = after_compact(path)
    assert len(note) <= MAX_CHARS and "lightmem2 search" in note


@pytest.mark.parametrize("content", ["", 'not json at all\n{"half": ', None])
def test_a_missing_or_broken_transcript_never_breaks_the_host(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "t.jsonl"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    assert pre_compact(path) is None
    note = after_compact(path)
    assert "lightmem2 search" in note  # nothing to archive, but the model still learns how to search


def test_other_sources_and_codex_answer_nothing(tmp_path: Path) -> None:
    path = transcript(tmp_path)
    for source in ("startup", "resume", "clear"):
        payload = {"session_id": SESSION, "transcript_path": str(path), "source": source}
        assert hook("SessionStart", payload) is None
    payload = {"session_id": SESSION, "transcript_path": str(path), "source": "compact"}
    text, _ = hook_runtime.run("codex", "SessionStart", json.dumps(payload), budget=30)
    assert text == ""
