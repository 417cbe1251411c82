"""Claude Code hooks: tool outputs reduced in the tool's own shape, /lightmem2 answered locally."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lightmem_plugin.commands.table import run_line
from lightmem_plugin.hosts.claude_code import hooks as claude_code
from lightmem_plugin.hosts.shared import hook_session as _common
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys

LOG = "\n".join(
    f"2026-11-30 12:{i // 60 % 60:02d}:{i % 60:02d} INFO step {i} compiled mod_{i % 37}.c in {i * 7 % 101} ms"
    for i in range(400)
)


def payload(tool: str, response: Any, **extra: Any) -> dict[str, Any]:
    return {
        "session_id": "sess-1",
        "tool_name": tool,
        "tool_use_id": "toolu_01",
        "tool_response": response,
        **extra,
    }


def bash(stdout: str, stderr: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "stdout": stdout,
        "stderr": stderr,
        "interrupted": False,
        "isImage": False,
        "noOutputExpected": False,
        **extra,
    }


def updated(answer: dict[str, Any] | None) -> Any:
    assert answer is not None
    assert answer["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    return answer["hookSpecificOutput"]["updatedToolOutput"]


def test_large_bash_stdout_is_reduced_in_place_and_recoverable() -> None:
    out = updated(claude_code.handle("PostToolUse", payload("Bash", bash(LOG, "warning: x"))))
    assert set(out) == {"stdout", "stderr", "interrupted", "isImage", "noOutputExpected"}
    assert out["stderr"] == "warning: x" and out["interrupted"] is False
    assert len(out["stdout"]) < len(LOG) // 4
    keys = stub_keys(out["stdout"])
    assert keys and LightMem().registry.recover(keys[0]) == LOG


def test_extra_fields_of_the_tool_stay_as_they_are() -> None:
    response = bash(LOG, returnCodeInterpretation="no matches", staleReadFileStateHint="a.py changed")
    out = updated(claude_code.handle("PostToolUse", payload("Bash", response)))
    assert out["returnCodeInterpretation"] == "no matches" and out["staleReadFileStateHint"] == "a.py changed"


@pytest.mark.parametrize(
    ("tool", "response"),
    [
        ("Bash", bash("short output\n")),
        ("Bash", bash(LOG, isImage=True)),
        ("Read", {"type": "text", "file": {"filePath": "/a.py", "content": LOG, "numLines": 400}}),
        ("Edit", {"filePath": "/a.py", "originalFile": LOG}),
        ("SomeNewTool", {"text": LOG}),
        ("mcp__srv__tool", {"unexpected": LOG}),
        ("Bash", None),
        ("Bash", "a string where a dict belongs"),
    ],
)
def test_outputs_we_leave_alone(tool: str, response: Any) -> None:
    assert claude_code.handle("PostToolUse", payload(tool, response)) is None


@pytest.mark.parametrize(
    ("tool", "field", "text"), [("Grep", "content", LOG), ("WebFetch", "result", LOG + "\n" + LOG)]
)
def test_other_text_tools(tool: str, field: str, text: str) -> None:
    out = updated(claude_code.handle("PostToolUse", payload(tool, {field: text, "numLines": 400})))
    assert out["numLines"] == 400 and stub_keys(out[field])


def test_a_fetched_page_the_agent_asked_for_stays_whole_up_to_the_file_view_budget() -> None:
    page = LOG[: LightMem().config.mode_table().fileViewChars - 100]
    assert len(page) > LightMem().config.mode_table().triggerChars
    assert claude_code.handle("PostToolUse", payload("WebFetch", {"result": page, "code": 200})) is None


def test_mcp_text_and_blocks() -> None:
    out = updated(claude_code.handle("PostToolUse", payload("mcp__db__query", LOG)))
    assert isinstance(out, str) and stub_keys(out)
    blocks = [
        {"type": "text", "text": "small"},
        {"type": "image", "data": "x"},
        {"type": "text", "text": LOG},
    ]
    out = updated(claude_code.handle("PostToolUse", payload("mcp__db__query", blocks)))
    assert out[0] == blocks[0] and out[1] == blocks[1] and stub_keys(out[2]["text"])


def test_the_hook_writes_the_stub_the_proxy_would() -> None:
    """One reduction per output, whoever sees it first: same bytes as a fresh pipeline session."""
    out = updated(claude_code.handle("PostToolUse", payload("Bash", bash(LOG))))
    proxy_side = LightMem().session("other")
    proxy_side.prefer_shell = True  # what a Claude Code request (Bash, no lightmem2_recover) sets
    assert out["stdout"] == proxy_side.ingest_tool_result("any-call", LOG)
    assert "run: lightmem2 recover " in out["stdout"]  # Claude Code has Bash, not our tool
    again = updated(claude_code.handle("PostToolUse", payload("Bash", bash(LOG))))
    assert again == out  # I1: same input, same bytes


def host_ids(home: Path) -> None:
    """Config: the model reads the host's call ids (a hook's reference may name one; by default the
    proxy respells them, so a hook's reference names no call: see test_call_ids)."""
    (home / "config.json").write_text(json.dumps({"stabilizer": {"shortCallIds": False}}))


def test_a_repeated_output_refers_to_the_first_call_across_hook_processes(isolated_home: Path) -> None:
    """Each PostToolUse is its own process (a fresh plugin here): the second identical Bash output of
    the session still becomes a reference to the first call, the rest of the session is unchanged."""
    for n in range(2):  # by default (short call ids) the repeat names no call
        hooked = payload("Bash", bash(LOG), tool_use_id=f"toolu_0_{n}", session_id="sess-0")
        unnamed = updated(claude_code.handle("PostToolUse", hooked))
    assert unnamed["stdout"].startswith(
        "[lightmem2: identical to an earlier tool output in this conversation ("
    )
    # Claude Code sent to our serve (its settings' env, which hooks inherit): the proxy respells the ids
    from lightmem_plugin.config import load_config
    from lightmem_plugin.hosts.shared.serve_ctl import base_url
    from lightmem_plugin.prefix.call_ids import short_id

    with pytest.MonkeyPatch.context() as env:
        env.setenv("ANTHROPIC_BASE_URL", base_url(load_config()))
        hooked = payload("Bash", bash(LOG), tool_use_id="toolu_0_2", session_id="sess-0")
        named = updated(claude_code.handle("PostToolUse", hooked))
    assert named["stdout"].startswith(
        f"[lightmem2: identical to the output of tool call {short_id('toolu_0_0')} ("
    )
    host_ids(isolated_home)
    first = updated(claude_code.handle("PostToolUse", payload("Bash", bash(LOG), tool_use_id="toolu_1_0")))
    again = updated(claude_code.handle("PostToolUse", payload("Bash", bash(LOG), tool_use_id="toolu_6_0")))
    assert again["stdout"].startswith("[lightmem2: identical to the output of tool call toolu_1_0 (")
    assert LightMem().registry.recover(stub_keys(again["stdout"])[0]) == LOG
    # the same call handed over again gets its own bytes back; another session knows no repeat
    same = updated(claude_code.handle("PostToolUse", payload("Bash", bash(LOG), tool_use_id="toolu_1_0")))
    assert same == first
    other = payload("Bash", bash(LOG), tool_use_id="toolu_9_0", session_id="sess-2")
    assert updated(claude_code.handle("PostToolUse", other)) == first


def test_after_a_compact_no_output_refers_to_one_from_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    """Claude Code's compact drops the earlier outputs from what the model reads: a reference to
    toolu_1_0 after it would point at nothing. A resume keeps the history (and the references)."""
    from lightmem_plugin.hosts.shared import serve_ctl

    host_ids(isolated_home)

    monkeypatch.setattr(serve_ctl, "ensure_running", lambda *a, **k: "running")
    start = {
        "session_id": "sess-1",
        "transcript_path": str(tmp_path / "t.jsonl"),
        "hook_event_name": "SessionStart",
    }
    first = updated(claude_code.handle("PostToolUse", payload("Bash", bash(LOG), tool_use_id="toolu_1_0")))
    claude_code.handle("SessionStart", {**start, "source": "resume"})
    again = updated(claude_code.handle("PostToolUse", payload("Bash", bash(LOG), tool_use_id="toolu_2_0")))
    assert again["stdout"].startswith("[lightmem2: identical to the output of tool call toolu_1_0 (")
    claude_code.handle("SessionStart", {**start, "source": "compact"})
    after = updated(claude_code.handle("PostToolUse", payload("Bash", bash(LOG), tool_use_id="toolu_3_0")))
    assert after == first  # reduced on its own, as the first was
    later = updated(claude_code.handle("PostToolUse", payload("Bash", bash(LOG), tool_use_id="toolu_4_0")))
    assert later["stdout"].startswith("[lightmem2: identical to the output of tool call toolu_3_0 (")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=80),
        min_size=1,
        max_size=120,
    )
)
def test_a_reduced_output_is_never_reduced_again(lines: list[str]) -> None:
    text = "\n".join(lines) * 3
    first = claude_code.handle("PostToolUse", payload("Bash", bash(text)))
    if first is None:
        return
    reduced = updated(first)
    assert claude_code.handle("PostToolUse", payload("Bash", reduced)) is None


@pytest.mark.parametrize(
    ("prompt", "needle"),
    [
        ("/lightmem2 mode", "mode: normal"),
        ("  /lightmem2   mode  ", "mode: normal"),
        ("/lightmem2:lightmem2 mode", "mode: normal"),
        ("/lightmem2", "lightmem2 mode: normal"),
        ("/lightmem2 status", "archived originals"),
        ("/lightmem2 serve", "not available in chat"),
        ("/lightmem2 mode turbo", 'unknown mode "turbo"'),
        ("/lightmem2 recover deadbeef", "not an artifact key"),
    ],
)
def test_commands_are_answered_without_the_model(prompt: str, needle: str) -> None:
    answer = claude_code.handle("UserPromptSubmit", {"session_id": "s", "prompt": prompt}, run_line)
    assert answer is not None and answer["decision"] == "block"
    assert needle in answer["reason"]


@pytest.mark.parametrize(
    "prompt", ["fix the bug", "please run /lightmem2 status", "/lightmem2x", "/lightmem", 42, None]
)
def test_other_prompts_go_to_the_model(prompt: Any) -> None:
    assert claude_code.handle("UserPromptSubmit", {"prompt": prompt}, run_line) is None


def test_mode_switch_from_chat_is_persisted(isolated_home: Path) -> None:
    answer = claude_code.handle("UserPromptSubmit", {"prompt": "/lightmem2 mode aggressive"}, run_line)
    assert answer is not None and "mode set to aggressive" in answer["reason"]
    assert json.loads((isolated_home / "config.json").read_text())["mode"] == "aggressive"


def test_session_start_records_the_transcript_and_ensures_the_proxy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from lightmem_plugin.hosts.shared import serve_ctl, transcripts

    calls: list[int] = []
    monkeypatch.setattr(
        serve_ctl, "ensure_running", lambda config, wait_s=0: calls.append(config.server.port) or "running"
    )
    transcript = tmp_path / "s.jsonl"
    transcript.write_text("{}\n")
    assert (
        claude_code.handle("SessionStart", {"session_id": "abc", "transcript_path": str(transcript)}) is None
    )
    assert calls == [8787]
    assert transcripts.transcript_for("abc") == transcript


@pytest.mark.parametrize(
    ("version", "ok"),
    [((2, 1, 332), True), ((2, 1, 121), True), ((2, 1, 120), False), ((2, 0, 999), False), ((3, 0, 0), True)],
)
def test_updated_tool_output_support(version: tuple[int, int, int], ok: bool) -> None:
    assert claude_code.supports_updated_tool_output(version) is ok


@pytest.mark.parametrize(
    ("payload_", "expected"),
    [({"session_id": " s1 "}, "s1"), ({}, "hook-session"), ({"session_id": 7}, "hook-session")],
)
def test_session_id(payload_: dict[str, Any], expected: str) -> None:
    assert _common.session_id(payload_) == expected


def test_an_output_the_host_saved_to_a_file_is_left_as_the_host_cut_it(isolated_home: Path) -> None:
    """Over 30,000 chars Claude Code saves the output (``persistedOutputPath``) and shows the model a
    2 KB preview; the hook gets the first 30,000 chars, cut mid-line. Measured before: the hook replaced
    the preview with a reduction of that cut, whose stub archived the cut as if it were the output."""
    whole = "\n".join(f"row {i}: compiled module_{i} in {i % 97} ms, all checks ok" for i in range(2_000))
    cut = whole[:30_000]
    saved = isolated_home / "tool-results" / "b1.txt"
    response = bash(cut, persistedOutputPath=str(saved), persistedOutputSize=len(whole))
    assert claude_code.handle("PostToolUse", payload("Bash", response)) is None
    assert updated(claude_code.handle("PostToolUse", payload("Bash", bash(cut))))["stdout"] != cut, (
        "the same text without the host's file is reduced: the field is what decides"
    )
