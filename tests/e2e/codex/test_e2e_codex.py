"""Codex CLI 0.169.0 from npm, end to end: ``codex exec`` -> lightmem2 serve -> fake provider.

The scripted session runs one ``exec_command`` with a large output, then calls the recover tool that
lightmem2's MCP server adds, then ends. With lightmem2 installed (``lightmem2 install codex``) the
provider must see the reduced output with a stub on the Responses wire, the key must recover the
original byte for byte (CLI and MCP tool), and ``/lightmem2 status`` must end the turn in the
UserPromptSubmit hook with no provider call. The same session without lightmem2 gives the cache
figures to compare.
"""

from __future__ import annotations

import json
import re
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
from lightmem_plugin.install import codex as installer

PACKAGE, VERSION = "@openai/codex", "0.169.0"
# ~6 KB: over lightmem2's trigger, under the size at which Codex truncates output itself
BIG = "seq -f 'row %g: compiled module ok' 1 220"
CODEX_TIMEOUT_S = 180
RECOVER = "lightmem2_recover"


def _outputs(body: dict[str, Any]) -> list[dict[str, Any]]:
    items = body.get("input")
    return (
        [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if isinstance(items, list)
        else []
    )


def _tool_names(body: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            names.append(str(tool.get("name")))
            # a namespace (Codex puts each MCP server's tools in one): the model calls NAMESPACE__TOOL
            names.extend(
                f"{tool.get('name')}__{t.get('name')}" for t in tool.get("tools") or [] if isinstance(t, dict)
            )
    return names


NAMESPACED = re.compile(rb'"name": "(mcp__[A-Za-z0-9_-]+?)__([A-Za-z0-9_-]+)"')


def namespaced(event: bytes) -> bytes:
    """A call to NAMESPACE__TOOL as the Responses API streams it: ``name`` plus ``namespace``."""
    return NAMESPACED.sub(rb'"name": "\2", "namespace": "\1"', event)


def policy(api: str, body: dict[str, Any]) -> Reply:
    """exec_command (large output), then the MCP recover tool on its stub's key, then a final answer."""
    names = _tool_names(body)
    if "exec_command" not in names:
        return Reply(text="ok")
    outputs = _outputs(body)
    if not outputs:
        return Reply(text="", tool_calls=[("exec_command", json.dumps({"cmd": BIG}))])
    recover = next((n for n in names if n.endswith(RECOVER)), None)
    keys = STUB_KEY.findall(str(outputs[0].get("output")))
    if len(outputs) == 1 and recover and keys:
        return Reply(text="", tool_calls=[(recover, json.dumps({"key": keys[0], "lines": "2:3"}))])
    return Reply(text="Done.")


@pytest.fixture(scope="module")
def codex() -> Path:
    return npm_cli(PACKAGE, VERSION, "codex", "codex")


def _codex_home(home: Path, model_lines: str) -> Path:
    folder = home / ".codex"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(model_lines, encoding="utf-8")
    return folder


def _exec(
    exe: Path, prompt: str, env: dict[str, str], cwd: Path, as_json: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = [str(exe), "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust"]
    cmd += ["--json", prompt] if as_json else [prompt]
    done = run_bounded(cmd, env, cwd, CODEX_TIMEOUT_S)
    assert done.returncode == 0, f"codex exec failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return done


def test_codex_end_to_end(codex: Path, tmp_path: Path, host_home: Path, isolated_home: Path) -> None:
    expected = subprocess.run(["bash", "-c", BIG], capture_output=True, text=True, timeout=30).stdout
    prompt = "List the rows, then finish."

    # the same scripted session without lightmem2: Codex straight to the provider
    vanilla = ScriptedUpstream(policy)
    vhome = tmp_path / "vanilla"
    with ServerThread(vanilla.app) as up:
        folder = _codex_home(
            vhome,
            f'model = "fake-model"\nmodel_provider = "fake"\n\n[model_providers.fake]\nname = "fake"\n'
            f'base_url = "{up.url}/v1"\nwire_api = "responses"\nenv_key = "OPENAI_API_KEY"\n',
        )
        env = {
            **base_env(vhome, tmp_path / "vanilla-lm"),
            "CODEX_HOME": str(folder),
            "OPENAI_API_KEY": "dummy",
        }
        (vhome / "work").mkdir()
        _exec(codex, prompt, env, vhome / "work")

    fake = ScriptedUpstream(policy, namespaced)
    work = tmp_path / "work"
    work.mkdir()
    with ServerThread(fake.app) as up:
        write_lightmem_config(isolated_home, free_port(), up.url)
        folder = _codex_home(host_home, 'model = "fake-model"\n')
        print(installer.run(uninstall=False, project=None))
        env = {**base_env(host_home, isolated_home), "OPENAI_API_KEY": "dummy"}
        try:
            run = _exec(codex, prompt, env, work)
            calls = len(fake.received)
            status = _exec(codex, "/lightmem2 status", env, work, as_json=False)
            after_status = len(fake.received)
        finally:
            stop_pid(serve_ctl.pid_file())
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    messages = [
        e["item"].get("text")
        for e in events
        if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"
    ]
    assert messages and messages[-1] == "Done.", run.stdout[-2000:]

    # the provider saw the exec_command output reduced, with a stub naming its key (Responses wire)
    bodies = [b for api, b in fake.model_bodies if api == "responses" and _outputs(b)]
    assert bodies, "no request carried the tool output"
    seen = str(_outputs(bodies[-1])[0]["output"])
    keys = STUB_KEY.findall(seen)
    assert keys, f"no lightmem2 stub in what the provider saw: {seen[:300]!r}"
    assert len(seen) < len(expected) // 2
    assert "row 1: compiled module ok" in seen and "row 220: compiled module ok" in seen

    # the key recovers the original byte for byte: CLI, and the MCP tool the model called
    assert_recovers(keys[0], expected, base_env(host_home, isolated_home))
    outputs = _outputs(bodies[-1])
    assert len(outputs) == 2, f"the recover tool was not called: tools {_tool_names(bodies[-1])}"
    recovered = outputs[1]["output"]  # MCP results come back as input_text parts
    text = recovered if isinstance(recovered, str) else "".join(p.get("text", "") for p in recovered)
    assert "row 2: compiled module ok\nrow 3: compiled module ok\n" in text
    assert "row 1:" not in text and "row 4:" not in text

    # SessionStart recorded the rollout file as the session's transcript
    sid = next(e["thread_id"] for e in events if e.get("type") == "thread.started")
    assert transcripts.transcript_for(sid) is not None

    # cache figures, with vs. without lightmem2: the same two calls (command, then the answer to its
    # output); the lightmem2 session also has the recover call, reported apart
    same = len(vanilla.reported)
    with_lm, without = cache_figures(fake.reported[:same]), cache_figures(vanilla.reported)
    figures = {
        "with_lightmem2": with_lm,
        "without": without,
        "with_lightmem2_all_calls": cache_figures(fake.reported),
    }
    print("\ncodex cache figures:", json.dumps(figures))
    assert same == 2
    # the recover tool is in the tool list from the first call on (mcp_servers.lightmem2.required),
    # so the prompt only grows: everything call 1 sent is a cache hit in call 2
    assert any(n.endswith(RECOVER) for n in _tool_names(fake.model_bodies[0][1]))
    assert fake.reported[1]["cached"] >= fake.reported[0]["prompt"] - 16
    assert fake.reported[1]["prompt"] < vanilla.reported[1]["prompt"]
    assert with_lm["K"] < without["K"]

    # /lightmem2 status ended in the UserPromptSubmit hook: no provider call
    assert after_status == calls
    assert "hook: UserPromptSubmit Blocked" in status.stderr
