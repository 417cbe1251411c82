"""Make sure ``lightmem2 serve`` is running: probe ``/healthz``, start it detached when it is not.

Why a lock and a pid file: two host sessions starting at once must not start two proxies (the second
would fail to bind anyway, but it would race the first one's start). The check-and-start runs under
an exclusive ``flock`` on ``serve.lock`` in the data dir. The proxy runs under a small supervisor
(:func:`supervise`) that starts it again when it dies; the supervisor's pid goes to ``serve.pid``
(stop it to stop both), the proxy's own to ``serve.child.pid``. While that supervisor lives, a hook
that finds the port down waits for its restart instead of starting a second one. The child gets its
own session, its stdin from /dev/null and its output in ``serve.log``: it must never hold the host's
hook pipes open, or the host would wait for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from ...config import Config
from ...store.home import Home

PROBE_TIMEOUT_S = 0.5
START_WAIT_S = 6.0
# the CLI's serve, not server.serve(): it wires the command table into the sidecar's chat commands
SERVE_CODE = "from lightmem_plugin.cli import main; raise SystemExit(main(['serve']))"
SUPERVISE_CODE = "from lightmem_plugin.hosts.shared.serve_ctl import supervise; supervise()"
SERVED_AT_LEAST_S = 5.0  # a proxy that ran this long and died is restarted; one that never got up is not


def base_url(config: Config) -> str:
    """``http://HOST:PORT`` of the configured proxy (a wildcard bind is reached on loopback)."""
    from ...server import url_host  # lazy: hooks that never reach the proxy skip the import

    return f"http://{url_host(config.server.host)}:{config.server.port}"


def is_running(config: Config, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True when ``GET /healthz`` answers ``{"status": "ok"}`` or ``"degraded"`` (serving, its shared
    database down: calls pass through; starting a second one would only fight it for the port)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(base_url(config) + "/healthz", timeout=timeout) as resp:
            body = json.loads(resp.read(4096) or b"{}")
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return isinstance(body, dict) and body.get("status") in ("ok", "degraded")


def pid_file() -> Path:
    """Where the pid of a proxy started by a hook is written."""
    return Home.default().serve_pid


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def child_pid_file() -> Path:
    """Where the supervisor writes the pid of the proxy it runs now."""
    return Home.default().serve_child_pid


def supervise() -> None:
    """Run the proxy and start it again whenever it dies after having served (killed, out of memory).

    Why a supervisor: a host is wired to the proxy for every model call, and Codex makes its calls
    within a turn with no hook in between, so only a process that watches the proxy can bring it back
    before the host's retries run out (measured before: Codex looped "Reconnecting..." until killed).
    A proxy that exits at start (a port clash, a broken install) is not retried: that is an error to
    show, not to loop on. SIGTERM or SIGINT to the supervisor stops the proxy and the supervisor.
    """
    import signal

    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not stopping:
        started = time.monotonic()
        child = subprocess.Popen([sys.executable, "-c", SERVE_CODE], stdin=subprocess.DEVNULL)
        with contextlib.suppress(OSError):
            child_pid_file().write_text(f"{child.pid}\n", encoding="utf-8")
        code = child.wait()
        if stopping or code == 0 or time.monotonic() - started < SERVED_AT_LEAST_S:
            break
        print(
            f"lightmem2 serve exited ({code}) after serving; starting it again", file=sys.stderr, flush=True
        )
    with contextlib.suppress(OSError, ValueError):
        if child is not None and int(child_pid_file().read_text()) == child.pid:  # not another's
            child_pid_file().unlink()


def supervisor_alive() -> bool:
    """True while the supervisor named in ``serve.pid`` runs: not when it is gone, killed and not yet
    reaped (a zombie), or its pid now belongs to another program (Linux ``/proc`` tells)."""
    try:
        pid = int(pid_file().read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    proc = Path(f"/proc/{pid}")
    if not proc.is_dir():  # no procfs (macOS): the signal probe is all there is
        return True
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        cmdline = (proc / "cmdline").read_bytes()
    except (OSError, IndexError):
        return False
    return state != "Z" and SUPERVISE_CODE.encode() in cmdline


def spawn(log: Path) -> subprocess.Popen[bytes]:
    """Start the proxy, under its supervisor, detached from the caller (own session, no inherited
    pipes)."""
    log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", SUPERVISE_CODE],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)
    return proc


def ensure_running(config: Config, wait_s: float = START_WAIT_S) -> str:
    """``"running"`` (already up, or back up through its supervisor), ``"started"`` (we started it and
    it answers) or ``"failed"``. A supervisor that is alive is restarting its proxy: it is waited for,
    never doubled."""
    if is_running(config):
        return "running"
    home = Home.default()
    with _locked(home.serve_lock):
        if is_running(config):
            return "running"
        if supervisor_alive():
            # its proxy died after serving and it is starting it again: a second supervisor would
            # race it for the port, and the loser's exit would take the pid files with it
            deadline = time.monotonic() + wait_s
            while supervisor_alive():
                if is_running(config, timeout=0.25):
                    return "running"
                if time.monotonic() >= deadline:
                    return "failed"
                time.sleep(0.05)
        proc = spawn(home.serve_log)
        pid_file().write_text(f"{proc.pid}\n", encoding="utf-8")
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if is_running(config, timeout=0.25):
                return "started"
            if proc.poll() is not None:
                return "failed"
            time.sleep(0.05)
    return "failed"
