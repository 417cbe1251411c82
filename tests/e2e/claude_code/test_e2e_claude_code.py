"""Claude Code 2.1.332 from npm, end to end: ``claude -p`` -> lightmem2 serve -> fake provider.

The scripted session runs two Bash calls (one with a large output) and ends. With lightmem2 installed
(``lightmem2 install claude-code``), the SessionStart hook starts the proxy, the PostToolUse hook
reduces the large output, and the provider must see the reduced text with a stub whose key recovers
the original byte for byte. ``/lightmem2 status`` must be answered by the UserPromptSubmit hook with
no provider call. The same session without lightmem2 gives the cache figures to compare.

In aggressive mode, two goals in one session (``claude -p``, then ``claude -p --resume ID``): task 1
reads ten modules, task 2 runs ten small steps. Checked request by request at the fake provider,
against the same session without lightmem2: once task 1 has left, every request is shorter and holds
its one summary, whose key recovers every task 1 output the model saw (and their stubs the files);
the first goal is verbatim, no tool result lacks its call, each request extends the one before, the
later steps ran, the final answer came, and ``lightmem2 report`` names the batch.

Proxy death: a Bash call kills ``lightmem2 serve`` by pid (SIGKILL) in the middle of a session, the
proxy alone (its supervisor restarts it) or with its supervisor (only the PostToolUse hook can bring
it back; ``lightmem2 doctor`` run before that hook must say ``[fail]`` naming claude-code). Every
scripted call must reach the provider, each with every earlier result, the outputs after the restart
stubbed with keys that recover them byte for byte, and stopping ``serve.pid`` must stop everything.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    KILLED,
    STUB_KEY,
    Policy,
    ProxyKill,
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

from lightmem_plugin.hosts.claude_code import install as installer
from lightmem_plugin.hosts.shared import serve_ctl, transcripts

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


def _claude(exe: Path, prompt: str, env: dict[str, str], cwd: Path, *extra: str) -> dict[str, Any]:
    cmd = [str(exe), "-p", prompt, "--allowedTools", "Bash", "--output-format", "json", *extra]
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


# -- aggressive mode: a finished task leaves the context -------------------------------------------
GOAL1 = "Survey every module under src/ and tell me what each one handles."
GOAL2 = "Now run the ten release steps one by one."
MODULES = 10
STEPS = 10


def _module(i: int) -> str:
    """~9 KB of distinct Python: over the aggressive trigger, so each read is reduced with a stub.

    Bodies of three lines: the file view pass keeps the definitions, and a one-line body between two
    of them costs fewer tokens than the marker that would stand for it (so it is shown, not cut)."""
    return "".join(
        f"def handler_{i}_{j}(request, ctx):\n"
        f"    table = lookup_table(request, default={j * 7919 % 997})\n"
        f"    shard = pick_shard(table, request.user_id, replicas={i + 2})\n"
        f"    return route(request, table=table, shard=shard)\n\n"
        for j in range(50)
    )


def _after_goal(body: dict[str, Any], goal: str) -> list[dict[str, Any]] | None:
    """The messages after the user message holding ``goal`` (None when no message holds it)."""
    msgs = body.get("messages") or []
    for n in range(len(msgs) - 1, -1, -1):
        if msgs[n].get("role") == "user" and goal in _text(msgs[n].get("content") or ""):
            return msgs[n + 1 :]
    return None


def two_goal_policy(api: str, body: dict[str, Any]) -> Reply:
    """Goal 1: read each module with Bash, then a short answer; goal 2: ten small steps, then Done.

    The model says a word with each call, as models do (Claude Code adds a "the user hasn't heard
    from you" system message after five silent turns, and a system message ends a task's work)."""
    if not any(t.get("name") == "Bash" for t in body.get("tools") or []):
        return Reply(text="ok")
    after2 = _after_goal(body, GOAL2)
    if after2 is not None:
        done = len(_results({"messages": after2}))
        if done < STEPS:
            cmd = f"echo release step {done + 1} ok"
            args = json.dumps({"command": cmd, "description": "step"})
            return Reply(text=f"Step {done + 1}.", tool_calls=[("Bash", args)])
        return Reply(text="Done.")
    done = len(_results({"messages": _after_goal(body, GOAL1) or []}))
    if done < MODULES:
        cmd = f"cat src/mod_{done}.py"
        args = json.dumps({"command": cmd, "description": "read"})
        return Reply(text=f"Reading module {done}.", tool_calls=[("Bash", args)])
    return Reply(text="Surveyed: every module routes requests to its shard.")


def _two_goals(exe: Path, env: dict[str, str], cwd: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    src = cwd / "src"
    src.mkdir(parents=True)
    for i in range(MODULES):
        (src / f"mod_{i}.py").write_text(_module(i), encoding="utf-8")
    first = _claude(exe, GOAL1, env, cwd)
    second = _claude(exe, GOAL2, env, cwd, "--resume", str(first["session_id"]))
    return first, second


def _bash_bodies(up: ScriptedUpstream) -> list[dict[str, Any]]:
    """The agent's own model requests (with the Bash tool), in order."""
    return [
        b
        for api, b in up.model_bodies
        if api == "anthropic" and any(t.get("name") == "Bash" for t in b.get("tools") or [])
    ]


def _plain(value: Any) -> Any:
    """``value`` without ``cache_control`` (Claude Code moves its breakpoints every call)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _tool_ids(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The tool_use ids and the tool_result ids of a request, in order."""
    uses, results = [], []
    for msg in body.get("messages") or []:
        for block in msg.get("content") if isinstance(msg.get("content"), list) else []:
            if block.get("type") == "tool_use":
                uses.append(block["id"])
            elif block.get("type") == "tool_result":
                results.append(block["tool_use_id"])
    return uses, results


def test_claude_code_aggressive_collapses_a_finished_task(
    claude: Path, tmp_path: Path, host_home: Path, isolated_home: Path
) -> None:
    # the same two-goal session without lightmem2: what Claude Code itself sends
    vanilla = ScriptedUpstream(two_goal_policy)
    with ServerThread(vanilla.app) as up:
        env = _env(tmp_path / "vanilla", tmp_path / "vanilla-lm")
        env["ANTHROPIC_BASE_URL"] = up.url
        _two_goals(claude, env, tmp_path / "vanilla")
    plain = _bash_bodies(vanilla)
    assert len(plain) == MODULES + 1 + STEPS + 1

    fake = ScriptedUpstream(two_goal_policy)
    work = tmp_path / "work"
    with ServerThread(fake.app) as up:
        # file views cut above 6,000 chars, as aggressive mode did before fileViewChars became 24,000:
        # each 7 KB read then carries a stub, which the collapse must keep recoverable
        views = {"aggressive": {"fileViewChars": 6000}}
        write_lightmem_config(isolated_home, free_port(), up.url, mode="aggressive", reduction=views)
        print(installer.run(uninstall=False, project=None))
        env = _env(host_home, isolated_home)
        try:
            first, second = _two_goals(claude, env, work)
        finally:
            stop_pid(serve_ctl.pid_file())
    bodies = _bash_bodies(fake)
    assert len(bodies) == len(plain), "the session took another course with lightmem2"

    # the batch: the first request carrying task 1's summary, and every one after it
    marker = "[lightmem2: task 1 finished"
    batch = next((n for n, b in enumerate(bodies) if marker in json.dumps(b)), None)
    assert batch is not None, "task 1 never left the context"
    # the first request that carries the second goal is request MODULES + 1: a goal closes in the
    # first batch after the next goal, which may be that very request
    assert batch >= MODULES + 1, "task 1 can only leave once the second goal arrived"
    assert len(bodies) - batch >= 3, "the session must run on after the batch"
    before = bodies[batch - 1]
    after1, after2 = _after_goal(before, GOAL1), _after_goal(before, GOAL2)
    assert after1 is not None
    task1 = after1 if after2 is None else after1[: len(after1) - len(after2) - 1]  # up to goal 2
    for n in range(batch, len(bodies)):
        body, host = bodies[n], plain[n]
        msgs = body["messages"]
        # shorter than what Claude Code sent without lightmem2; the batch's request even than the
        # request before it (the session grows again after it)
        assert len(msgs) < len(host["messages"]) and (n > batch or len(msgs) < len(before["messages"]))
        summaries = [m for m in msgs if m["role"] == "assistant" and marker in _text(m["content"])]
        assert len(summaries) == 1, f"request {n}: {len(summaries)} task 1 summaries"
        # the first goal is there verbatim, and what stood before the summary is as it was (the goal,
        # Claude Code's environment block after it)
        at = msgs.index(summaries[0])
        assert GOAL1 in [b.get("text") for b in msgs[0]["content"]]
        assert _plain(msgs[:at]) == _plain(before["messages"][:at])
        # no tool result without its call, none twice
        uses, results = _tool_ids(body)
        assert set(results) <= set(uses) and len(results) == len(set(results))
    # prefix stability after the batch: each request extends the one before (the last message holds
    # the newest results and the per-call tail)
    for a, b in zip(bodies[batch:], bodies[batch + 1 :], strict=False):
        history = _plain(a["messages"][:-1])
        assert _plain(b["messages"][: len(history)]) == history

    # the summary's key recovers task 1: every output the model saw, byte for byte, and each of
    # those outputs' own stubs the command's real output
    text = _text(next(m for m in bodies[-1]["messages"] if marker in _text(m["content"]))["content"])
    key = STUB_KEY.search(text)
    assert key is not None, text[:500]
    from lightmem_plugin.pipeline import LightMem

    check_env = base_env(host_home, isolated_home)
    archive = LightMem().registry.recover(key.group(1))
    seen = [_text(r["content"]) for r in _results({"messages": task1})]
    assert len(seen) == MODULES
    done = subprocess.run(
        [sys.executable, "-m", "lightmem_plugin.cli", "recover", key.group(1)],
        capture_output=True,
        text=True,
        timeout=60,
        env=check_env,
    )
    assert done.returncode == 0 and done.stdout == archive
    for i, output in enumerate(seen):
        assert output in archive, f"output {i} of task 1 is not in the archive verbatim"
        inner = STUB_KEY.findall(output)
        assert inner, f"output {i} should have been reduced with a stub: {output[:200]!r}"
        assert_recovers(inner[0], _module(i), check_env)

    # the session went on: every step after the batch ran, and the final answer arrived
    last_results = [_text(r["content"]) for r in _results({"messages": _after_goal(bodies[-1], GOAL2) or []})]
    assert last_results == [f"release step {k} ok" for k in range(1, STEPS + 1)]
    assert first["result"].startswith("Surveyed") and second["result"] == "Done."

    # `lightmem2 report` names the batch
    report = subprocess.run(
        [sys.executable, "-m", "lightmem_plugin.cli", "report", "--all"],
        capture_output=True,
        text=True,
        timeout=60,
        env=check_env,
    )
    assert report.returncode == 0, report.stderr
    print("\nclaude-code aggressive report:\n" + report.stdout)
    # one ledger row per request of this session: the batch is the call that first sent the summary
    named = re.search(r"^evictions: 1 batches, [\d,]+ tokens \(calls (\d+)\)$", report.stdout, re.M)
    assert named is not None and int(named.group(1)) == batch + 1, report.stdout
    assert f"call {batch + 1} at message " in report.stdout and ": eviction batch" in report.stdout
    with_lm, without = cache_figures(fake.reported), cache_figures(vanilla.reported)
    print(
        "claude-code aggressive cache figures:", json.dumps({"with_lightmem2": with_lm, "without": without})
    )
    assert with_lm["prompt_tokens"] < without["prompt_tokens"]


# -- proxy death: `lightmem2 serve` killed by pid in the middle of a session -----------------------
AFTER = "seq -f 'row %g: served after the restart' 1 600"


def kill_policy(kill: str) -> Policy:
    """Bash BIG, then ``kill`` (stops the proxy), then Bash AFTER (large), then SMALL, then Done."""
    steps = [BIG, kill, AFTER, SMALL]

    def answer(api: str, body: dict[str, Any]) -> Reply:
        if not any(t.get("name") == "Bash" for t in body.get("tools") or []):
            return Reply(text="ok")
        done = len(_results(body))
        if done < len(steps):
            args = json.dumps({"command": steps[done], "description": f"step {done + 1}"})
            return Reply(text="", tool_calls=[("Bash", args)])
        return Reply(text="Done.")

    return answer


@pytest.mark.parametrize("what", ["child", "both"])
def test_claude_code_survives_the_proxy_killed_mid_session(
    claude: Path, what: str, tmp_path: Path, host_home: Path, isolated_home: Path
) -> None:
    """``child``: the proxy alone is killed (SIGKILL, by pid) during a tool call, the supervisor and
    the PostToolUse hook are there to bring it back. ``both``: the supervisor too, so only the hook
    can, and ``lightmem2 doctor`` run in between must say ``[fail]`` naming Claude Code. Either way
    the next model call must reach the provider through a new proxy, and the session end."""
    kill = ProxyKill(isolated_home)
    fake = ScriptedUpstream(kill_policy(kill.shell(what)))
    work = tmp_path / "work"
    work.mkdir()
    port = free_port()
    cfg = serve_ctl.Config()
    cfg.server.port = port
    env = _env(host_home, isolated_home)
    env["PATH"] = f"{claude.parent}{os.pathsep}{env['PATH']}"  # doctor looks for `claude` on PATH
    with ServerThread(fake.app) as up:
        write_lightmem_config(isolated_home, port, up.url)
        print(installer.run(uninstall=False, project=None))
        try:
            result = _claude(claude, "List the rows, restart, list again, then finish.", env, work)
            killed, (supervisor, child), up_after, doctor_after = kill.observe(
                lambda: serve_ctl.is_running(cfg), env, work
            )
        finally:
            leaked = kill.stop_all(lambda: serve_ctl.is_running(cfg))
    assert result["result"] == "Done.", result

    # every scripted model call arrived, each one carrying the results of the steps before it
    bodies = _bash_bodies(fake)
    assert len(bodies) == 5, f"{len(bodies)} model calls reached the provider, 5 were scripted"
    seen = [_text(r["content"]) for r in _results(bodies[-1])]
    assert len(seen) == 4
    for n, body in enumerate(bodies):
        assert [_text(r["content"]) for r in _results(body)] == seen[:n], f"call {n + 1} lost a result"

    # the kill ran (the proxy was down), and a new proxy served the calls after it
    assert seen[1] == KILLED.format(what=what, code=1 if what == "both" else "-")
    assert up_after and child is not None and child != killed["child"], "serve.child.pid is stale"
    if what == "child":  # the supervisor's own restart: no second supervisor was started
        assert supervisor == killed["supervisor"], "a second supervisor was started beside the first"
    else:
        assert supervisor != killed["supervisor"]

    # what the model saw after the restart: stubs whose keys recover the outputs byte for byte, the
    # rest verbatim
    check_env = base_env(host_home, isolated_home)
    for n, command in ((0, BIG), (2, AFTER)):
        expected = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30).stdout
        keys = STUB_KEY.findall(seen[n])
        assert keys, f"output {n + 1} was not reduced: {seen[n][:300]!r}"
        assert_recovers(keys[0], expected, check_env)
    assert seen[3] == "second step done"

    # doctor: [fail] naming Claude Code while the proxy was down, [pass] once it was back
    if what == "both":
        report = kill.doctor()
        line = next((x for x in report.splitlines() if x.startswith("[fail] server:")), None)
        assert line is not None, report
        assert "claude-code is wired to it" in line, line
    assert re.search(r"^\[pass\] server: running at ", doctor_after, re.M), doctor_after
    assert not leaked, f"stopping serve.pid left these running (-1: the port): {leaked}"
