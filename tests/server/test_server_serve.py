"""``serve``: loopback-only binding, a clear error for a busy port, and a real start/stop."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from server_harness import ServeProcess, ServerThread, free_port

from lightmem_plugin.config import Config
from lightmem_plugin.errors import UsageError
from lightmem_plugin.server import KEEP_ALIVE_S, bind_socket, check_bind, serve, server_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_hosts_are_allowed(host: str) -> None:
    check_bind(host, allow_remote=False)


@pytest.mark.parametrize(
    ("host", "needle"),
    [
        ("0.0.0.0", "--allow-remote"),
        ("192.168.1.5", "not a loopback"),
        ("::", "not a loopback"),
        ("example.com", "not an IP address"),
    ],
)
def test_other_hosts_need_allow_remote(host: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        check_bind(host, allow_remote=False)
    check_bind(host, allow_remote=True)


def test_serve_refuses_before_binding() -> None:
    with pytest.raises(UsageError, match="loopback"):
        serve(Config(), host="0.0.0.0", port=free_port())


def test_busy_port_is_a_usage_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(UsageError, match=f"cannot listen on 127.0.0.1:{port}"):
            bind_socket("127.0.0.1", port)


def test_bound_socket_is_tcp_so_nodelay_applies() -> None:
    sock = bind_socket("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


def test_serve_runs_and_stops(tmp_path: Path) -> None:
    """``--port 0``: serve binds a port the OS picks and names it as its first stderr line."""
    serve = ServeProcess(tmp_path).wait_ready()
    try:
        r = httpx.get(serve.url + "/healthz", timeout=5)
        assert r.json()["status"] == "ok"
        assert "server" not in r.headers  # uvicorn's own server header is off; providers' are relayed
        assert serve.stderr.splitlines()[0] == f"lightmem2 serve: listening on http://127.0.0.1:{serve.port}"
    finally:
        serve.stop()
    assert serve.proc.returncode is not None


def test_a_given_port_is_used_and_not_announced(tmp_path: Path) -> None:
    """A port the caller chose is the caller's to know: serve says nothing on stderr about it."""
    port = free_port()
    code = "import sys\nfrom lightmem_plugin.server import serve\nserve(port=int(sys.argv[1]))\n"
    env = {**os.environ, "LIGHTMEM2_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", code, str(port)], env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "serve did not come up"
                time.sleep(0.1)
        assert r.json()["status"] == "ok"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    assert b"listening on" not in err, err


def test_an_idle_connection_stays_open_longer_than_clients_keep_theirs() -> None:
    """Seen under load (100 streaming clients): a call now and then failed with a ReadError at the client.
    httpx keeps an idle connection 5 s, and so did uvicorn (its default): a request written on a
    connection the server was closing at that moment found it gone. serve's own idle timeout is
    longer than its clients', so after 6 s idle the connection still answers."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def ok(request: object) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/", ok)])
    assert KEEP_ALIVE_S > 90  # Go's and hyper's idle connections live 90 s
    request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with (
        ServerThread(app, config=server_config(app)) as srv,
        socket.create_connection(("127.0.0.1", srv.port), timeout=10) as conn,
    ):
        conn.sendall(request)
        assert conn.recv(4096).startswith(b"HTTP/1.1 200")
        time.sleep(6.0)  # past uvicorn's default of 5 s
        conn.sendall(request)
        assert conn.recv(4096).startswith(b"HTTP/1.1 200")


def test_serve_refuses_to_start_on_an_unreachable_store(isolated_home: Path) -> None:
    port = free_port()  # nothing listens there
    url = f"postgresql://team:hunter2@127.0.0.1:{port}/lm"
    (isolated_home / "config.json").write_text(json.dumps({"store": {"url": url, "connectTimeoutS": 2}}))
    code = "import sys\nfrom lightmem_plugin.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    env = {**os.environ, "LIGHTMEM2_HOME": str(isolated_home)}
    # bounded: a serve that started anyway (on state no peer shares) would run until the timeout
    done = subprocess.run(
        [sys.executable, "-c", code, "serve", "--port", str(free_port())],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "hunter2" not in done.stderr, done.stderr
    assert f"the session store postgresql://team:***@127.0.0.1:{port}/lm" in done.stderr
    assert "check store.url" in done.stderr and "remove store.url to use the embedded store" in done.stderr


def test_serve_starts_on_the_last_good_config_when_the_file_has_a_typo(tmp_path: Path) -> None:
    """Measured before: ``"mode": "turbo"`` in the file made serve exit 2 although config.last-good.json
    was there, and nothing restarted the proxy (``claude -p`` hung with 0 requests sent)."""
    (tmp_path / "config.json").write_text('{"mode": "aggressive"}')
    (tmp_path / "config.last-good.json").write_text('{"mode": "aggressive"}')
    (tmp_path / "config.json").write_text('{"mode": "turbo"}')
    serve = ServeProcess(tmp_path).wait_ready()
    try:
        assert httpx.get(serve.url + "/healthz", timeout=5).json()["status"] == "ok"
        first = serve.stderr.splitlines()[0]
        assert 'mode = "turbo" is invalid' in first and "in force: last good (mode aggressive" in first
    finally:
        serve.stop()
