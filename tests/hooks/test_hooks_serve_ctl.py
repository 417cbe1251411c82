"""SessionStart's proxy check: a running proxy is left alone, a missing one is started detached once."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from lightmem_plugin.config import Config
from lightmem_plugin.hosts.shared import serve_ctl


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(port: int) -> Config:
    cfg = Config()
    cfg.server.port = port
    return cfg


class _Health(BaseHTTPRequestHandler):
    body = b'{"status": "ok"}'

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def healthy() -> Iterator[int]:
    server = HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _stop(pid_file: Path) -> None:
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("host", "url"),
    [("127.0.0.1", "http://127.0.0.1:9"), ("0.0.0.0", "http://127.0.0.1:9"), ("::1", "http://[::1]:9")],
)
def test_base_url(host: str, url: str) -> None:
    cfg = _config(9)
    cfg.server.host = host
    assert serve_ctl.base_url(cfg) == url


def test_nothing_listening_is_not_running() -> None:
    assert serve_ctl.is_running(_config(_free_port())) is False


def test_a_running_proxy_is_left_alone(healthy: int, isolated_home: Path) -> None:
    assert serve_ctl.ensure_running(_config(healthy)) == "running"
    assert not serve_ctl.pid_file().exists()


def test_something_else_on_the_port_is_not_our_proxy(monkeypatch: pytest.MonkeyPatch, healthy: int) -> None:
    monkeypatch.setattr(_Health, "body", b"<html>other</html>")
    assert serve_ctl.is_running(_config(healthy)) is False


def test_a_missing_proxy_is_started_once_and_detached(isolated_home: Path) -> None:
    port = _free_port()
    (isolated_home / "config.json").write_text(json.dumps({"server": {"port": port}}))
    cfg = _config(port)
    try:
        assert serve_ctl.ensure_running(cfg, wait_s=20) == "started"
        pid = int(serve_ctl.pid_file().read_text())
        assert os.getsid(pid) == pid  # its own session: the host's hook pipes are not held
        assert serve_ctl.is_running(cfg)
        assert serve_ctl.ensure_running(cfg) == "running"
        assert int(serve_ctl.pid_file().read_text()) == pid  # no duplicate
    finally:
        _stop(serve_ctl.pid_file())
    assert not serve_ctl.is_running(cfg)


def test_a_proxy_that_cannot_start_fails_fast(isolated_home: Path) -> None:
    with socket.socket() as taken:  # the port is busy with something that is not lightmem2
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        (isolated_home / "config.json").write_text(json.dumps({"server": {"port": port}}))
        start = time.monotonic()
        assert serve_ctl.ensure_running(_config(port), wait_s=20) == "failed"
        assert time.monotonic() - start < 15
    assert "cannot listen on 127.0.0.1" in (isolated_home / "serve.log").read_text()


def test_a_proxy_that_died_is_back_before_the_next_model_call(isolated_home: Path) -> None:
    """Killed mid-session (SIGKILL, by pid): the next PostToolUse and UserPromptSubmit hooks start it
    again, so the host's next request finds it; a home whose proxy no hook started is left alone."""
    from lightmem_plugin.hosts.claude_code import hooks as claude_code
    from lightmem_plugin.hosts.codex import hooks as codex

    assert claude_code.revive_proxy() == "not managed"
    port = _free_port()
    (isolated_home / "config.json").write_text(json.dumps({"server": {"port": port}}))
    cfg = _config(port)
    try:
        assert serve_ctl.ensure_running(cfg, wait_s=20) == "started"
        for event, handle in (("PostToolUse", claude_code.handle), ("UserPromptSubmit", codex.handle)):
            pid = int(serve_ctl.pid_file().read_text())
            os.kill(pid, signal.SIGKILL)  # the supervisor and the proxy both gone (the OOM killer, a user)
            os.kill(int(serve_ctl.child_pid_file().read_text()), signal.SIGKILL)
            deadline = time.monotonic() + 10
            while serve_ctl.is_running(cfg) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not serve_ctl.is_running(cfg)
            handle(event, {"tool_name": "Bash", "tool_response": {"stdout": "ok"}, "prompt": "hi"})
            deadline = time.monotonic() + 20  # the hook waits 3 s; a cold start may take longer
            while not serve_ctl.is_running(cfg) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert serve_ctl.is_running(cfg), f"{event} did not bring the proxy back"
            assert int(serve_ctl.pid_file().read_text()) != pid
    finally:
        _stop(serve_ctl.pid_file())


def test_the_supervisor_restarts_a_proxy_killed_mid_turn(isolated_home: Path) -> None:
    """No hook runs between Codex's model calls in a turn: the supervisor brings the proxy back."""
    port = _free_port()
    (isolated_home / "config.json").write_text(json.dumps({"server": {"port": port}}))
    cfg = _config(port)
    try:
        assert serve_ctl.ensure_running(cfg, wait_s=20) == "started"
        time.sleep(serve_ctl.SERVED_AT_LEAST_S)  # it has served: a death now is restarted
        child = int(serve_ctl.child_pid_file().read_text())
        os.kill(child, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            now = serve_ctl.child_pid_file().read_text() if serve_ctl.child_pid_file().exists() else ""
            if now.strip() and int(now) != child and serve_ctl.is_running(cfg):
                break
            time.sleep(0.1)
        assert serve_ctl.is_running(cfg) and int(serve_ctl.child_pid_file().read_text()) != child
    finally:
        _stop(serve_ctl.pid_file())
    deadline = time.monotonic() + 10
    while serve_ctl.is_running(cfg) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not serve_ctl.is_running(cfg)  # stopping the supervisor stops the proxy


def test_a_hook_waits_for_the_supervisor_restarting_the_proxy(isolated_home: Path) -> None:
    """The proxy killed during a tool call, its supervisor alive: the PostToolUse hook that runs next
    finds the port down while the supervisor starts the proxy again. It must wait for that restart,
    not start a second supervisor: the two proxies raced for the port (seen on Claude Code 2.1.332),
    the loser's supervisor exited and deleted the winner's serve.child.pid, and serve.pid could name
    a dead supervisor while the live one ran on, out of reach of `stop serve.pid`."""
    from lightmem_plugin.hosts.claude_code import hooks as claude_code

    port = _free_port()
    (isolated_home / "config.json").write_text(json.dumps({"server": {"port": port}}))
    cfg = _config(port)
    try:
        assert serve_ctl.ensure_running(cfg, wait_s=20) == "started"
        supervisor = int(serve_ctl.pid_file().read_text())
        time.sleep(serve_ctl.SERVED_AT_LEAST_S)  # it has served: the supervisor restarts it
        child = int(serve_ctl.child_pid_file().read_text())
        os.kill(child, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while serve_ctl.is_running(cfg, timeout=0.2) and time.monotonic() < deadline:
            time.sleep(0.01)
        claude_code.handle("PostToolUse", {"tool_name": "Bash", "tool_response": {"stdout": "ok"}})
        deadline = time.monotonic() + 20
        while not serve_ctl.is_running(cfg) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert serve_ctl.is_running(cfg)
        time.sleep(1.0)  # a second supervisor's proxy would have lost the port and exited by now
        assert int(serve_ctl.pid_file().read_text()) == supervisor, "a second supervisor was started"
        now = int(serve_ctl.child_pid_file().read_text())
        assert now != child
        os.kill(now, 0)  # serve.child.pid names the proxy that runs
    finally:
        _stop(serve_ctl.pid_file())
    deadline = time.monotonic() + 10
    while serve_ctl.is_running(cfg) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not serve_ctl.is_running(cfg), "stopping serve.pid left a proxy running"


def test_supervisor_alive_is_false_for_a_dead_or_foreign_pid(isolated_home: Path) -> None:
    serve_ctl.pid_file().write_text(f"{os.getpid()}\n")  # alive, but this test process is no supervisor
    assert serve_ctl.supervisor_alive() is False
    serve_ctl.pid_file().write_text("999999999\n")
    assert serve_ctl.supervisor_alive() is False
    serve_ctl.pid_file().unlink()
    assert serve_ctl.supervisor_alive() is False


def _hook(host: str, event: str, payload: dict[str, object]) -> dict[str, object] | None:
    """One hook call as the host makes it: its own process, the command table wired in."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "lightmem_plugin.cli", "hook", host, event],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


@pytest.mark.parametrize("host", ["claude-code", "codex"])
def test_a_typo_in_the_config_neither_stops_the_proxy_nor_sends_the_command_to_the_model(
    isolated_home: Path, host: str
) -> None:
    """Measured before, with ``"mode": "turbo"``: while the hooks managed a proxy, every event raised on
    the config before it answered (``/lightmem2 status`` went to the model), and the proxy they restart
    refused to start (exit 2), so the host's next request found nobody on the port."""
    port = _free_port()
    path = isolated_home / "config.json"
    path.write_text(json.dumps({"mode": "aggressive", "server": {"port": port}}))
    cfg = _config(port)
    try:
        assert _hook(host, "SessionStart", {"session_id": "s", "source": "startup"}) is None
        assert serve_ctl.is_running(cfg), "SessionStart started the proxy on the configured port"
        path.write_text(json.dumps({"mode": "turbo", "server": {"port": port}}))  # the typo
        for running in (True, False):
            if not running:  # the proxy died (killed, out of memory): the next event brings it back
                _stop(serve_ctl.pid_file())
                deadline = time.monotonic() + 20
                while serve_ctl.is_running(cfg):
                    assert time.monotonic() < deadline, "the proxy did not stop"
                    time.sleep(0.1)
                serve_ctl.pid_file().write_text("999999\n")  # still managed (a hook started it), now dead
            answer = _hook(host, "UserPromptSubmit", {"session_id": "s", "prompt": "/lightmem2 status"})
            assert answer is not None and answer["decision"] == "block", "answered by the hook, not the model"
            reason = str(answer["reason"])
            assert 'mode = "turbo" is invalid' in reason and "last good (mode aggressive" in reason
            assert serve_ctl.is_running(cfg), f"the proxy answers on port {port} (running={running})"
    finally:
        if serve_ctl.pid_file().exists():
            _stop(serve_ctl.pid_file())
