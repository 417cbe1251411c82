"""Codex CLI from npm (the versions of test_e2e_codex.py), end to end: a typo in lightmem2's
config.json stops neither Codex nor lightmem2 (fixed in 3dd190a; measured before it, on 8942deb).

The typo, ``"mode": "turbo"``, is written into ``$LIGHTMEM2_HOME/config.json`` after a first
``codex exec`` ran on the valid file (its SessionStart hook started ``lightmem2 serve``, which read the
file, so ``config.last-good.json`` lies beside it). Then, with ``serve`` still running or stopped by
pid before Codex runs again (the hooks must bring it back):

1. ``codex exec "/lightmem2 status"`` ends in the UserPromptSubmit hook ("hook: UserPromptSubmit
   Blocked") with no request at the fake provider. ``codex exec`` shows no hook's answer text (not on
   stdout or stderr, not in ``--json`` events nor the rollout file; checked on 0.169.0 and 0.171.0), so
   the test reads what the hook printed to Codex through a ``tee`` appended to the installed hook
   command: it names the bad key (``mode = "turbo"``) and says the last good config is in force.
   Before the fix the hooks raised on the config, so the command went to the model (to the proxy while
   it ran; while it was stopped, to a dead port: ``codex exec`` looped "Reconnecting...").
2. The next ordinary prompt is answered, within a bounded time, by a request that reached the fake
   provider through the proxy (the proxy's ledger holds one row per request the provider got, all in
   mode ``normal``, the last good config's).
3. ``lightmem2 doctor`` checks the server at the port in force (the test's own, not 8787) and finds it
   running; its config check fails naming the key and the last good config.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from config_typo import (
    BAD_KEY,
    DEFAULT_PORT,
    IN_FORCE,
    PROMPT,
    REPLY,
    ledger_rows,
    lightmem2_on_path,
    wait_until,
    write_typo,
)
from e2e_support import (
    ProxyKill,
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
from test_e2e_codex import PACKAGE, VERSIONS, _last_message

from lightmem_plugin.config import Config
from lightmem_plugin.hosts.codex import install as installer
from lightmem_plugin.hosts.shared import serve_ctl

HOST_TIMEOUT_S = 120  # a hook-answered command takes seconds; a looping `codex exec` is stopped here
BLOCKED = "hook: UserPromptSubmit Blocked"


@pytest.fixture(scope="module", params=VERSIONS)
def codex(request: pytest.FixtureRequest) -> Path:
    return npm_cli(PACKAGE, str(request.param), "codex", "codex")


def _exec(
    exe: Path, prompt: str, env: dict[str, str], cwd: Path, fake: ScriptedUpstream, as_json: bool = True
) -> tuple[subprocess.CompletedProcess[str], float]:
    """``codex exec PROMPT`` and the seconds it took; a hang fails the test with what the fake provider
    received and lightmem2's logs."""
    lm_home = Path(env["LIGHTMEM2_HOME"])
    cmd = [str(exe), "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust"]
    cmd += ["--json", prompt] if as_json else [prompt]
    start, before = time.monotonic(), len(fake.received)
    try:
        done = run_bounded(cmd, env, cwd, HOST_TIMEOUT_S)
    except subprocess.TimeoutExpired as err:
        stderr = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else str(err.stderr)
        pytest.fail(
            f"codex exec {prompt!r} did not end within {HOST_TIMEOUT_S} s; meanwhile the fake provider "
            f"received {len(fake.received) - before} requests\nstderr: {stderr[-1500:]}\n"
            f"serve.log: {log_tail(lm_home / 'serve.log')}\nhooks.log: {log_tail(lm_home / 'hooks.log')}"
        )
    took = time.monotonic() - start
    assert done.returncode == 0, f"codex exec {prompt!r} failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return done, took


def _tap_prompt_hook(hooks_json: Path, tap: Path) -> None:
    """Append ``| tee -a TAP`` to the installed UserPromptSubmit hook command: Codex still reads the
    hook's answer on its stdout, and the test reads it in TAP (``codex exec`` never shows it)."""
    data = json.loads(hooks_json.read_text(encoding="utf-8"))
    (group,) = data["hooks"]["UserPromptSubmit"]
    (hook,) = group["hooks"]
    assert hook["command"].endswith(" hook codex UserPromptSubmit"), hook
    hook["command"] += f" | tee -a {shlex.quote(str(tap))}"
    hooks_json.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


@pytest.mark.parametrize("serve", ["running", "stopped"])
def test_codex_runs_on_the_last_good_config_after_a_typo(
    codex: Path, serve: str, tmp_path: Path, host_home: Path, isolated_home: Path
) -> None:
    """``running``: ``serve`` keeps running from the first ``codex exec`` while the typo is written.
    ``stopped``: it is stopped by pid after the typo, so the hooks of the next ``codex exec`` must
    start it again on the last good config."""
    fake = ScriptedUpstream(lambda api, body: Reply(text=REPLY))
    work = tmp_path / "work"
    work.mkdir()
    port = free_port()
    assert port != DEFAULT_PORT
    cfg = Config()
    cfg.server.port = port
    tap = tmp_path / "prompt-hook.out"
    env = {**base_env(host_home, isolated_home), "OPENAI_API_KEY": "dummy"}
    lightmem2 = lightmem2_on_path(tmp_path / "bin")
    # doctor looks for `codex` on PATH
    env["PATH"] = os.pathsep.join([str(lightmem2.parent), str(codex.parent), env["PATH"]])
    pids = ProxyKill(isolated_home)  # only its pid bookkeeping and stop_all (nothing is killed here)
    timings: dict[str, float] = {}
    with ServerThread(fake.app) as up:
        write_lightmem_config(isolated_home, port, up.url)
        folder = host_home / ".codex"
        folder.mkdir()
        (folder / "config.toml").write_text('model = "fake-model"\n', encoding="utf-8")
        print(installer.run(uninstall=False, project=None))
        _tap_prompt_hook(folder / "hooks.json", tap)
        try:
            # a first run on the valid config: SessionStart starts serve, which reads the file
            first, timings["first run"] = _exec(codex, "Hello.", env, work, fake)
            assert _last_message(first) == REPLY, first.stdout[-2000:]
            assert serve_ctl.is_running(cfg), "SessionStart did not start serve on the valid config"
            supervisor, _child = pids.running()
            last_good = isolated_home / "config.last-good.json"
            assert last_good.exists(), "the valid config was read, yet no config.last-good.json beside it"
            valid = json.loads(last_good.read_text(encoding="utf-8"))
            assert valid["server"]["port"] == port and "mode" not in valid
            tap.unlink(missing_ok=True)  # the first prompt's hook printed nothing, but start clean

            write_typo(isolated_home)
            if serve == "stopped":
                stop_pid(serve_ctl.pid_file())
                assert not wait_until(lambda: serve_ctl.is_running(cfg), False), "serve did not stop"

            # 1. /lightmem2 status: the hook answers, naming the bad key and the config in force
            before = len(fake.received)
            status, timings["/lightmem2 status"] = _exec(
                codex, "/lightmem2 status", env, work, fake, as_json=False
            )
            status_requests = fake.received[before:]
            answered = tap.read_text(encoding="utf-8") if tap.exists() else ""
            up_after_status = serve_ctl.is_running(cfg)
            supervisor_after, _child = pids.running()

            # 2. an ordinary prompt: answered through the proxy
            rows_before = ledger_rows()
            before = len(fake.model_bodies)
            answer, timings["next prompt"] = _exec(codex, PROMPT, env, work, fake)
            bodies = [b for _api, b in fake.model_bodies[before:]]
            wait_until(lambda: len(ledger_rows()) >= len(rows_before) + len(bodies), True, 5.0)
            rows = ledger_rows()[len(rows_before) :]

            # 3. doctor, as the user runs it
            doctor = run_bounded([str(lightmem2), "doctor"], env, work, 90)
        finally:
            leaked = pids.stop_all(lambda: serve_ctl.is_running(cfg))
    print(f"\ncodex {codex.parents[2].name} ({serve}) timings:", json.dumps(timings))
    print(f"/lightmem2 status, the hook's answer:\n{answered}\nlightmem2 doctor:\n{doctor.stdout}")

    # 1. answered in the hook: nothing reached the provider, and the answer names the key and the
    # config in force
    assert not status_requests, f"/lightmem2 status went to the provider: {[r.path for r in status_requests]}"
    assert BLOCKED in status.stderr, status.stderr[-2000:]
    reply = json.loads(answered)  # one answer, the hook JSON Codex read
    assert reply["decision"] == "block", reply
    text = str(reply["reason"])
    assert BAD_KEY in text, text
    assert IN_FORCE in text, text
    assert text.startswith("lightmem2 mode: normal"), text
    # the hooks kept serve up (running) or brought it back (stopped), on the configured port
    assert up_after_status, (
        f"serve is not running after the status command\n{log_tail(isolated_home / 'serve.log')}"
    )
    if serve == "stopped":
        assert supervisor_after is not None and supervisor_after != supervisor, "serve was not started again"
    else:
        assert supervisor_after == supervisor, "serve was restarted although it was running"

    # 2. the ordinary prompt was answered by the provider, through the proxy: one ledger row per
    # request the provider received, in the last good config's mode
    assert _last_message(answer) == REPLY, answer.stdout[-2000:]
    assert any(PROMPT in json.dumps(b.get("input")) for b in bodies), "the prompt never reached the provider"
    assert len(rows) == len(bodies), (
        f"{len(bodies)} requests at the provider, {len(rows)} recorded by the proxy"
    )
    assert {mode for _sid, mode in rows} == {"normal"}, rows
    assert timings["next prompt"] < HOST_TIMEOUT_S

    # 3. doctor probes the port in force, finds serve there, and says the config is to fix
    report = doctor.stdout
    assert f"[pass] server: running at http://127.0.0.1:{port}/healthz" in report.splitlines(), report
    assert f":{DEFAULT_PORT}" not in report, report
    config_line = next((x for x in report.splitlines() if x.startswith("[fail] config:")), "")
    assert BAD_KEY in config_line and "last good (mode normal" in config_line, report
    assert doctor.returncode == 1, report  # the config check fails: the user has a typo to fix

    assert not leaked, f"stopping serve.pid left these running (-1: the port): {leaked}"
