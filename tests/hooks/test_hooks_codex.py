"""Codex hooks: commands end the turn in UserPromptSubmit; PostToolUse leaves every output alone."""

from __future__ import annotations

from typing import Any

import pytest

from lightmem_plugin.commands.table import run_line
from lightmem_plugin.hosts.codex import hooks as codex

OUTPUT = "".join(f"row {i}: compiled module ok\n" for i in range(1, 400))


def payload(response: Any) -> dict[str, Any]:
    return {
        "session_id": "thread-1",
        "tool_name": "Bash",
        "tool_use_id": "call_1",
        "tool_input": {"command": "make"},
        "tool_response": response,
    }


@pytest.mark.parametrize("response", [OUTPUT, "ok\n", "", {"stdout": OUTPUT}, [OUTPUT], None])
def test_post_tool_use_never_replaces_the_output(response: Any) -> None:
    # a block reason reaches the model as a failed, header-less result: Codex is reduced on the wire
    assert codex.handle("PostToolUse", payload(response)) is None


def test_commands_and_plain_prompts() -> None:
    answer = codex.handle("UserPromptSubmit", {"prompt": "/lightmem2 mode"}, run_line)
    assert answer == {"decision": "block", "reason": answer["reason"] if answer else ""}
    assert answer is not None and answer["reason"].startswith("mode: normal")
    assert codex.handle("UserPromptSubmit", {"prompt": "refactor the parser"}, run_line) is None


def test_session_start_is_recorded_for_codex(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from lightmem_plugin.hosts.shared import serve_ctl, transcripts

    monkeypatch.setattr(serve_ctl, "ensure_running", lambda config, wait_s=0: "running")
    path = tmp_path / "rollout.jsonl"
    path.write_text("{}\n")
    assert codex.handle("SessionStart", {"session_id": "t-9", "transcript_path": str(path)}) is None
    assert transcripts.load()["t-9"] == {"host": "codex", "path": str(path)}


def test_unknown_event() -> None:
    assert codex.handle("PreToolUse", payload(OUTPUT)) is None


@pytest.mark.parametrize(
    "prompt",
    [
        "/lightmem2 mode turbo",
        "/lightmem2 bogus",
        "/lightmem2 status --bad",
        "/lightmem2 search",
        "/lightmem2 x 'y",
    ],
)
def test_a_bad_command_shows_one_prefix(prompt: str) -> None:
    """Issue 16, item 13: a bad argument typed in the Codex TUI read "lightmem2: lightmem2: ..." (the
    parser's own prefix under run_line's). Through the hook entry, with the payload Codex sends."""
    import json

    from lightmem_plugin.hosts import hook_runtime as hooks

    event = {
        "session_id": "thread-1",
        "transcript_path": None,
        "cwd": "/work",
        "hook_event_name": "UserPromptSubmit",
        "model": "gpt-5.5",
        "prompt": prompt,
    }
    out, code = hooks.run("codex", "UserPromptSubmit", json.dumps(event), run_line=run_line)
    answer = json.loads(out)
    assert code == 0 and answer["decision"] == "block", out
    assert answer["reason"].startswith("lightmem2: ") and answer["reason"].count("lightmem2:") == 1, answer
