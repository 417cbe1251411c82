"""Codex CLI from npm (0.169.0 pinned, 0.171.0 the newest), end to end: ``codex exec`` -> lightmem2
serve -> fake provider.

The scripted session runs one ``exec_command`` with a large output, then calls the recover tool that
lightmem2's MCP server adds, then ends. With lightmem2 installed (``lightmem2 install codex``) the
provider must see the reduced output with a stub on the Responses wire, the key must recover the
original byte for byte (CLI and MCP tool), and ``/lightmem2 status`` must end the turn in the
UserPromptSubmit hook with no provider call. The same session without lightmem2 gives the cache
figures to compare.

Then, per Codex version and per model mode (the default model, which runs tools through a JavaScript
``exec`` script, "code mode", and ``gpt-5.5``, which calls ``exec_command`` directly), a session with
a large output from a command that succeeds and one from a command that fails: for each tool output
the success or failure and the exit code the model reads must be the same with lightmem2 as without
it, the rest verbatim or stubbed with a key that recovers it byte for byte.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    KILLED,
    STUB_KEY,
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

from lightmem_plugin.hosts.codex import install as installer
from lightmem_plugin.hosts.shared import serve_ctl, transcripts

PACKAGE = "@openai/codex"
PINNED, NEWEST = "0.169.0", "0.171.0"  # NEWEST: `npm view @openai/codex version`
VERSIONS = [PINNED, NEWEST]
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


@pytest.fixture(scope="module", params=VERSIONS)
def codex(request: pytest.FixtureRequest) -> Path:
    return npm_cli(PACKAGE, str(request.param), "codex", "codex")


def fake_provider(url: str) -> str:
    """config.toml lines that make the fake at ``url`` Codex's model provider (the run without lightmem2)."""
    return (
        'model_provider = "fake"\n\n[model_providers.fake]\nname = "fake"\n'
        f'base_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "OPENAI_API_KEY"\n'
    )


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
            'model = "fake-model"\n' + fake_provider(up.url),
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


# -- the tool's success and exit code, as the model reads them --------------------------------------
OK_CMD = "seq -f 'row %g: compiled module ok' 1 300"
FAIL_CMD = "seq -f 'case %g: assertion failed' 1 300; exit 3"
CODE_MODE_TOOL = "exec"
CUSTOM = re.compile(
    rb'"type": "function_call"(, "id": "([^"]+)", "call_id": "[^"]+", "name": "exec", )"arguments"'
)
ITEM_ID = re.compile(rb'"item_id": "([^"]+)"')


class CustomCalls:
    """Streams a call to the code-mode ``exec`` tool as the Responses API streams a free-form call."""

    def __init__(self) -> None:
        self.items: set[bytes] = set()

    def __call__(self, event: bytes) -> bytes:
        found = CUSTOM.search(event)
        if found:
            self.items.add(found.group(2))
            event = CUSTOM.sub(rb'"type": "custom_tool_call"\1"input"', event)
        item = ITEM_ID.search(event)
        if item and item.group(1) in self.items:
            event = event.replace(b"response.function_call_arguments.", b"response.custom_tool_call_input.")
            event = event.replace(b'"arguments":', b'"input":')
        return event


def _code_mode(body: dict[str, Any]) -> bool:
    """True when the tools come as an ``additional_tools`` item holding the JavaScript ``exec`` tool."""
    return any(
        isinstance(i, dict)
        and i.get("type") == "additional_tools"
        and f'"name": "{CODE_MODE_TOOL}"' in json.dumps(i)
        for i in body.get("input") or []
    )


def _tool_outputs(body: dict[str, Any]) -> list[Any]:
    types = ("function_call_output", "custom_tool_call_output")
    return [i["output"] for i in body.get("input") or [] if isinstance(i, dict) and i.get("type") in types]


def status_policy(api: str, body: dict[str, Any]) -> Reply:
    """Run OK_CMD, then FAIL_CMD (as a code-mode script or as exec_command), then finish."""
    done = len(_tool_outputs(body))
    if done >= 2 or not (_code_mode(body) or "exec_command" in _tool_names(body)):
        return Reply(text="Done." if done else "ok")
    cmd = (OK_CMD, FAIL_CMD)[done]
    if _code_mode(body):
        script = f"const r = await tools.exec_command({{cmd: {json.dumps(cmd)}}});\ntext(r);\n"
        return Reply(text="", tool_calls=[(CODE_MODE_TOOL, script)])
    return Reply(text="", tool_calls=[("exec_command", json.dumps({"cmd": cmd}))])


HEADER_LINE = re.compile(r"^(Chunk ID|Wall time|Process exited with code|Original token count|Output)\b.*$")


def model_view(output: Any) -> tuple[str, str | None, str]:
    """(status line or header shape, exit code, body) of one tool output as the model reads it."""
    if isinstance(output, list):  # code mode: "Script completed|failed ...", then what the script printed
        texts = [p.get("text", "") for p in output if isinstance(p, dict)]
        status = texts[0].splitlines()[0] if texts and texts[0] else ""
        rest = "".join(texts[1:])
        try:
            result = json.loads(rest)
        except ValueError:
            return status, None, rest
        code = result.get("exit_code") if isinstance(result, dict) else None
        body = result.get("output", rest) if isinstance(result, dict) else rest
        return status, None if code is None else str(code), str(body)
    text = str(output)
    head, sep, body = text.partition("\nOutput:\n")
    shape = [m.group(1) for line in head.splitlines() if (m := HEADER_LINE.match(line))] if sep else []
    code = re.search(r"^Process exited with code (-?\d+)$", head, re.M)
    return " | ".join(shape), code.group(1) if code else None, body if sep else text


def _run(exe: Path, home: Path, lm_home: Path, model_lines: str, env_extra: dict[str, str]) -> None:
    (home / "work").mkdir(parents=True, exist_ok=True)
    env = {**base_env(home, lm_home), "OPENAI_API_KEY": "dummy", **env_extra}
    done = _exec(exe, "Run the two commands, then finish.", env, home / "work")
    assert "codex_core::tools::router" not in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("model", ["default", "gpt-5.5"])
def test_tool_success_and_exit_code_reach_the_model_unchanged(
    codex: Path, model: str, tmp_path: Path, host_home: Path, isolated_home: Path
) -> None:
    model_line = "" if model == "default" else f'model = "{model}"\n'
    vanilla = ScriptedUpstream(status_policy, CustomCalls())
    vhome = tmp_path / "vanilla"
    with ServerThread(vanilla.app) as up:
        folder = _codex_home(
            vhome,
            model_line + fake_provider(up.url),
        )
        _run(codex, vhome, tmp_path / "vanilla-lm", model_line, {"CODEX_HOME": str(folder)})

    custom = CustomCalls()
    fake = ScriptedUpstream(status_policy, lambda ev: custom(namespaced(ev)))
    with ServerThread(fake.app) as up:
        write_lightmem_config(isolated_home, free_port(), up.url)
        _codex_home(host_home, model_line)
        installer.run(uninstall=False, project=None)
        try:
            _run(codex, host_home, isolated_home, model_line, {})
        finally:
            stop_pid(serve_ctl.pid_file())

    plain_last, lm_last = vanilla.model_bodies[-1][1], fake.model_bodies[-1][1]
    assert _code_mode(plain_last) is (model == "default") is _code_mode(lm_last)
    plain, seen = _tool_outputs(plain_last), _tool_outputs(lm_last)
    assert len(plain) == len(seen) == 2, f"the scripted commands did not both run: {plain_last['input'][-3:]}"
    stubs = 0
    for (p_status, p_code, p_body), (s_status, s_code, s_body) in zip(
        map(model_view, plain), map(model_view, seen), strict=True
    ):
        assert s_status == p_status and s_code == p_code, (p_status, p_code, s_status, s_code)
        if s_body != p_body:
            keys = STUB_KEY.findall(s_body)
            assert keys, f"changed without a stub: {s_body[:300]!r}"
            assert_recovers(keys[0], p_body, base_env(host_home, isolated_home))
            if model == "default":  # code mode: the script can run a command, not call our deferred tool
                assert "run: lightmem2 recover " in s_body and "lightmem2_recover(" not in s_body, s_body[
                    :400
                ]
            stubs += 1
    assert [model_view(o)[1] for o in plain] == ["0", "3"]
    assert stubs == 2, "both large outputs should reach the model reduced"

    # every earlier request is a prefix of the next one (reduced once, on the wire)
    assert fake.reported[-1]["cached"] >= fake.reported[-2]["prompt"] - 16
    same = len(vanilla.reported)
    with_lm, without = cache_figures(fake.reported[:same]), cache_figures(vanilla.reported)
    print(
        f"\ncodex {codex.parent.parent.parent.name} {model} figures:",
        json.dumps({"with_lightmem2": with_lm, "without": without}),
    )
    assert with_lm["prompt_tokens"] < without["prompt_tokens"] and with_lm["K"] < without["K"]


# -- proxy death: `lightmem2 serve` killed by pid in the middle of a session -----------------------
AFTER = "seq -f 'row %g: served after the restart' 1 220"
PROMPTS = ("List the rows, restart, list again, then finish.", "Now list the rows again.")


def kill_policy(turns: list[list[str]]) -> Any:
    """Turn ``t`` (the one whose prompt came last) runs ``turns[t]`` with exec_command, then ends."""

    def answer(api: str, body: dict[str, Any]) -> Reply:
        if "exec_command" not in _tool_names(body):
            return Reply(text="ok")
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        turn, start = 0, 0
        for n, item in enumerate(items):
            if item.get("type") == "message" and item.get("role") == "user":
                for t, prompt in enumerate(PROMPTS):
                    if prompt in json.dumps(item):
                        turn, start = t, n
        done = sum(1 for i in items[start:] if i.get("type") == "function_call_output")
        if done < len(turns[turn]):
            return Reply(text="", tool_calls=[("exec_command", json.dumps({"cmd": turns[turn][done]}))])
        return Reply(text=f"Done {turn + 1}.")

    return answer


def _last_message(run: subprocess.CompletedProcess[str]) -> str | None:
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    texts = [
        e["item"].get("text")
        for e in events
        if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"
    ]
    return texts[-1] if texts else None


@pytest.mark.parametrize("what", ["child", "both"])
def test_codex_survives_the_proxy_killed_mid_session(
    codex: Path, what: str, tmp_path: Path, host_home: Path, isolated_home: Path
) -> None:
    """``child``: the proxy alone is killed (SIGKILL, by pid) by a command the model runs; Codex makes
    the turn's next call with no hook in between, so the supervisor must bring it back within Codex's
    retries. ``both``: the supervisor too, between two turns of one session (``codex exec``, then
    ``codex exec resume --last``); ``lightmem2 doctor`` then says ``[fail]`` naming codex, and the next
    turn's hooks bring it back. Every scripted call must reach the provider through a new proxy."""
    kill = ProxyKill(isolated_home)
    turns = [[BIG, kill.shell("child"), AFTER]] if what == "child" else [[BIG], [AFTER]]
    fake = ScriptedUpstream(kill_policy(turns), namespaced)
    work = tmp_path / "work"
    work.mkdir()
    port = free_port()
    cfg = serve_ctl.Config()
    cfg.server.port = port
    flags = ["--skip-git-repo-check", "--dangerously-bypass-hook-trust", "--json"]
    flags.append("--dangerously-bypass-approvals-and-sandbox")  # the kill signals the proxy, by pid
    with ServerThread(fake.app) as up:
        write_lightmem_config(isolated_home, port, up.url)
        _codex_home(host_home, 'model = "fake-model"\n')
        print(installer.run(uninstall=False, project=None))
        env = {**base_env(host_home, isolated_home), "OPENAI_API_KEY": "dummy"}
        env["PATH"] = f"{codex.parent}{os.pathsep}{env['PATH']}"  # doctor looks for `codex` on PATH
        try:
            runs = [run_bounded([str(codex), "exec", *flags, PROMPTS[0]], env, work, CODEX_TIMEOUT_S)]
            if what == "both":
                between = run_bounded(kill.command("both"), env, work, 120)
                assert between.stdout.strip() == KILLED.format(what="both", code=1), between.stderr
                cmd = [str(codex), "exec", "resume", "--last", *flags, PROMPTS[1]]
                runs.append(run_bounded(cmd, env, work, CODEX_TIMEOUT_S))
            killed, (supervisor, child), up_after, doctor_after = kill.observe(
                lambda: serve_ctl.is_running(cfg), env, work
            )
        finally:
            leaked = kill.stop_all(lambda: serve_ctl.is_running(cfg))
    for n, run in enumerate(runs):
        assert run.returncode == 0, f"codex turn {n + 1} failed ({run.returncode}):\n{run.stderr[-3000:]}"
        assert _last_message(run) == f"Done {n + 1}.", run.stdout[-2000:]

    # every scripted model call arrived, each one carrying every output before it
    bodies = [b for api, b in fake.model_bodies if api == "responses" and "exec_command" in _tool_names(b)]
    assert len(bodies) == 4, f"{len(bodies)} model calls reached the provider, 4 were scripted"
    seen = [o["output"] for o in _outputs(bodies[-1])]
    assert len(seen) == (3 if what == "child" else 2)
    counts = [len(_outputs(b)) for b in bodies]
    assert counts == ([0, 1, 2, 3] if what == "child" else [0, 1, 1, 2]), counts
    for body in bodies:
        assert [o["output"] for o in _outputs(body)] == seen[: len(_outputs(body))]

    # a new proxy served the calls after the kill; within a turn, the supervisor's own restart
    assert up_after and child is not None and child != killed["child"], "serve.child.pid is stale"
    if what == "child":
        assert supervisor == killed["supervisor"], "a second supervisor was started beside the first"
        _status, code, body = model_view(seen[1])
        assert code == "0" and body.rstrip("\n") == KILLED.format(what="child", code="-"), seen[1]

    # the large outputs, before and after the restart: stubbed, the keys recover them byte for byte
    check_env = base_env(host_home, isolated_home)
    for output, command in ((seen[0], BIG), (seen[-1], AFTER)):
        expected = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30).stdout
        _status, code, body = model_view(output)
        keys = STUB_KEY.findall(body)
        assert code == "0" and keys, f"not reduced: {str(output)[:300]!r}"
        assert_recovers(keys[0], expected, check_env)

    # doctor: [fail] naming Codex while the proxy was down, [pass] once it was back
    if what == "both":
        line = next((x for x in kill.doctor().splitlines() if x.startswith("[fail] server:")), None)
        assert line is not None and "codex is wired to it" in line, kill.doctor()
    assert re.search(r"^\[pass\] server: running at ", doctor_after, re.M), doctor_after
    assert not leaked, f"stopping serve.pid left these running (-1: the port): {leaked}"
