"""Claude Code 2.1.332 from npm, end to end: ``claude -p`` -> lightmem2 serve -> fake provider.

The scripted session runs two Bash calls (one with a large output) and ends. With lightmem2 installed
(``lightmem2 install claude-code``), the SessionStart hook starts the proxy, the PostToolUse hook
reduces the large output, and the provider must see the reduced text with a stub whose key recovers
the original byte for byte. ``/lightmem2 status`` must be answered by the UserPromptSubmit hook with
no provider call. The same session without lightmem2 gives the cache figures to compare.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    STUB_KEY,
    Reply,
    ScriptedUpstream,
    assert_recovers,
    base_env,
    cache_figures,
    npm_cli,
    run_bounded,
    stop_pid,
    write_lightmem_config,
)
from server_harness import ServerThread, free_port

from lightmem_plugin.hooks import serve_ctl, transcripts
from lightmem_plugin.install import claude_code as installer

PACKAGE, VERSION = "@anthropic-ai/claude-code", "2.1.332"
# ~16 KB: over lightmem2's trigger, under Claude Code's own 30,000-char Bash limit (above it, Claude
# Code keeps the output in a file and the hook sees its first 30,000 chars)
BIG = "seq -f 'row %g: compiled module ok' 1 600"
SMALL = "echo second step done"
CLAUDE_TIMEOUT_S = 180


def _results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for msg in body.get("messages") or []
        if msg.get("role") == "user" and isinstance(msg.get("content"), list)
        for block in msg["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def policy(api: str, body: dict[str, Any]) -> Reply:
    """Bash (large output), then Bash (small), then a final answer."""
    if not any(t.get("name") == "Bash" for t in body.get("tools") or []):
        return Reply(text="ok")
    done = len(_results(body))
    if done == 0:
        return Reply(text="", tool_calls=[("Bash", json.dumps({"command": BIG, "description": "list rows"}))])
    if done == 1:
        return Reply(text="", tool_calls=[("Bash", json.dumps({"command": SMALL, "description": "finish"}))])
    return Reply(text="Done.")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


@pytest.fixture(scope="module")
def claude() -> Path:
    return npm_cli(PACKAGE, VERSION, "claude-code", "claude")


def _claude(exe: Path, prompt: str, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    cmd = [str(exe), "-p", prompt, "--allowedTools", "Bash", "--output-format", "json"]
    done = run_bounded(cmd, env, cwd, CLAUDE_TIMEOUT_S)
    assert done.returncode == 0, f"claude -p failed ({done.returncode}):\n{done.stderr[-3000:]}"
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _env(home: Path, lm_home: Path) -> dict[str, str]:
    env = base_env(home, lm_home)
    env.update({"ANTHROPIC_API_KEY": "dummy", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    return env


def test_claude_code_end_to_end(claude: Path, tmp_path: Path, host_home: Path, isolated_home: Path) -> None:
    expected = subprocess.run(["bash", "-c", BIG], capture_output=True, text=True, timeout=30).stdout
    prompt = "List the rows, then finish."

    # the same scripted session without lightmem2: Claude Code straight to the provider
    vanilla = ScriptedUpstream(policy)
    (tmp_path / "vanilla").mkdir()
    with ServerThread(vanilla.app) as up:
        env = _env(tmp_path / "vanilla", tmp_path / "vanilla-lm")
        env["ANTHROPIC_BASE_URL"] = up.url
        _claude(claude, prompt, env, tmp_path / "vanilla")

    # what lightmem2 would have saved on that session: replay its transcript (report's input)
    from lightmem_plugin.commands import replay_cmd

    (transcript,) = (tmp_path / "vanilla" / ".claude" / "projects").glob("*/*.jsonl")
    replayed = json.loads(replay_cmd.run([str(transcript)], "normal", "anthropic", as_json=True))
    print("\nclaude-code transcript replay (normal mode):", json.dumps(replayed, sort_keys=True))
    assert replayed["sessions"] == 1 and replayed["calls"] >= 2

    fake = ScriptedUpstream(policy)
    work = tmp_path / "work"
    work.mkdir()
    with ServerThread(fake.app) as up:
        write_lightmem_config(isolated_home, free_port(), up.url)
        print(installer.run(uninstall=False, project=None))
        env = _env(host_home, isolated_home)  # no ANTHROPIC_BASE_URL: settings.json sends it to the proxy
        try:
            result = _claude(claude, prompt, env, work)
            calls = len(fake.received)
            status = _claude(claude, "/lightmem2 status", env, work)
            after_status = len(fake.received)
        finally:
            stop_pid(serve_ctl.pid_file())
    assert result["result"] == "Done.", result

    # the provider saw the large Bash output reduced, with a stub naming its key
    bodies = [b for api, b in fake.model_bodies if api == "anthropic" and len(_results(b)) >= 1]
    assert bodies, "no request carried the tool result"
    seen = _text(_results(bodies[-1])[0]["content"])
    keys = STUB_KEY.findall(seen)
    assert keys, f"no lightmem2 stub in what the provider saw: {seen[:300]!r}"
    assert len(seen) < len(expected) // 5
    assert "row 1: compiled module ok" in seen and "row 600: compiled module ok" in seen

    # the key recovers the original byte for byte (what Claude Code handed the hook)
    assert_recovers(keys[0], expected, base_env(host_home, isolated_home))

    # the hook reduced it at ingestion: the transcript holds the reduced output too
    path = transcripts.transcript_for(result["session_id"])
    assert path is not None, "SessionStart did not record the transcript path"
    assert keys[0] in path.read_text(encoding="utf-8")

    # cache figures, with vs. without lightmem2 (same scripted session)
    with_lm, without = cache_figures(fake.reported), cache_figures(vanilla.reported)
    print("\nclaude-code cache figures:", json.dumps({"with_lightmem2": with_lm, "without": without}))
    assert with_lm["prompt_tokens"] < without["prompt_tokens"]
    assert with_lm["K"] < without["K"]

    # /lightmem2 status was answered by the UserPromptSubmit hook: no provider call
    assert after_status == calls
    assert "lightmem2 mode: normal" in status["result"]
    assert "archived originals: " in status["result"]


def test_plugin_manifest_validates(claude: Path, tmp_path: Path, host_home: Path) -> None:
    root = Path(__file__).resolve().parents[3] / "adapters" / "claude_code"
    done = run_bounded(
        [str(claude), "plugin", "validate", "--strict", str(root)],
        base_env(host_home, tmp_path),
        tmp_path,
        60,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "lightmem2 hook claude-code PostToolUse" in done.stdout
