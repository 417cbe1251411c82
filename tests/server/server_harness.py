"""Run an ASGI app with uvicorn on a free loopback port in a thread, bounded and stopped by handle."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import uvicorn
from fake_upstream import FakeUpstream

from lightmem_plugin.commands.table import run_remote_line
from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.server.app import create_app

LISTENING_RE = re.compile(r"lightmem2 serve: listening on http://127\.0\.0\.1:(\d+)$")


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerThread:
    """``with ServerThread(app) as srv: httpx.get(srv.url + "/healthz")``."""

    def __init__(self, app: Any, start_timeout: float = 10.0, config: uvicorn.Config | None = None) -> None:
        """``config``: run under these settings (e.g. ``serve``'s own) instead of the test defaults."""
        self.sock = socket.socket(
            socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP
        )  # so TCP_NODELAY is set
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(2048)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = config or uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=2
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.start_timeout = start_timeout

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("server thread did not start")
            time.sleep(0.01)
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(timeout=5)


@dataclass
class Stack:
    """A fake provider, the proxy in front of it, and the proxy's plugin."""

    fake: FakeUpstream
    upstream: str
    proxy: str
    plugin: LightMem
    app: Any

    def url(self, api: str, direct: bool = False) -> str:
        base = self.upstream if direct else self.proxy
        return (
            base
            + {"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}[api]
        )


@contextmanager
def stack(config: Config | None = None) -> Iterator[Stack]:
    """Fake provider + proxy, each on its own free loopback port; both stopped on exit."""
    fake = FakeUpstream()
    with ServerThread(fake.app) as up:
        cfg = config or Config()
        cfg.server.upstreams.anthropic = up.url
        cfg.server.upstreams.openai = up.url + "/v1"
        plugin = LightMem(cfg)
        app = create_app(plugin, commands=run_remote_line)
        with ServerThread(app) as px:
            yield Stack(fake, up.url, px.url, plugin, app)


ROOT = Path(__file__).resolve().parents[2]


class ServeProcess:
    """One ``lightmem2 serve`` process with ``home`` as its data dir, on a loopback port it binds itself,
    stopped (or killed) by PID. It starts at once; :meth:`wait_ready` waits for its port and ``/healthz``
    (so several can start side by side).

    Why port 0 and not :func:`free_port`: a port picked here, released and then bound by the child can
    be taken in between (by another serve started alongside, or as an outgoing connection's source
    port); the child then dies on the bind while its neighbour answers ``/healthz`` on that port. Seen
    in CI: a fleet process was already gone when the test came to kill it. serve with port 0 binds
    first and names the port on stderr; a thread drains stderr so a chatty process never blocks on it.
    """

    def __init__(self, home: Path, env: dict[str, str] | None = None) -> None:
        full = {**os.environ, "LIGHTMEM2_HOME": str(home), "PYTHONPATH": str(ROOT), **(env or {})}
        code = "from lightmem_plugin.server import serve\nserve(port=0)\n"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], env=full, stderr=subprocess.PIPE, text=True
        )
        self.stderr = ""
        self._port: int | None = None
        self._announced = threading.Event()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr += line
            found = LISTENING_RE.match(line)
            if found and self._port is None:
                self._port = int(found.group(1))
                self._announced.set()
        self._announced.set()  # stderr closed: the process is gone

    @property
    def port(self) -> int:
        assert self._port is not None, f"serve has not named its port yet; stderr: {self.stderr!r}"
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self) -> ServeProcess:
        deadline = time.monotonic() + 30
        assert self._announced.wait(30) and self._port is not None, f"serve did not bind: {self.stderr!r}"
        while True:
            try:
                httpx.get(self.url + "/healthz", timeout=1).raise_for_status()
                return self
            except httpx.HTTPError:
                assert self.proc.poll() is None, self.stderr
                assert time.monotonic() < deadline, "serve did not come up"
                time.sleep(0.1)

    def kill(self) -> None:
        assert self.proc.poll() is None, f"serve exited by itself ({self.proc.returncode}): {self.stderr!r}"
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(timeout=5)
