"""Claude Code 2.1.332 from npm, at the wire: what the model received with lightmem2 against without it.

One scripted session (``wire_audit.STEPS``: ten tool calls, the shell steps as the Bash tool, the read
step as Claude Code's Read tool on the work folder's ``settings_module.py``, then ``wire_audit.FINAL``)
runs twice with ``claude -p`` against the same fake provider, which counts tokens with o200k: once
straight at the provider (``ANTHROPIC_BASE_URL``), once with ``lightmem2 install claude-code`` (normal
mode; the SessionStart hook starts the proxy). Both runs use the same work folder path, freshly
written by ``wire_audit.write_workspace`` each time, so the Read call's arguments are the same.

Claude Code's own side calls (no Bash tool: titles, summaries) are answered with plain text and left
out of both runs' compared requests and usage rows alike. Then:

- ``wire_audit.audit``: every tool output is verbatim or reduced with stubs whose keys recover part of
  the output the run without lightmem2 shows there; no stub names its own call; the success or failure
  the model reads is the same; each request extends the one before;
- ``wire_audit.audit_ledger``: ``lightmem2 report --json`` has one row per model call, tokens sent as
  the provider counted them, "without lightmem2" (``realBaselineTokens``) within 2% of what the
  provider counted for that call in the run without lightmem2;
- the with-run stubbed at least three outputs, one as a repeat of the earlier identical listing, kept
  the failing check's lines, and sent fewer prompt tokens.

Both runs' per-call figures are written to ``<e2e cache>/wire-claude-code-<version>.json``.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    Policy,
    ScriptedUpstream,
    base_env,
    cache_root,
    npm_cli,
    run_bounded,
    stop_pid,
    write_lightmem_config,
)
from fake_wire import Reply
from server_harness import ServerThread, free_port
from wire_audit import (
    FAILING,
    FINAL,
    LISTING,
    PROMPT,
    REPEAT_OF,
    STEPS,
    STUB_ANY,
    Step,
    ToolOutput,
    audit,
    audit_ledger,
    o200k_counter,
    per_call_figures,
    tool_outputs,
    write_workspace,
)

from lightmem_plugin.hosts.claude_code import install as installer
from lightmem_plugin.hosts.shared import serve_ctl

PACKAGE = "@anthropic-ai/claude-code"
PINNED = "2.1.332"  # also the newest (`npm view @anthropic-ai/claude-code version`)
VERSIONS = [PINNED]
CLAUDE_TIMEOUT_S = 420

Usage = list[dict[str, int]]
Bodies = list[dict[str, Any]]


@pytest.fixture(scope="module", params=VERSIONS)
def claude(request: pytest.FixtureRequest) -> tuple[str, Path, Path]:
    """(version, executable, e2e cache root): module scope, so the cache root is read before the
    ``host_home`` fixture points HOME at the test's own folder."""
    version = str(request.param)
    return version, npm_cli(PACKAGE, version, "claude-code", "claude"), cache_root()


def _is_agent_call(body: dict[str, Any]) -> bool:
    """The agent's own model request (it offers the Bash tool); the rest are the host's side calls."""
    return any(t.get("name") == "Bash" for t in body.get("tools") or [])


def _call(step: Step, work: Path) -> tuple[str, str]:
    if step.kind == "read":
        return "Read", json.dumps({"file_path": str(work / step.path)})
    return "Bash", json.dumps({"command": step.command, "description": f"release check: {step.command[:40]}"})


def session_policy(work: Path) -> Policy:
    """The next STEPS call from the number of tool results in the request, then FINAL; side calls
    (no Bash tool) get plain text."""

    def answer(api: str, body: dict[str, Any]) -> Reply:
        if not _is_agent_call(body):
            return Reply(text="Release checks")
        done = len(tool_outputs(api, body))
        if done < len(STEPS):
            return Reply(text="", tool_calls=[_call(STEPS[done], work)])
        return Reply(text=FINAL)

    return answer


def _env(home: Path, lm_home: Path) -> dict[str, str]:
    env = base_env(home, lm_home)
    env.update({"ANTHROPIC_API_KEY": "dummy", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    return env


def _fresh(work: Path) -> Path:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    write_workspace(work)
    return work


def _run(exe: Path, env: dict[str, str], work: Path) -> dict[str, Any]:
    cmd = [str(exe), "-p", PROMPT, "--allowedTools", "Bash,Read", "--output-format", "json"]
    done = run_bounded(cmd, env, work, CLAUDE_TIMEOUT_S)
    assert done.returncode == 0, f"claude -p failed ({done.returncode}):\n{done.stderr[-3000:]}"
    out: dict[str, Any] = json.loads(done.stdout)
    assert out.get("result") == FINAL, out
    return out


def _agent_calls(up: ScriptedUpstream) -> tuple[Bodies, Usage, list[bool]]:
    """The agent's requests, the provider's usage for each (side calls left out of both), and which
    of all the requests were the agent's."""
    assert len(up.model_bodies) == len(up.reported), "a model request got no usage row"
    mask = [_is_agent_call(body) for _, body in up.model_bodies]
    bodies = [body for (_, body), keep in zip(up.model_bodies, mask, strict=True) if keep]
    usage = [row for row, keep in zip(up.reported, mask, strict=True) if keep]
    return bodies, usage, mask


def _recover(key: str) -> str | None:
    from lightmem_plugin.pipeline import LightMem

    try:
        return LightMem().registry.recover(key)
    except Exception:
        return None


def _ledger_rows(env: dict[str, str], work: Path, session: str, mask: list[bool]) -> list[dict[str, Any]]:
    """The session's rows of ``lightmem2 report --json``, side calls left out as at the provider (a
    row per request the proxy forwarded, in order: when the count differs, all of them, for
    ``audit_ledger`` to name)."""
    cmd = [sys.executable, "-m", "lightmem_plugin.cli", "report", "--session", session, "--json"]
    done = run_bounded(cmd, env, work, 60)
    assert done.returncode == 0, done.stderr
    (data,) = json.loads(done.stdout)["sessions"]
    rows: list[dict[str, Any]] = data["calls"]
    if len(rows) == len(mask):
        rows = [row for row, keep in zip(rows, mask, strict=True) if keep]
    return rows


def _stubbed(outputs: list[ToolOutput]) -> list[ToolOutput]:
    return [o for o in outputs if STUB_ANY.search(o.text)]


def test_claude_code_wire_audit(
    claude: tuple[str, Path, Path], tmp_path: Path, host_home: Path, isolated_home: Path
) -> None:
    version, exe, results = claude
    started = time.monotonic()
    work = tmp_path / "work"  # one path for both runs: the Read call's argument is the same

    # without lightmem2: Claude Code straight to the provider
    vanilla = ScriptedUpstream(session_policy(work), counter=o200k_counter())
    (tmp_path / "vanilla-home").mkdir()
    with ServerThread(vanilla.app) as up:
        env = _env(tmp_path / "vanilla-home", tmp_path / "vanilla-lm")
        env["ANTHROPIC_BASE_URL"] = up.url
        _run(exe, env, _fresh(work))
    without_bodies, without_usage, _ = _agent_calls(vanilla)
    assert len(without_bodies) == len(STEPS) + 1, f"{len(without_bodies)} agent calls without lightmem2"

    # with lightmem2 installed (normal mode): settings.json sends Claude Code to the proxy
    fake = ScriptedUpstream(session_policy(work), counter=o200k_counter())
    with ServerThread(fake.app) as up:
        write_lightmem_config(isolated_home, free_port(), up.url)
        print(installer.run(uninstall=False, project=None))
        env = _env(host_home, isolated_home)
        try:
            answer = _run(exe, env, _fresh(work))
        finally:
            stop_pid(serve_ctl.pid_file())
    with_bodies, with_usage, mask = _agent_calls(fake)
    print(
        f"\nside calls: {len(vanilla.model_bodies) - len(without_bodies)} without, {mask.count(False)} with"
    )

    # what the model received, request by request
    result = audit("anthropic", with_bodies, without_bodies, _recover)
    result.raise_if_faulty()
    # the listing's head again: a marker naming the first listing's call (as the model reads its id),
    # whose output there shows every line the marker stands for
    assert result.named_marks >= 1, result

    # the ledger, against what the provider counted
    rows = _ledger_rows(base_env(host_home, isolated_home), work, str(answer["session_id"]), mask)
    audit_ledger(rows, with_usage, without_usage).raise_if_faulty()

    # lightmem2 did reduce: the listing, the failing check and the listing again (a repeat) reach the
    # model stubbed; the failure's own lines stay in view
    last = tool_outputs("anthropic", with_bodies[-1])
    stubbed = _stubbed(last)
    assert len(stubbed) >= 3, f"{len(stubbed)} stubbed outputs: {[o.arguments[:60] for o in stubbed]}"
    repeats = [o for o in last if REPEAT_OF.search(o.text)]
    assert len(repeats) == 1 and LISTING in repeats[0].arguments, [o.text[:160] for o in repeats]
    failing = next(o for o in last if FAILING in o.arguments)
    assert "FAILED: expected 3 replicas, found 2 (quorum lost)" in failing.text, failing.text
    assert "1 of 180 checks failed" in failing.text, failing.text
    with_fig, without_fig = per_call_figures(with_usage), per_call_figures(without_usage)
    assert with_fig["prompt_tokens"] < without_fig["prompt_tokens"]

    figures = {
        "host": "claude-code",
        "version": version,
        "with_lightmem2": with_fig,
        "without": without_fig,
        "ledger_without_lightmem2": [row.get("realBaselineTokens") for row in rows],
        "audit": {k: getattr(result, k) for k in ("stubbed", "verbatim", "repeats", "recovered")},
        "runtime_s": round(time.monotonic() - started, 1),
    }
    out = results / f"wire-claude-code-{version}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    # the requests themselves, for a person to read side by side (outside the repository)
    bodies = {"with_lightmem2": with_bodies, "without": without_bodies}
    out.with_suffix(".requests.json").write_text(json.dumps(bodies, indent=1) + "\n", encoding="utf-8")
    print(f"claude-code {version} wire figures ({out}):", json.dumps(figures))
