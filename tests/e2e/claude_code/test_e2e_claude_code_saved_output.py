"""Claude Code from npm, end to end: a Bash output over 30,000 chars, which Claude Code saves to a file.

Claude Code keeps such an output in a file of its own and sends the model a ~2 KB preview of it
(``<persisted-output>``: the size, the file's path, then the first 2 KB); its PostToolUse hook gets
the first 30,000 chars, cut mid-line, with ``persistedOutputPath`` in ``tool_response``. lightmem2
leaves such a result as the host cut it (4ceb976, issue #39 item 7); measured before that: the hook
replaced the preview with its reduction of the cut (lines 1, 3, 5, a stub, 1691-1695), archived the
cut as if it were the output, and ``status`` counted the difference as lightmem2's saving.

One scripted session (Bash printing ~54,000 chars, a small Bash, a final answer) runs twice with
``claude -p``, once straight at the fake provider and once with ``lightmem2 install claude-code``,
each with the same HOME, work folder and ``--session-id``, so the saved file's path in the preview
differs only in its name, which Claude Code draws at random. Checked request by request at the fake
provider, which counts tokens with o200k:

- the case is the one under test: a second PostToolUse hook records that Claude Code handed the hooks
  at most 30,000 chars of the output with ``persistedOutputPath`` set;
- the tool_result the model receives for the big output is byte-identical in both runs (the saved
  file's random name aside): Claude Code's own ``<persisted-output>`` preview, no lightmem2 stub in it;
  its success (``is_error``) is the same, and so is every other tool result;
- the file each preview names exists and holds the whole output;
- ``lightmem2 report --json``: one row per model call, tokens sent as the provider counted them,
  "without lightmem2" equal to them (no saving counted for any call, none by any pass) and within
  ``wire_audit.TOLERANCE`` of what the provider counted in the run without lightmem2; ``lightmem2
  status --json``: the context now equals the context without lightmem2, no K saved, nothing archived.

Measured with 4ceb976's check in the PostToolUse hook taken out: the preview differs, and
``report`` counts call 2 as 18,653 tokens without lightmem2 for 11,362 sent.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    STUB_KEY,
    ScriptedUpstream,
    base_env,
    log_tail,
    npm_cli,
    run_bounded,
    stop_pid,
    write_lightmem_config,
)
from fake_wire import Reply
from server_harness import ServerThread, free_port
from wire_audit import audit_ledger, o200k_counter

from lightmem_plugin.hosts.claude_code import install as installer
from lightmem_plugin.hosts.shared import serve_ctl

PACKAGE = "@anthropic-ai/claude-code"
PINNED = "2.1.332"  # the pin of test_e2e_claude_code.py
NEWEST = "2.1.332"  # `npm view @anthropic-ai/claude-code version` (2026-12-05): nothing newer than the pin
VERSIONS = list(dict.fromkeys([PINNED, NEWEST]))
CLAUDE_TIMEOUT_S = 180
HOST_LIMIT = 30_000  # Claude Code's own Bash output limit: above it the output goes to a file
HUGE = "seq -f 'row %g: compiled module ok, all checks passed' 1 1200"  # ~54,000 chars
SMALL = "echo second step done"
FINAL = "Done."
PROMPT = "List the rows, then finish."


def _results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for msg in body.get("messages") or []
        if msg.get("role") == "user" and isinstance(msg.get("content"), list)
        for block in msg["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def _is_agent_call(body: dict[str, Any]) -> bool:
    """The agent's own model request (it offers the Bash tool); the rest are the host's side calls."""
    return any(t.get("name") == "Bash" for t in body.get("tools") or [])


def policy(api: str, body: dict[str, Any]) -> Reply:
    """Bash (HUGE), then Bash (SMALL), then FINAL; side calls get plain text."""
    if not _is_agent_call(body):
        return Reply(text="Rows")
    done = len(_results(body))
    steps = [(HUGE, "list rows"), (SMALL, "finish")]
    if done < len(steps):
        command, what = steps[done]
        return Reply(text="", tool_calls=[("Bash", json.dumps({"command": command, "description": what}))])
    return Reply(text=FINAL)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


@pytest.fixture(scope="module", params=VERSIONS)
def claude(request: pytest.FixtureRequest) -> Path:
    return npm_cli(PACKAGE, str(request.param), "claude-code", "claude")


def _env(home: Path, lm_home: Path) -> dict[str, str]:
    env = base_env(home, lm_home)
    env.update({"ANTHROPIC_API_KEY": "dummy", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    return env


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _run(exe: Path, env: dict[str, str], work: Path, session: str) -> dict[str, Any]:
    cmd = [str(exe), "-p", PROMPT, "--allowedTools", "Bash", "--output-format", "json"]
    cmd += ["--session-id", session]
    done = run_bounded(cmd, env, work, CLAUDE_TIMEOUT_S)
    lm_home = Path(env["LIGHTMEM2_HOME"])
    assert done.returncode == 0, (
        f"claude -p failed ({done.returncode}):\n{done.stderr[-3000:]}\n"
        f"hooks.log: {log_tail(lm_home / 'hooks.log')}"
    )
    out: dict[str, Any] = json.loads(done.stdout)
    assert out.get("result") == FINAL, out
    return out


def _agent_calls(up: ScriptedUpstream) -> tuple[list[dict[str, Any]], list[dict[str, int]], list[bool]]:
    """The agent's requests, the provider's usage for each, and which of all requests were the agent's."""
    assert len(up.model_bodies) == len(up.reported), "a model request got no usage row"
    mask = [_is_agent_call(body) for _, body in up.model_bodies]
    bodies = [body for (_, body), keep in zip(up.model_bodies, mask, strict=True) if keep]
    usage = [row for row, keep in zip(up.reported, mask, strict=True) if keep]
    return bodies, usage, mask


def _cli(env: dict[str, str], cwd: Path, *args: str) -> Any:
    done = run_bounded([sys.executable, "-m", "lightmem_plugin.cli", *args], env, cwd, 60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


SAVED_TO = re.compile(r"\A<persisted-output>\nOutput too large \([^)\n]+\)\. Full output saved to: (.+)\n")
"""The head of Claude Code's preview (2.1.332), naming the file it saved the whole output to."""
_RECORDER = """\
import json, os, sys
payload = json.load(sys.stdin)
with open(os.path.join(sys.argv[1], payload.get("tool_use_id", "unknown") + ".json"), "w") as out:
    json.dump(payload, out)
"""


def _record_post_tool_use(settings: Path, out: Path) -> None:
    """A second PostToolUse hook beside lightmem2's that writes each payload to ``out`` and prints
    nothing: what Claude Code handed lightmem2's hook."""
    script = out.parent / "record_hook.py"
    script.write_text(_RECORDER, encoding="utf-8")
    out.mkdir()
    data = json.loads(settings.read_text(encoding="utf-8"))
    command = f"{sys.executable} {script} {out}"
    data["hooks"]["PostToolUse"].append({"matcher": "*", "hooks": [{"type": "command", "command": command}]})
    settings.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _model_view(bodies: list[dict[str, Any]], expected: str) -> list[list[tuple[str, Any]]]:
    """Per request, each tool result as the model reads it ((text, is_error)), the path of Claude
    Code's saved file spelled ``<saved file>``: the file's name is random, the rest of it is the same
    in both runs. Each saved file must exist and hold the whole output."""
    view = []
    for body in bodies:
        row = []
        for block in _results(body):
            text = _text(block["content"])
            saved = SAVED_TO.match(text)
            if saved is not None:
                path = Path(saved.group(1))
                assert path.is_file(), f"the preview names {path}, which does not exist"
                assert path.read_text(encoding="utf-8").rstrip("\n") == expected.rstrip("\n")
                text = text.replace(saved.group(1), "<saved file>")
            row.append((text, block.get("is_error")))
        view.append(row)
    return view


def test_claude_code_saved_output_is_left_as_the_host_cut_it(
    claude: Path, tmp_path: Path, host_home: Path, isolated_home: Path
) -> None:
    started = time.monotonic()
    expected = subprocess.run(["bash", "-c", HUGE], capture_output=True, text=True, timeout=30).stdout
    assert len(expected) > 40_000
    session = str(uuid.uuid4())
    work = tmp_path / "work"  # one HOME, work folder and session id for both runs: one saved-file path

    # without lightmem2: Claude Code straight to the provider
    vanilla = ScriptedUpstream(policy, counter=o200k_counter())
    with ServerThread(vanilla.app) as up:
        env = _env(_fresh(host_home), tmp_path / "vanilla-lm")
        env["ANTHROPIC_BASE_URL"] = up.url
        _run(claude, env, _fresh(work), session)
    without, without_usage, _ = _agent_calls(vanilla)
    plain = _model_view(without, expected)  # before the next run wipes HOME (and the saved file)

    # with lightmem2 installed (normal mode): settings.json sends Claude Code to the proxy
    fake = ScriptedUpstream(policy, counter=o200k_counter())
    payloads = tmp_path / "post-tool-use"
    with ServerThread(fake.app) as up:
        _fresh(host_home)
        write_lightmem_config(isolated_home, free_port(), up.url)
        print(installer.run(uninstall=False, project=None))
        _record_post_tool_use(host_home / ".claude" / "settings.json", payloads)
        env = _env(host_home, isolated_home)
        try:
            _run(claude, env, _fresh(work), session)
            seen = _model_view(_agent_calls(fake)[0], expected)
        finally:
            stop_pid(serve_ctl.pid_file())
    with_lm, with_usage, mask = _agent_calls(fake)
    check_env = base_env(host_home, isolated_home)
    status = _cli(check_env, work, "status", "--session", session, "--json")
    (report,) = _cli(check_env, work, "report", "--session", session, "--json")["sessions"]
    preview = seen[-1][0][0]
    print(f"\nthe preview the model read ({len(preview)} chars):\n{preview[:400]}\n...\n{preview[-200:]}")
    print("provider usage:", json.dumps(with_usage), "without lightmem2:", json.dumps(without_usage))
    print("status --json session:", json.dumps(status["session"], sort_keys=True))

    # the case under test: the hook got Claude Code's 30,000-char cut, with the saved file's path
    hooked = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(payloads.glob("*.json"))]
    big = [p for p in hooked if p.get("tool_input", {}).get("command") == HUGE]
    assert len(big) == 1 and len(hooked) == 2, [p.get("tool_input") for p in hooked]
    response = big[0]["tool_response"]
    assert isinstance(response.get("persistedOutputPath"), str), sorted(response)
    assert len(response["stdout"]) <= HOST_LIMIT < len(expected), len(response["stdout"])

    # request by request, what the model read: the same in both runs, Claude Code's own preview
    assert len(with_lm) == len(without) == 3, (len(with_lm), len(without))
    assert seen == plain, "the tool results the model read differ with lightmem2"
    assert [len(row) for row in seen] == [0, 1, 2]
    assert preview.startswith("<persisted-output>\n") and preview.rstrip().endswith("</persisted-output>")
    assert seen[-1][0][1] in (None, False), "the big output reads as a failure"
    assert seen[-1][1][0] == "second step done"
    for body in with_lm:
        for block in _results(body):
            text = _text(block["content"])
            assert "[lightmem2: " not in text and not STUB_KEY.search(text), text[:300]

    # lightmem2's figures: one row per model call, what the provider counted, and no saving
    calls = report["calls"]
    assert len(calls) == len(mask), f"{len(calls)} ledger rows for {len(mask)} requests at the provider"
    rows = [row for row, keep in zip(calls, mask, strict=True) if keep]
    for n, (row, got) in enumerate(zip(rows, with_usage, strict=True)):
        where = f"call {n + 1}"
        assert row["realInputTokens"] == got["prompt"], (where, row["realInputTokens"], got["prompt"])
        assert row["realBaselineTokens"] == row["realInputTokens"], (where, row)
        assert row["baselineTokens"] == row["inputTokens"], (where, row)
        assert not any(row["savedByPass"].values()), (where, row["savedByPass"])
    # and "without lightmem2" as the provider counted the run without it (within wire_audit.TOLERANCE:
    # with lightmem2 installed, Claude Code's environment text is ~25 tokens longer)
    audit_ledger(rows, with_usage, without_usage).raise_if_faulty()
    summary = status["session"]
    assert summary["calls"] == len(calls)
    assert summary["contextTokens"] == summary["contextTokensWithout"], summary
    assert summary["baselineTokens"] == summary["inputTokens"], summary
    assert not any(summary["savedByPass"].values()) and summary["kSaved"] == 0, summary
    assert not report["topReductions"], report["topReductions"]
    assert status["artifacts"] == 0, "something was archived: no stub, so nothing to recover"
    print(f"claude-code {claude.parents[2].name} saved-output run: {time.monotonic() - started:.1f} s")
