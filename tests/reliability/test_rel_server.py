"""Server hardening: loopback by default, a clear 413, upstream timeouts, slow clients, keys out of logs.

All against real loopback sockets: the proxy (``create_app``) and a fake provider, each run by uvicorn
in a thread (``rel_stack``). The soak is in ``test_rel_soak.py``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from rel_convo import head, turn
from rel_stack import ServerThread, ledger_stack
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from lightmem_plugin.config import Config
from lightmem_plugin.security.redaction import LogRedactor, install_log_redaction
from lightmem_plugin.server import serve

KEY_OPENAI = "sk-proj-" + "K" * 30 + "loggedkey0123456789"
KEY_ANTHROPIC = "sk-ant-api03-" + "L" * 30 + "loggedkey9876543210"
KEY_QUERY = "qk" + "M" * 30 + "0123456789querykey"
KEYS = (KEY_OPENAI, KEY_ANTHROPIC, KEY_QUERY)


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_serve_binds_loopback_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    bound: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        uvicorn.Server, "run", lambda self, sockets: bound.extend(s.getsockname() for s in sockets)
    )
    assert Config().server.host == "127.0.0.1"
    serve(Config(), port=0)
    assert len(bound) == 1 and bound[0][0] == "127.0.0.1"


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize(
    ("path", "shape"), [("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic")]
)
def test_oversized_request_gets_a_clear_413(tmp_path: Path, chunked: bool, path: str, shape: str) -> None:
    cfg = Config()
    cfg.server.maxRequestBytes = 1 << 16
    big = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"x" * 200_000 + b'"}]}'
    with ledger_stack(tmp_path, cfg) as st:
        content: Any = iter([big[i : i + 8192] for i in range(0, len(big), 8192)]) if chunked else big
        headers = {
            "content-type": "application/json",
            "anthropic-version": "2023-06-01",
            "x-api-key": KEY_ANTHROPIC,
        }
        r = httpx.post(st.proxy + path, content=content, headers=headers, timeout=30)
        assert r.status_code == 413
        body = r.json()
        error = body["error"]
        assert error["type"] == "request_too_large"
        assert "server.maxRequestBytes=65536" in error["message"] and "\n" not in error["message"]
        assert (body.get("type") == "error") == (shape == "anthropic")
        assert st.fake.received == []
        assert httpx.get(st.proxy + "/healthz").status_code == 200


def _slow_upstream(delay: float) -> Starlette:
    async def slow(request: Request) -> Response:
        await request.body()
        await asyncio.sleep(delay)
        return JSONResponse({"id": "late", "choices": []})

    return Starlette(routes=[Route("/v1/chat/completions", slow, methods=["POST"])])


def _chat(sid: str) -> dict[str, Any]:
    return {"model": "m", "messages": [*head(sid), *turn(sid, 0)]}


@pytest.mark.slow
def test_upstream_timeout_is_a_504_in_the_providers_shape(tmp_path: Path) -> None:
    from lightmem_plugin.pipeline import LightMem
    from lightmem_plugin.server.app import create_app

    with ServerThread(_slow_upstream(5.0)) as up:
        cfg = Config()
        cfg.server.upstreams.openai = up.url + "/v1"
        cfg.server.upstreamTimeoutS = 0.3
        cfg.registry.dir = str(tmp_path / "artifacts")
        with ServerThread(create_app(LightMem(cfg))) as px:
            start = time.monotonic()
            r = httpx.post(px.url + "/v1/chat/completions", json=_chat("slow"), timeout=30)
            took = time.monotonic() - start
            assert r.status_code == 504 and took < 3.0
            assert r.json()["error"]["type"] == "timeout_error"
            assert "server.upstreamTimeoutS" in r.json()["error"]["message"]
            assert httpx.get(px.url + "/healthz").status_code == 200


def test_unreachable_upstream_is_a_502(tmp_path: Path) -> None:
    from lightmem_plugin.pipeline import LightMem
    from lightmem_plugin.server.app import create_app

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    cfg = Config()
    cfg.server.upstreams.openai = f"http://127.0.0.1:{dead}/v1"
    cfg.registry.dir = str(tmp_path / "artifacts")
    with ServerThread(create_app(LightMem(cfg))) as px:
        r = httpx.post(px.url + "/v1/chat/completions", json=_chat("dead"), timeout=30)
        assert r.status_code == 502 and r.json()["error"]["type"] == "api_error"


@pytest.mark.slow
def test_slow_clients_do_not_block_others_and_leak_nothing(tmp_path: Path) -> None:
    with ledger_stack(tmp_path) as st, httpx.Client(timeout=30) as client:

        def busy(n: int) -> None:
            for i in range(n):
                r = client.post(
                    st.chat_url(), json=_chat(f"busy{i}"), headers={"x-lightmem2-session": f"busy{i}"}
                )
                assert r.status_code == 200

        busy(24)  # warm every pooled upstream connection first: those descriptors are kept on purpose
        before = _fds()
        port = int(st.proxy.rsplit(":", 1)[1])
        stalled = []
        for i in range(40):  # slowloris: half a header block, or headers and half a body, then nothing
            s = socket.create_connection(("127.0.0.1", port))
            if i % 2:
                s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Len")
            else:
                s.sendall(
                    b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"mo'
                )
            stalled.append(s)
        start = time.monotonic()
        busy(5)
        assert time.monotonic() - start < 5.0
        for s in stalled:
            s.close()
        deadline = time.monotonic() + 10
        while _fds() > before + 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _fds() <= before + 4, f"{_fds() - before} descriptors still open after the clients left"


@contextmanager
def _all_logs() -> Iterator[list[str]]:
    """Every record of every logger, at DEBUG, formatted with its exception text."""
    lines: list[str] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    grab = Grab(logging.DEBUG)
    grab.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    names = [
        "",
        "lightmem2",
        "lightmem2.server",
        "httpx",
        "httpcore",
        "aiohttp",
        "asyncio",
        "uvicorn",
        "uvicorn.error",
        "uvicorn.access",
    ]
    saved = {n: (logging.getLogger(n).level, logging.getLogger(n).propagate) for n in names}
    for n in names:
        logger = logging.getLogger(n)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(grab)
        if n:
            logger.propagate = False
    try:
        yield lines
    finally:
        for n, (level, propagate) in saved.items():
            logger = logging.getLogger(n)
            logger.removeHandler(grab)
            logger.setLevel(level)
            logger.propagate = propagate


def _traffic(tmp_path: Path) -> str:
    """Requests of every kind, carrying API keys in headers and in a query string, ok and failing;
    returns the proxy's base URL (what the host's own client logs its requests to)."""
    cfg = Config()
    cfg.server.maxRequestBytes = 1 << 16
    with ledger_stack(tmp_path, cfg) as st, httpx.Client(timeout=30) as client:
        openai = {"authorization": f"Bearer {KEY_OPENAI}"}
        anth = {"x-api-key": KEY_ANTHROPIC, "anthropic-version": "2023-06-01"}
        client.post(st.chat_url(), json=_chat("logs"), headers=openai)
        client.post(st.chat_url() + f"?key={KEY_QUERY}", json=_chat("logs"), headers=openai)
        client.post(st.proxy + "/v1/chat/completions", json={**_chat("s"), "stream": True}, headers=openai)
        client.post(
            st.proxy + "/v1/messages",
            json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
            headers=anth,
        )
        client.post(st.chat_url(), content=b"x" * 70_000, headers=openai)  # 413
        client.post(st.chat_url(), content=b"{not json", headers=openai)  # passed through as is
        client.get(st.proxy + f"/v1/models?key={KEY_QUERY}", headers=openai)
        st.plugin.config.server.upstreams.openai = "http://127.0.0.1:9/v1"  # unreachable: 502
        client.post(st.chat_url() + f"?key={KEY_QUERY}", json=_chat("logs"), headers=openai)
        return st.proxy


def _leaked(lines: list[str], host_client: str = "") -> list[str]:
    """Log lines holding a key; with ``host_client`` (the proxy's URL), leaving out the lines the
    test's own httpx client logs of its requests to the proxy: that client stands for the host, and
    what the host logs is not ours (our upstream client is aiohttp, whose lines stay checked)."""
    own = f"HTTP Request: POST {host_client}", f"HTTP Request: GET {host_client}"
    return [
        line[:200]
        for line in lines
        if any(key in line for key in KEYS) and not (host_client and any(o in line for o in own))
    ]


def test_no_api_key_in_any_log_line_as_shipped(tmp_path: Path) -> None:
    with _all_logs() as lines:
        proxy = _traffic(tmp_path)
    assert len(lines) > 10, "DEBUG logging must have produced records to check"
    assert _leaked(lines, proxy) == []


def test_no_api_key_in_any_log_line_with_log_redaction(tmp_path: Path) -> None:
    names = [
        "lightmem2",
        "lightmem2.server",
        "httpx",
        "httpcore",
        "aiohttp",
        "asyncio",
        "uvicorn",
        "uvicorn.error",
        "uvicorn.access",
    ]
    filt = install_log_redaction(names=names)
    try:
        with _all_logs() as lines:
            _traffic(tmp_path)
    finally:
        for n in names:
            logging.getLogger(n).removeFilter(filt)
    assert len(lines) > 10
    assert _leaked(lines) == []
    assert any("[REDACTED:" in line for line in lines), "the query-string key was logged, redacted"


def test_log_redactor_keeps_records_and_redacts_arguments() -> None:
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "auth %s for %s", (f"Bearer {KEY_OPENAI}", "u"), None
    )
    assert LogRedactor().filter(record)
    assert KEY_OPENAI not in record.getMessage() and record.getMessage().endswith(" for u")


def test_a_client_abandoning_its_upload_is_not_logged_as_a_server_error(tmp_path: Path) -> None:
    with ledger_stack(tmp_path) as st, _all_logs() as lines:
        port = int(st.proxy.rsplit(":", 1)[1])
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"mo')
        time.sleep(0.2)
        s.close()
        time.sleep(0.3)
        assert httpx.get(st.proxy + "/healthz").status_code == 200
    assert [line for line in lines if "Exception in ASGI application" in line] == []


def _chat(stream: bool = True) -> dict[str, Any]:
    return {
        "model": "m",
        "stream": stream,
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
    }


def test_hosts_hanging_up_mid_stream_leave_no_traceback_in_the_log(tmp_path: Path) -> None:
    """Measured before: a traceback in the log per client disconnect. Ten hosts leave mid-stream;
    nothing is logged as an error, the provider calls are cancelled and the server still answers."""
    from fake_wire import Reply

    with ledger_stack(tmp_path) as st, _all_logs() as lines:
        for _ in range(10):
            st.fake.queue(Reply(text="x" * 300, chunk=1, delay_s=0.005))
        for _ in range(10):
            with httpx.stream("POST", st.proxy + "/v1/chat/completions", json=_chat(), timeout=10) as r:
                assert next(r.iter_raw())
        deadline = time.monotonic() + 5
        while st.fake.streams_aborted < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert st.fake.streams_aborted == 10
        assert httpx.get(st.proxy + "/healthz").status_code == 200
    bad = [line for line in lines if "Traceback" in line or " ERROR " in line or "Exception" in line]
    assert bad == []


def test_an_upstream_cutting_its_stream_cuts_the_hosts_with_one_log_line_and_no_traceback(
    tmp_path: Path,
) -> None:
    """The host must see a cut stream (never a clean end of a truncated answer), and the log says what
    happened in a line, not a traceback."""
    from fake_wire import Reply

    with ledger_stack(tmp_path) as st, _all_logs() as lines:
        st.fake.queue(Reply(text="x" * 50, chunk=5, cut_after=4))
        with (
            pytest.raises(httpx.HTTPError),
            httpx.stream("POST", st.proxy + "/v1/chat/completions", json=_chat(), timeout=10) as r,
        ):
            for _ in r.iter_raw():
                pass
        assert httpx.get(st.proxy + "/healthz").status_code == 200
    ours = [line for line in lines if "scripted mid-stream disconnect" not in line]  # the fake's own
    assert [line for line in ours if "Traceback" in line or "Exception in ASGI" in line] == []
    assert [line for line in ours if "lightmem2.server" in line and "cut its stream" in line]


def _echo_upstream() -> Starlette:
    async def echo(request: Request) -> Response:
        return JSONResponse({"received_bytes": len(await request.body())})

    return Starlette(routes=[Route("/v1/chat/completions", echo, methods=["POST"])])


def test_deeply_nested_json_body_is_forwarded_untouched(tmp_path: Path) -> None:
    from lightmem_plugin.pipeline import LightMem
    from lightmem_plugin.server.app import create_app

    body = b'{"model": "m", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with ServerThread(_echo_upstream()) as up:
        cfg = Config()
        cfg.server.upstreams.openai = up.url + "/v1"
        cfg.registry.dir = str(tmp_path / "artifacts")
        with ServerThread(create_app(LightMem(cfg))) as px:
            r = httpx.post(px.url + "/v1/chat/completions", content=body, timeout=30)
    assert r.status_code == 200 and r.json() == {"received_bytes": len(body)}
