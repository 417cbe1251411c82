"""Shared pieces of the end-to-end tests on the real host CLIs (installed from npm, cached).

- :func:`npm_cli`: installs ``PACKAGE@VERSION`` once into
  ``${LIGHTMEM2_E2E_CACHE:-~/.cache/lightmem2-e2e}/<name>-<version>/`` (outside the repo) and returns
  its executable; skips the test only when npm or its registry cannot be reached.
- :class:`ScriptedUpstream`: the server tests' fake provider, answering by looking at the request
  (so the host's own extra calls cannot shift a queued script).
- :class:`BindingUpstream`: a fake Claude model that answers with signed thinking blocks and binds
  each to the prefix it was produced over, as preserved thinking does (DESIGN 6).
- :func:`write_lightmem_config`, :func:`stop_pid`, :func:`cache_figures`: the rest of the stack.

Every subprocess is time-bounded; servers listen on 127.0.0.1 and are stopped by PID.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from fake_upstream import FakeUpstream, strip_marks
from fake_wire import Reply

ROOT = Path(__file__).resolve().parents[2]
STUB_KEY = re.compile(r"\[lightmem2: [^\]\n]*?(?:archived as|lightmem2 recover) ([0-9a-f]{12,32})")
NPM_TIMEOUT_S = 600


def cache_root() -> Path:
    env = os.environ.get("LIGHTMEM2_E2E_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lightmem2-e2e"


def npm_cli(package: str, version: str, name: str, binary: str) -> Path:
    """The host CLI ``binary`` of ``package@version``, installed once into the shared cache."""
    target = cache_root() / f"{name}-{version}"
    exe = target / "node_modules" / ".bin" / binary
    if exe.exists():
        return exe
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed; the end-to-end tests install the host CLIs with npm")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if exe.exists():
            return exe
        try:
            probe = subprocess.run(
                [npm, "view", f"{package}@{version}", "version"],
                capture_output=True,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            pytest.skip("npm registry unreachable (npm view timed out after 120 s)")
        if probe.returncode != 0:
            pytest.skip(f"npm registry unreachable: {probe.stderr.strip()[-300:]}")
        staging = target.with_name(target.name + f".tmp-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        done = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(staging),
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                f"{package}@{version}",
            ],
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"npm install {package}@{version} failed:\n{done.stderr[-2000:]}"
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    assert exe.exists(), f"{package}@{version} has no {binary} in node_modules/.bin"
    return exe


Policy = Callable[[str, dict[str, Any]], Reply]


class ScriptedUpstream(FakeUpstream):
    """A fake provider whose reply is ``policy(api, body)`` for each model request.

    ``event_filter`` rewrites each streamed SSE event (e.g. to add fields the fake's wire lacks);
    ``counter`` counts tokens as the provider would (see ``wire_audit.o200k_counter``); ``ttl_s``
    expires its simulated cache after that many idle seconds (None: never).
    """

    def __init__(
        self,
        policy: Policy,
        event_filter: Callable[[bytes], bytes] | None = None,
        counter: Callable[[str], int] | None = None,
        ttl_s: float | None = None,
    ) -> None:
        super().__init__(counter, ttl_s)
        self.policy = policy
        self.event_filter = event_filter
        self.model_bodies: list[tuple[str, dict[str, Any]]] = []

    async def _pace(self, events: list[bytes], reply: Reply) -> Any:
        if self.event_filter is not None:
            events = [self.event_filter(ev) for ev in events]
        async for ev in super()._pace(events, reply):
            yield ev

    async def _read(self, request: Any) -> Any:
        body = await super()._read(request)
        path = request.url.path
        api = {"/v1/messages": "anthropic", "/v1/responses": "responses", "/v1/chat/completions": "chat"}.get(
            path
        )
        if api and isinstance(body, dict):
            self.model_bodies.append((api, body))
            self.script.appendleft(self.policy(api, body))
        return body


BOUND = "The block is bound to a different conversation"
"""What the API answers (400) to a thinking block sent back over a prefix other than its own."""


def _blocks(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def _prefix(body: dict[str, Any], message: int, block: int) -> str:
    """What a thinking block at ``messages[message].content[block]`` is checked against: system, tools
    and everything before it, canonical (cache marks aside, a string content as its text block)."""
    msgs = [{**m, "content": _blocks(m.get("content"))} for m in body.get("messages") or []]
    before = (
        [*msgs[:message], {**msgs[message], "content": msgs[message]["content"][:block]}]
        if block
        else msgs[:message]
    )
    return json.dumps(
        strip_marks(
            {"system": _blocks(body.get("system")), "tools": body.get("tools") or [], "messages": before}
        ),
        sort_keys=True,
        ensure_ascii=False,
    )


class BindingUpstream(FakeUpstream):
    """A fake Claude model with preserved thinking: each scripted :class:`Reply` with ``thinking`` is
    answered with a thinking block signed for the request it answers, and the fake remembers the prefix
    it was produced over (system, tools, every message of that request). A later request that sends
    the block back after any other prefix is answered 400 :data:`BOUND`, as the API does (DESIGN 6,
    "Preserved thinking"), unless it asks ``thinking.block_binding.prefix_mismatch_behavior:
    "drop_block"``: then the block is dropped (:attr:`dropped`) and the request answered.

    ``signed``: (request index, signature) of each block produced; ``checked``: per request, the
    signatures it sent back that passed; ``rejected``: (request index, message index) of each 400.
    """

    def __init__(self, counter: Callable[[str], int] | None = None, ttl_s: float | None = None) -> None:
        super().__init__(counter, ttl_s)
        self.bound: dict[str, str] = {}
        self.signed: list[tuple[int, str]] = []
        self.checked: dict[int, list[str]] = {}
        self.rejected: list[tuple[int, int]] = []
        self.dropped: list[tuple[int, int]] = []

    def stale(self, body: dict[str, Any]) -> tuple[list[str], list[int]]:
        """The signatures a request sends back over their own prefix, and the message indexes of the
        blocks sent over another (or of an unknown signature)."""
        ok: list[str] = []
        bad: list[int] = []
        for i, m in enumerate(body.get("messages") or []):
            if m.get("role") != "assistant":
                continue
            for j, b in enumerate(_blocks(m.get("content"))):
                if isinstance(b, dict) and b.get("type") == "thinking":
                    sig = str(b.get("signature") or "")
                    if self.bound.get(sig) == _prefix(body, i, j):
                        ok.append(sig)
                    else:
                        bad.append(i)
        return ok, bad

    async def _read(self, request: Any) -> Any:
        body = await super()._read(request)
        if request.url.path != "/v1/messages" or not isinstance(body, dict):
            return body
        n = len(self.received) - 1
        ok, bad = self.stale(body)
        self.checked[n] = ok
        if bad:
            control = ((body.get("thinking") or {}).get("block_binding") or {}).get(
                "prefix_mismatch_behavior"
            )
            if control != "drop_block":
                self.rejected.append((n, bad[0]))
                message = f"messages.{bad[0]}.content.0: {BOUND}"
                error = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
                self.script.appendleft(Reply(status=400, error=error))
                return body
            self.dropped.extend((n, i) for i in bad)
        if self.script and self.script[0].thinking:
            whole = _prefix(body, len(body.get("messages") or []), 0)
            sig = f"sig{n}" + hashlib.sha256(whole.encode()).hexdigest()[:24]
            self.bound[sig] = whole
            self.signed.append((n, sig))
            self.script[0] = dataclasses.replace(self.script[0], signature=sig)
        return body


def write_lightmem_config(home: Path, port: int, upstream: str, **extra: Any) -> None:
    """lightmem2's config for a test: the proxy on ``port``, both upstreams at the fake provider;
    ``extra`` adds top-level keys (``mode="aggressive"``, ``eviction={...}``)."""
    home.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "server": {"port": port, "upstreams": {"anthropic": upstream, "openai": upstream + "/v1"}},
        **extra,
    }
    (home / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")


def stop_pid(pid_path: Path) -> None:
    """Stop the process whose pid a hook wrote (TERM, then KILL after 10 s)."""
    try:
        pid = int(pid_path.read_text().strip())
    except (OSError, ValueError):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)


def cache_figures(reported: list[dict[str, int]]) -> dict[str, float]:
    """Totals over the provider's per-call usage: prompt, cached, written tokens, hit rate and K."""
    prompt = sum(r["prompt"] for r in reported)
    cached = sum(r["cached"] for r in reported)
    written = sum(r["written"] for r in reported)
    miss = prompt - cached
    return {
        "calls": len(reported),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "hit_rate": round(cached / prompt, 4) if prompt else 0.0,
        "K": round(0.1 * cached + miss, 1),
        "K_with_writes": round(0.1 * cached + (miss - written) + 1.25 * written, 1),
    }


def run_bounded(
    cmd: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``cmd`` with stdin from /dev/null, output captured, stopped after ``timeout`` seconds
    (``TimeoutExpired``). It runs in a process group of its own, killed whole on the timeout: an npm
    entry point is only a node wrapper, and the host binary under it (with its MCP servers) outlived a
    kill of the wrapper alone (seen with a hung ``codex exec``)."""
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, out, err) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def log_tail(path: Path, chars: int = 1500) -> str:
    """The end of a log file (``serve.log``, ``hooks.log``) for a failure message; "(none)" without it."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-chars:]
    except OSError:
        return "(none)"


def base_env(home: Path, lightmem_home: Path) -> dict[str, str]:
    """An isolated environment: its own HOME and LIGHTMEM2_HOME, no proxies, the host PATH (and
    PYTHONPATH, so hooks and the proxy run the lightmem2 under test, e.g. a worktree's)."""
    keep = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update({"HOME": str(home), "LIGHTMEM2_HOME": str(lightmem_home), "NO_COLOR": "1"})
    return env


def assert_recovers(key: str, expected: str, env: dict[str, str]) -> None:
    """``key`` recovers ``expected`` through the Python API and through ``lightmem2 recover``.

    A host may strip the final newline before the hook sees the output, so both forms are accepted.
    """
    from lightmem_plugin.pipeline import LightMem

    assert LightMem().registry.recover(key) in (expected, expected.rstrip("\n"))
    done = subprocess.run(
        [sys.executable, "-m", "lightmem_plugin.cli", "recover", key],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip("\n") == expected.rstrip("\n")


# -- proxy death: `lightmem2 serve` killed by pid mid-session --------------------------------------
KILLED = "lightmem2 serve killed ({what}); doctor exit {code}"
_KILL_SCRIPT = """\
import json, os, signal, subprocess, sys, time

what, home = sys.argv[1], sys.argv[2]
os.environ["LIGHTMEM2_HOME"] = home  # a host may hand its tools a filtered environment
from lightmem_plugin.config import load_config
from lightmem_plugin.hosts.shared import serve_ctl

supervisor = int(serve_ctl.pid_file().read_text())
child = int(serve_ctl.child_pid_file().read_text())
with open(os.path.join(home, "..", "killed.json"), "w") as out:
    json.dump({"supervisor": supervisor, "child": child}, out)
config = load_config()
if what == "child":  # the supervisor restarts only a proxy that has served a while
    time.sleep(serve_ctl.SERVED_AT_LEAST_S + 0.5)
else:
    os.kill(supervisor, signal.SIGKILL)
os.kill(child, signal.SIGKILL)
deadline = time.monotonic() + 10
while serve_ctl.is_running(config, timeout=0.2) and time.monotonic() < deadline:
    time.sleep(0.01)
code = "-"
if what == "both":  # nothing brings it back before the next hook: doctor sees the proxy down
    done = subprocess.run([sys.executable, "-m", "lightmem_plugin.cli", "doctor"], capture_output=True,
                          text=True, timeout=90, stdin=subprocess.DEVNULL)
    with open(os.path.join(home, "..", "doctor.txt"), "w") as out:
        out.write(done.stdout + done.stderr)
    code = done.returncode
print(f"lightmem2 serve killed ({what}); doctor exit {code}")  # KILLED
"""


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, killed and not yet reaped, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _children(pids: set[int]) -> set[int]:
    """The processes whose parent is one of ``pids`` (a supervisor's proxy)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[-1].split()[1]) in pids:
                found.add(int(stat.parent.name))
    return found


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


class ProxyKill:
    """Kills the hook-started ``lightmem2 serve`` by pid (SIGKILL): ``child``, the proxy alone (its
    supervisor restarts it once it has served ``SERVED_AT_LEAST_S``), or ``both``, supervisor and proxy
    (then ``lightmem2 doctor`` runs while nothing listens; :meth:`doctor` is its output). A host runs
    :meth:`shell` as a tool call, or a test runs :meth:`command` itself; the command prints
    ``KILLED``. :meth:`stop_all` stops ``serve.pid`` and returns what that left running (reaped)."""

    def __init__(self, lightmem_home: Path) -> None:
        self.home = lightmem_home
        self.script = lightmem_home.parent / "kill_proxy.py"
        self.script.write_text(_KILL_SCRIPT, encoding="utf-8")
        self.pids: set[int] = set()

    def command(self, what: str) -> list[str]:
        return [sys.executable, str(self.script), what, str(self.home)]

    def shell(self, what: str) -> str:
        return " ".join(shlex.quote(a) for a in self.command(what))

    def killed(self) -> dict[str, int]:
        """The supervisor and proxy pids the kill found."""
        found: dict[str, int] = json.loads((self.home.parent / "killed.json").read_text())
        self.pids.update(found.values())
        return found

    def doctor(self) -> str:
        return (self.home.parent / "doctor.txt").read_text()

    def running(self) -> tuple[int | None, int | None]:
        """(serve.pid, serve.child.pid) now."""
        pids = read_pid(self.home / "serve.pid"), read_pid(self.home / "serve.child.pid")
        self.pids.update(p for p in pids if p)
        return pids

    def observe(
        self, is_up: Callable[[], bool], env: dict[str, str], cwd: Path
    ) -> tuple[dict[str, int], tuple[int | None, int | None], bool, str]:
        """After the session: the pids the kill found, (serve.pid, serve.child.pid) now, whether the
        proxy answers, and what ``lightmem2 doctor`` says."""
        killed, pids, up = self.killed(), self.running(), is_up()
        doctor = run_bounded([sys.executable, "-m", "lightmem_plugin.cli", "doctor"], env, cwd, 90)
        return killed, pids, up, doctor.stdout

    def stop_all(self, is_up: Callable[[], bool]) -> list[int]:
        """Stop ``serve.pid``; the pids seen (and their children) still running after it, and whether
        the port still answers, are reported, then TERMed and KILLed."""
        self.running()
        stop_pid(self.home / "serve.pid")
        deadline = time.monotonic() + 10
        while is_up() and time.monotonic() < deadline:
            time.sleep(0.1)
        leaked = sorted(p for p in self.pids | _children(self.pids) if _alive(p))
        port_up = is_up()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in leaked:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + 5
            while any(_alive(p) for p in leaked) and time.monotonic() < deadline:
                time.sleep(0.1)
        return leaked + ([-1] if port_up else [])


def lightmem2_cli(env: dict[str, str], cwd: Path, *args: str, timeout: float = 90) -> str:
    """``lightmem2 ARGS`` with the test's data dir (``env``); its stdout (it must succeed)."""
    done = run_bounded([sys.executable, "-m", "lightmem_plugin.cli", *args], env, cwd, timeout)
    assert done.returncode == 0, f"lightmem2 {' '.join(args)} failed: {done.stderr}"
    return done.stdout
