"""Codex hooks: a large string output becomes ``decision: block`` with the reduced text."""

from __future__ import annotations

from typing import Any

import pytest

from lightmem_plugin.hooks import codex
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys

OUTPUT = "".join(f"row {i}: compiled module ok\n" for i in range(1, 400))


def payload(response: Any) -> dict[str, Any]:
    return {
        "session_id": "thread-1",
        "tool_name": "Bash",
        "tool_use_id": "call_1",
        "tool_input": {"command": "make"},
        "tool_response": response,
    }


def test_large_output_is_replaced_by_the_reduced_text() -> None:
    answer = codex.handle("PostToolUse", payload(OUTPUT))
    assert answer is not None and set(answer) == {"decision", "reason"} and answer["decision"] == "block"
    reduced = answer["reason"]
    assert reduced.startswith("row 1: compiled module ok\n") and reduced.rstrip().endswith(
        "row 399: compiled module ok"
    )
    assert len(reduced) < len(OUTPUT) // 4
    assert LightMem().registry.recover(stub_keys(reduced)[0]) == OUTPUT


@pytest.mark.parametrize("response", ["ok\n", "", {"stdout": OUTPUT}, [OUTPUT], None])
def test_small_or_structured_outputs_are_left_alone(response: Any) -> None:
    assert codex.handle("PostToolUse", payload(response)) is None


def test_commands_and_plain_prompts() -> None:
    answer = codex.handle("UserPromptSubmit", {"prompt": "/lightmem2 mode"})
    assert answer == {"decision": "block", "reason": answer["reason"] if answer else ""}
    assert answer is not None and answer["reason"].startswith("mode: normal")
    assert codex.handle("UserPromptSubmit", {"prompt": "refactor the parser"}) is None


def test_session_start_is_recorded_for_codex(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from lightmem_plugin.hooks import serve_ctl, transcripts

    monkeypatch.setattr(serve_ctl, "ensure_running", lambda config, wait_s=0: "running")
    path = tmp_path / "rollout.jsonl"
    path.write_text("{}\n")
    assert codex.handle("SessionStart", {"session_id": "t-9", "transcript_path": str(path)}) is None
    assert transcripts.load()["t-9"] == {"host": "codex", "path": str(path)}


def test_unknown_event() -> None:
    assert codex.handle("PreToolUse", payload(OUTPUT)) is None
