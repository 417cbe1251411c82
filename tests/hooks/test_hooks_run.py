"""The hook runner never blocks the host: bad input, a crash, a timeout or a stdin that never closes all
end as exit code 0 with nothing printed, and the reason goes to hooks.log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import lightmem_plugin.hosts.hook_runtime as hooks
from lightmem_plugin.hosts.claude_code import hooks as claude_code
from lightmem_plugin.hosts.codex import hooks as codex

ROOT = Path(__file__).resolve().parents[2]


def _log(home: Path) -> str:
    path = home / "hooks.log"
    return path.read_text(encoding="utf-8") if path.exists() else ""


@pytest.mark.parametrize(
    ("host", "event", "stdin"),
    [
        ("claude-code", "UserPromptSubmit", "not json at all"),
        ("claude-code", "PostToolUse", '["a", "list"]'),
        ("codex", "PostToolUse", '{"tool_response": '),
        ("codex", "SessionStart", "\udcff\udcfe"),
        ("openclaw", "PostToolUse", "{}"),
        ("claude-code", "Stop", "{}"),
        ("claude-code", "UserPromptSubmit", ""),
    ],
)
def test_unreadable_input_or_unknown_names_print_nothing(host: str, event: str, stdin: str) -> None:
    assert hooks.run(host, event, stdin) == ("", 0)


def test_bad_json_is_logged_not_shown(isolated_home: Path) -> None:
    assert hooks.run("claude-code", "UserPromptSubmit", "{oops") == ("", 0)
    assert "claude-code UserPromptSubmit: JSONDecodeError" in _log(isolated_home)


@pytest.mark.parametrize("module", [claude_code, codex])
def test_a_crash_inside_the_handler_prints_nothing(
    module: Any, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    def boom(event: str, payload: dict[str, Any], run_line: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(module, "handle", boom)
    host = "claude-code" if module is claude_code else "codex"
    assert hooks.run(host, "PostToolUse", json.dumps({"tool_response": "x"})) == ("", 0)
    assert "RuntimeError: disk on fire" in _log(isolated_home)


def test_a_slow_handler_is_abandoned_after_the_budget(
    monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    def slow(event: str, payload: dict[str, Any], run_line: Any) -> dict[str, Any]:
        time.sleep(5)
        return {"decision": "block", "reason": "too late"}

    monkeypatch.setattr(claude_code, "handle", slow)
    start = time.monotonic()
    assert hooks.run("claude-code", "PostToolUse", "{}", budget=0.2) == ("", 0)
    assert time.monotonic() - start < 1.5
    assert "timed out" in _log(isolated_home)


def test_a_stdin_that_never_closes_is_a_timeout() -> None:
    read_end, write_end = os.pipe()
    stream = os.fdopen(read_end, "rb")
    try:
        start = time.monotonic()
        assert hooks.run_stream("codex", "PostToolUse", stream, budget=0.3) == ("", 0)
        assert time.monotonic() - start < 1.5
    finally:
        os.close(write_end)  # the abandoned reader sees EOF and ends; then its stream can close
        time.sleep(0.1)
        stream.close()


@pytest.mark.parametrize(
    ("raw", "event", "expected"),
    [("", "PostToolUse", 5.0), ("0.5", "SessionStart", 0.5), ("x", "SessionStart", 8.0)],
)
def test_budget_env_override(raw: str, event: str, expected: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(hooks.BUDGET_ENV, raw)
    assert hooks.budget_s(event) == expected


def _run_module(
    args: list[str], stdin: bytes | None, env_extra: dict[str, str], timeout: float = 30
) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env_extra}
    return subprocess.run(
        [sys.executable, "-m", "lightmem_plugin.hooks", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (["claude-code", "PostToolUse"], b"\xff\xfe garbage"),
        (["codex", "UserPromptSubmit"], b'{"prompt": 42}'),
        (["claude-code"], b"{}"),
        (["nohost", "PostToolUse"], b"{}"),
    ],
)
def test_the_process_exits_zero_and_silent_on_bad_input(args: list[str], stdin: bytes) -> None:
    done = _run_module(args, stdin, {})
    assert done.returncode == 0
    assert done.stdout == b""


def test_the_process_exits_on_budget_when_stdin_stays_open(isolated_home: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), hooks.BUDGET_ENV: "0.5"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lightmem_plugin.hooks", "claude-code", "PostToolUse"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        start = time.monotonic()
        code = proc.wait(timeout=20)
        assert code == 0
        assert time.monotonic() - start < 15
        assert proc.stdout is not None and proc.stdout.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
        assert proc.stdin is not None
        proc.stdin.close()


def test_the_process_answers_a_command(isolated_home: Path) -> None:
    # a budget far past the default: this checks the answer, not the time (on a loaded machine the
    # cold start alone can pass the default budget, and the hook then rightly answers nothing)
    done = _run_module(
        ["codex", "UserPromptSubmit"], b'{"prompt": "/lightmem2 mode"}', {hooks.BUDGET_ENV: "60"}
    )
    assert done.returncode == 0
    answer = json.loads(done.stdout)
    assert answer["decision"] == "block"
    assert answer["reason"].startswith("mode: normal")


def test_the_cli_entry_answers_a_command_with_the_registry(isolated_home: Path) -> None:
    """``lightmem2 hook ...`` (what install writes) hands the command table to the hook."""
    done = subprocess.run(
        [sys.executable, "-m", "lightmem_plugin.cli", "hook", "claude-code", "UserPromptSubmit"],
        input=b'{"prompt": "/lightmem2 mode turbo"}',
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=30,
    )
    assert done.returncode == 0
    assert 'unknown mode "turbo"' in json.loads(done.stdout)["reason"]


def test_a_hook_run_without_the_command_table_says_so_and_still_blocks_the_prompt() -> None:
    """A library caller that passes no runner: the prompt still never reaches the model."""
    text, code = hooks.run("codex", "UserPromptSubmit", '{"prompt": "/lightmem2 mode aggressive"}')
    answer = json.loads(text)
    assert code == 0 and answer["decision"] == "block"
    assert "not wired" in answer["reason"] and "`lightmem2 mode aggressive`" in answer["reason"]
