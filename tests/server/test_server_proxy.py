"""The proxy over real loopback HTTP, against the fake provider: each API, streamed and not."""

from __future__ import annotations

import gzip
import json
import re
import select
import socket
import struct
import threading
import time
from typing import Any

import httpx
import pytest
from client_view import body_view, stream_view
from fake_upstream import FakeUpstream
from fake_wire import Reply
from server_harness import ServerThread, free_port, stack
from starlette.responses import StreamingResponse

from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem, Session
from lightmem_plugin.server.app import create_app, proxy_of

SYSTEM = (
    "You are a careful coding agent.\nWorking directory: /home/alice/proj\nCurrent time: 2026-03-01T10:00:00Z"
)
REPLY = dict(
    text="cd <WORKDIR>/src (at <TIMESTAMP>)",
    tool_calls=[("bash", json.dumps({"cmd": "ls <WORKDIR>/src"}))],
    chunk=3,
)
WANT_TEXT = "cd /home/alice/proj/src (at 2026-03-01T10:00:00Z)"
WANT_ARGS = [{"cmd": "ls /home/alice/proj/src"}]
AUTH = {
    "anthropic": {
        "x-api-key": "sk-ant-secret",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "x-2025",
    },
    "chat": {"authorization": "Bearer sk-secret", "openai-organization": "org-1"},
    "responses": {"authorization": "Bearer sk-secret", "openai-project": "proj-1"},
}
APIS = ["anthropic", "chat", "responses"]


def payload(api: str, stream: bool, user: str = "list the files") -> dict[str, Any]:
    if api == "anthropic":
        return {
            "model": "m",
            "max_tokens": 100,
            "stream": stream,
            "system": SYSTEM,
            "metadata": {"user_id": "user_ab12_account_cd34_session_5f0c7a1e-0000-4000-8000-000000000001"},
            "messages": [{"role": "user", "content": user}],
        }
    if api == "chat":
        return {
            "model": "m",
            "stream": stream,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
        }
    return {
        "model": "m",
        "stream": stream,
        "instructions": SYSTEM,
        "prompt_cache_key": "codex-thread-1",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": user}]}],
    }


def view(api: str, resp: httpx.Response, stream: bool):  # type: ignore[no-untyped-def]
    return stream_view(api, resp.content) if stream else body_view(api, resp.json())


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", APIS)
def test_each_api_transformed_out_and_restored_back(api: str, stream: bool) -> None:
    with stack() as s:
        s.fake.queue(Reply(**REPLY))  # type: ignore[arg-type]
        query = "?beta=true" if api == "anthropic" else ""
        r = httpx.post(s.url(api) + query, json=payload(api, stream), headers=AUTH[api], timeout=10)
        assert r.status_code == 200, r.text
        got = s.fake.received[-1]
        sent = got.raw.decode()
        assert "<WORKDIR>" in sent and "<TIMESTAMP>" in sent  # the head was stabilised
        assert "[lightmem2 now: <TIMESTAMP>=2026-03-01T10:00:00Z]" in sent  # the tail block
        for k, v in AUTH[api].items():
            assert got.headers[k] == v  # auth passed through untouched
        if api == "anthropic":
            assert got.query == "beta=true"
        if api == "responses":
            assert got.body["prompt_cache_key"] == "codex-thread-1"
        v = view(api, r, stream)
        assert v.done and v.text == WANT_TEXT
        assert [json.loads(a) for a in v.args] == WANT_ARGS
        assert v.usage  # the provider's cache figures reach the host
        assert s.plugin.sessions, "a session was created"
        book = _book(s)
        assert sum(row["calls"] for row in book.values()) == 1


@pytest.mark.parametrize(
    ("api", "setting", "want"),
    [
        ("anthropic", "auto", "anthropic"),
        ("chat", "auto", "prefix"),
        ("responses", "auto", "prefix"),
        ("anthropic", "prefix", "prefix"),  # an explicit eviction.cacheModel wins
    ],
)
def test_eviction_prices_a_break_on_the_cache_of_the_api_the_request_came_in_on(
    api: str, setting: str, want: str
) -> None:
    cfg = Config.model_validate({"mode": "aggressive", "eviction": {"cacheModel": setting}})
    with stack(cfg) as s:
        s.fake.queue(Reply(**REPLY))  # type: ignore[arg-type]
        r = httpx.post(s.url(api), json=payload(api, False), headers=AUTH[api], timeout=10)
        assert r.status_code == 200, r.text
        (session,) = s.plugin.sessions.values()
        assert session.evictor.break_cost.name == want


def _book(s: Any) -> dict[str, dict[str, int]]:
    r = httpx.get(s.proxy + "/healthz", timeout=5)
    assert r.json()["status"] == "ok"
    return proxy_of(s.app).usage.totals


@pytest.mark.parametrize(
    ("api", "body"),
    [
        ("chat", b'{"model":"m","messages":[]}'),
        ("chat", b"this is { not json"),
        ("anthropic", b'{"model": "m",  "max_tokens": 5}'),
        ("chat", b'{"model":"m","messages":[{"role":"wizard","content":"x"}]}'),  # codec refuses it
    ],
)
def test_unusable_requests_pass_through_byte_for_byte(api: str, body: bytes) -> None:
    with stack() as s:
        r = httpx.post(s.url(api), content=body, headers={"content-type": "application/json"}, timeout=10)
        assert s.fake.received[-1].raw == body
        assert r.status_code in (200, 400)


def test_pipeline_crash_forwards_the_original(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: Session, req: object) -> object:
        raise RuntimeError("pass exploded")

    monkeypatch.setattr(Session, "begin", boom)  # what the proxy calls (it settles after the send)
    with stack() as s:
        raw = json.dumps(payload("chat", False)).encode()
        r = httpx.post(s.url("chat"), content=raw, headers={"content-type": "application/json"}, timeout=10)
        assert r.status_code == 200
        assert s.fake.received[-1].raw == raw
        (session,) = s.plugin.sessions.values()
        assert session.fail.errors["proxy"] == 1


def test_count_tokens_and_other_routes_pass_through() -> None:
    with stack() as s:
        raw = json.dumps(payload("anthropic", False)).encode()
        r = httpx.post(
            s.proxy + "/v1/messages/count_tokens?beta=true", content=raw, headers=AUTH["anthropic"]
        )
        assert r.status_code == 200 and r.json()["input_tokens"] > 0
        assert s.fake.received[-1].raw == raw and s.fake.received[-1].query == "beta=true"
        r = httpx.get(s.proxy + "/v1/models", headers=AUTH["chat"])
        assert r.json()["data"][0]["id"] == "fake-model"


def test_session_header_wins_and_is_not_forwarded() -> None:
    with stack() as s:
        headers = {**AUTH["chat"], "x-lightmem2-session": "my-run-7"}
        httpx.post(s.url("chat"), json=payload("chat", False), headers=headers, timeout=10)
        assert list(s.plugin.sessions) == ["my-run-7"]
        assert "x-lightmem2-session" not in s.fake.received[-1].headers


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("api", "status", "error"),
    [
        ("anthropic", 429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
        (
            "chat",
            401,
            {"error": {"message": "bad key", "type": "invalid_request_error", "code": "invalid_api_key"}},
        ),
        ("responses", 500, {"error": {"message": "boom", "type": "server_error"}}),
    ],
)
def test_upstream_errors_reach_the_host_as_sent(
    api: str, status: int, error: dict[str, Any], stream: bool
) -> None:
    with stack() as s:
        s.fake.queue(Reply(status=status, error=error))
        r = httpx.post(s.url(api), json=payload(api, stream), headers=AUTH[api], timeout=10)
        assert r.status_code == status
        assert r.json() == error


@pytest.mark.parametrize("api", APIS)
def test_mid_stream_disconnect_reaches_the_host(api: str) -> None:
    with stack() as s:
        s.fake.queue(Reply(**REPLY, cut_after=4))  # type: ignore[arg-type]
        with (
            pytest.raises(httpx.HTTPError),
            httpx.stream("POST", s.url(api), json=payload(api, True), headers=AUTH[api], timeout=10) as r,
        ):
            assert r.status_code == 200
            for _ in r.iter_bytes():
                pass


def test_client_disconnect_cancels_upstream() -> None:
    with stack() as s:
        s.fake.queue(Reply(text="x" * 400, chunk=1, delay_s=0.02))
        with httpx.stream(
            "POST", s.url("chat"), json=payload("chat", True), headers=AUTH["chat"], timeout=10
        ) as r:
            first = next(r.iter_bytes())
            assert first
        deadline = time.monotonic() + 5
        while s.fake.streams_aborted == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert s.fake.streams_aborted == 1 and s.fake.streams_completed == 0


def test_request_over_limit_gets_413_in_provider_shape() -> None:
    cfg = Config()
    cfg.server.maxRequestBytes = 1 << 16
    with stack(cfg) as s:
        big = payload("anthropic", False, user="x" * 70_000)
        r = httpx.post(s.url("anthropic"), json=big, headers=AUTH["anthropic"], timeout=10)
        assert r.status_code == 413
        err = r.json()
        assert err["type"] == "error" and "server.maxRequestBytes=65536" in err["error"]["message"]
        assert s.fake.received == []


def test_large_request_is_transformed_off_the_event_loop() -> None:
    with stack() as s:
        big = payload("chat", False, user="y" * 400_000)
        r = httpx.post(s.url("chat"), json=big, headers=AUTH["chat"], timeout=20)
        assert r.status_code == 200
        assert "<WORKDIR>" in s.fake.received[-1].raw.decode()


@pytest.mark.parametrize("api", ["anthropic", "chat"])
def test_unreachable_upstream_is_a_502_in_provider_shape(api: str) -> None:
    cfg = Config()
    with ServerThread(create_app(LightMem(cfg))) as px:
        dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
        cfg.server.upstreams.anthropic = dead
        cfg.server.upstreams.openai = dead + "/v1"
        r = httpx.post(
            px.url + {"anthropic": "/v1/messages", "chat": "/v1/chat/completions"}[api],
            json=payload(api, False),
            timeout=20,
        )
        assert r.status_code == 502
        msg = r.json()["error"]["message"]
        assert "cannot reach upstream" in msg


def test_named_upstream_route() -> None:
    cfg = Config()
    with stack(cfg) as s:
        cfg.server.upstreams.named = {"local": s.upstream + "/v1", "team-secret-host": s.upstream + "/v1"}
        r = httpx.post(s.proxy + "/u/local/v1/chat/completions", json=payload("chat", False), timeout=10)
        assert r.status_code == 200 and s.fake.received[-1].path == "/v1/chat/completions"
        r = httpx.post(s.proxy + "/u/nope/v1/chat/completions", json=payload("chat", False), timeout=10)
        message = r.json()["error"]["message"]
        assert r.status_code == 404 and "unknown upstream 'nope'" in message
        assert "local" not in message and "team-secret-host" not in message, "no name is given away"


def test_concurrent_requests_of_one_session_are_serialised() -> None:
    with stack() as s:
        errors: list[BaseException] = []

        def call() -> None:
            try:
                r = httpx.post(s.url("chat"), json=payload("chat", True), headers=AUTH["chat"], timeout=20)
                assert stream_view("chat", r.content).text == "ok"
            except BaseException as err:  # collected, asserted below
                errors.append(err)

        threads = [threading.Thread(target=call) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert errors == [] and len(s.fake.received) == 20
        assert len(s.plugin.sessions) == 1


def test_claude_code_shaped_request_keeps_breakpoints_and_system_messages() -> None:
    mark = {"type": "ephemeral"}
    body = {
        "model": "claude-x",
        "max_tokens": 100,
        "stream": True,
        "system": [
            {"type": "text", "text": "You are Claude Code."},
            {"type": "text", "text": SYSTEM, "cache_control": mark},
        ],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}, "cache_control": mark}],
        "metadata": {"user_id": '{"session_id":"5f0c7a1e-0000-4000-8000-000000000002"}'},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": mark}]},
            {"role": "system", "content": "Reminder: be brief."},
        ],
    }
    with stack() as s:
        r = httpx.post(s.proxy + "/v1/messages?beta=true", json=body, headers=AUTH["anthropic"], timeout=10)
        assert r.status_code == 200 and stream_view("anthropic", r.content).done
        sent = s.fake.received[-1].body
        assert json.dumps(sent).count('"cache_control"') == 3
        assert sent["messages"][1] == {"role": "system", "content": "Reminder: be brief."}
        assert "<WORKDIR>" in json.dumps(sent["system"])
        assert list(s.plugin.sessions) == ["5f0c7a1e-0000-4000-8000-000000000002"]


def test_lone_surrogate_escapes_stay_valid_utf8() -> None:
    with stack() as s:
        raw = json.dumps(payload("chat", False, user="broken \ud800 text")).encode()  # json escapes it
        assert b"\\ud800" in raw
        r = httpx.post(s.url("chat"), content=raw, headers={"content-type": "application/json"}, timeout=10)
        assert r.status_code == 200
        sent = s.fake.received[-1].raw
        sent.decode("utf-8")  # strict: no invalid bytes reached the provider
        assert b"\\ud800" in sent and b"<WORKDIR>" in sent


DOT_SEGMENTS = [
    "..",
    ".",
    "%2e%2e",
    "%2E%2e",
    ".%2e",
    "%2e.",
    "%2e",
    "%252e%252e",  # measured before: /v1/%252e%252e/%252e%252e/admin/secret reached /admin/secret
    "%252E%252e",
    "%25252e%25252e",
    "%2525252e%2525252e",
    "..%5c..",
    "%2e%2e%5c%2e%2e",
    "%252e%252e%255c%252e%252e",
    "..%255c..",
]
ROUTES = {  # prefix -> headers: every route that passes a path through
    "/v1": AUTH["chat"],
    "/v1/anthropic": {**AUTH["anthropic"], "anthropic-version": "2023-06-01"},
    "/u/team/v1": AUTH["chat"],
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_no_encoding_of_a_dot_segment_leaves_the_upstream_base(route: str) -> None:
    """Every spelling of ``.``/``..`` (single, double and deeper percent-encoding, mixed case, ``%5c``)
    through every pass-through route is refused or stays under the upstream's base; a plain path passes."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from lightmem_plugin.config import Config
    from lightmem_plugin.pipeline import LightMem
    from lightmem_plugin.server.app import create_app

    seen: list[str] = []

    async def anything(request: Any) -> PlainTextResponse:
        seen.append(request.scope["raw_path"].decode())
        return PlainTextResponse("upstream")

    upstream = Starlette(routes=[Route("/{p:path}", anything, methods=["GET", "POST"])])
    prefix = route.removesuffix("/anthropic")
    answers = {}
    with ServerThread(upstream) as up:
        cfg = Config()
        cfg.server.upstreams.openai = up.url + "/v1"
        cfg.server.upstreams.anthropic = up.url
        cfg.server.upstreams.named = {"team": up.url + "/v1"}
        with ServerThread(create_app(LightMem(cfg))) as px:
            for seg in DOT_SEGMENTS:
                answers[seg] = _raw_get(px.url, f"{prefix}/models/{seg}/{seg}/admin/secret", ROUTES[route])
            ok = _raw_get(px.url, f"{prefix}/models/gpt-5.1..x", ROUTES[route])
    bad = [p for p in seen if not p.startswith("/v1/models/")]
    assert bad == [], f"reached the upstream outside its base: {bad}"
    refused = {seg: status for seg, (status, _text) in answers.items() if status != 400}
    assert refused == {}, "every dot segment is refused with 400"
    assert all("'.' or '..'" in text for _status, text in answers.values())
    assert ok == (200, "upstream") and seen[-1] == "/v1/models/gpt-5.1..x"


def _raw_get(base: str, path: str, headers: dict[str, str]) -> tuple[int, str]:
    """GET ``path`` byte for byte (an HTTP client would resolve ``..`` itself before sending)."""
    import http.client

    url = httpx.URL(base)
    conn = http.client.HTTPConnection(url.host, url.port, timeout=10)
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def test_headers_named_in_connection_are_not_forwarded() -> None:
    with stack() as s:
        headers = {
            **AUTH["chat"],
            "connection": "keep-alive, x-hop-secret",
            "x-hop-secret": "s3",
            "x-end": "e",
        }
        httpx.post(s.url("chat"), json=payload("chat", False), headers=headers, timeout=10)
        sent = s.fake.received[-1].headers
        assert "x-hop-secret" not in sent and sent.get("x-end") == "e"


def test_a_host_that_hangs_up_after_the_usage_event_still_gets_its_call_recorded(tmp_path: Any) -> None:
    """Seen in the Codex 0.169 wire e2e (gpt-5.5), now and then: one ledger row of eleven had no provider
    usage. The host closes the stream once it has the final event, so the relay never reached its end,
    where the usage was recorded; the provider had billed the call all the same."""
    from lightmem_plugin.server.app import create_app as make_app
    from lightmem_plugin.store.ledger import Ledger

    fake = FakeUpstream()
    with ServerThread(fake.app) as up:
        cfg = Config()
        cfg.server.upstreams.openai = up.url + "/v1"
        ledger = Ledger(tmp_path / "ledger.sqlite3")
        plugin = LightMem(cfg, ledger=ledger)
        with ServerThread(make_app(plugin)) as px:
            # many small deltas, and a pause before [DONE], so the usage event is never in the last
            # network read (the relay hands over all that one read brought, and under load that was
            # the usage and [DONE] together)
            fake.queue(Reply(text="word " * 200, chunk=3, delay_s=0.002, final_delay_s=0.5))
            body = {
                "model": "m",
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "hello there"}],
            }
            headers = {"authorization": "Bearer sk-x", "x-lightmem2-session": "hangup"}
            seen = b""
            url = px.url + "/v1/chat/completions"
            with (
                httpx.Client(timeout=10, trust_env=False) as client,
                client.stream("POST", url, json=body, headers=headers) as r,
            ):
                for chunk in r.iter_raw():
                    seen += chunk
                    if b'"usage"' in seen and b'"prompt_tokens"' in seen:
                        break  # the host has what it needs and hangs up before [DONE]
            assert b"[DONE]" not in seen
            deadline = time.monotonic() + 5
            rows = ledger.calls("hangup")
            while (not rows or rows[-1].real_input_tokens is None) and time.monotonic() < deadline:
                time.sleep(0.05)
                rows = ledger.calls("hangup")
    assert rows and rows[-1].real_input_tokens == fake.reported[-1]["prompt"], rows


class _ClosingUpstream:
    """A raw HTTP/1.1 upstream that answers the first request of a connection and closes the connection,
    unread, the moment a second request arrives on it: an idle keep-alive close racing our reuse."""

    ANSWER = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}'

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(re.search(rb"content-length: *(\d+)", head, re.I).group(1))  # type: ignore[union-attr]
            while len(rest) < length:
                rest += conn.recv(65536)
            conn.sendall(self.ANSWER)
            select.select([conn], [], [], 10)  # the next request arrives: close without reading it
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def __enter__(self) -> _ClosingUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


def test_a_pooled_upstream_connection_the_server_closed_is_retried_once() -> None:
    """Measured at 100 clients: now and then a 502 (ReadError) when the provider closed an idle
    keep-alive connection just as the proxy reused it. The proxy tries such a call once more, on a new
    connection; a provider that is really gone still gives the 502."""
    with _ClosingUpstream() as up:
        cfg = Config()
        cfg.server.upstreams.openai = up.url + "/v1"
        with ServerThread(create_app(LightMem(cfg))) as px, httpx.Client(timeout=10) as client:
            for _ in range(10):  # more calls than the old proxy had pools, so that each pool reuses one
                r = client.post(px.url + "/v1/models/x", content=b"{}", headers=AUTH["chat"])
                assert r.status_code == 200 and r.json() == {"ok": True}
        assert up.connections == 10  # each reuse was cut, and retried on a fresh connection


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_gzipped_upstream_answer_reaches_the_host_decoded(stream: bool) -> None:
    """Measured before: an upstream ``content-encoding: gzip`` answer (sent although we ask for
    identity) became a 500. The host gets the decoded, restored answer and no content-encoding."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    fake = FakeUpstream()

    async def gzipping(request: Request) -> Response:
        inner = await fake._endpoint("chat")(request)
        if isinstance(inner, StreamingResponse):
            raw = b"".join([c if isinstance(c, bytes) else c.encode() async for c in inner.body_iterator])
        else:
            raw = bytes(inner.body)
        kind = inner.headers["content-type"]
        return Response(gzip.compress(raw), headers={"content-type": kind, "content-encoding": "gzip"})

    upstream = Starlette(routes=[Route("/v1/chat/completions", gzipping, methods=["POST"])])
    fake.queue(Reply(**REPLY))  # type: ignore[arg-type]
    with ServerThread(upstream) as up:
        cfg = Config()
        cfg.server.upstreams.openai = up.url + "/v1"
        with ServerThread(create_app(LightMem(cfg))) as px:
            r = httpx.post(
                px.url + "/v1/chat/completions",
                json=payload("chat", stream),
                headers=AUTH["chat"],
                timeout=10,
            )
    assert r.status_code == 200 and "content-encoding" not in r.headers
    got = view("chat", r, stream)
    assert got.text == WANT_TEXT and [json.loads(a) for a in got.args] == WANT_ARGS


def test_a_body_that_is_not_utf8_goes_out_byte_for_byte() -> None:
    """Found by the wire fuzz suite: json.loads(bytes) accepts lone surrogates written as raw bytes
    (CESU-8), and the transformed body sent them as one escaped pair, a different character. A body
    that is not UTF-8 is not ours to read: it reaches the provider as the host sent it."""
    with stack() as s:
        text = json.dumps(payload("chat", False, user="halves \ud800\udfff apart"), ensure_ascii=False)
        raw = text.encode("utf-8", "surrogatepass")
        r = httpx.post(s.url("chat"), content=raw, headers={"content-type": "application/json"}, timeout=10)
        assert r.status_code == 200 and s.fake.received[-1].raw == raw


MONEY_MODEL = {"anthropic": "claude-sonnet-4-5-20250929", "chat": "gpt-5-mini", "responses": "gpt-5"}


def _followed(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` one turn later: the model's "ok" and a new user message appended."""
    if api == "responses":
        more = [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and now?"}]},
        ]
        return {**body, "input": [*body["input"], *more]}
    more = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "and now?"}]
    return {**body, "messages": [*body["messages"], *more]}


def _billed(api: str, usage: dict[str, Any], model: str) -> float:
    """What the provider's ``usage`` costs at the model's list price, read straight off its fields."""
    from lightmem_plugin.metering.prices import price_for

    p = price_for(model)
    assert p is not None
    if api == "anthropic":
        hit, write, out = (
            usage["cache_read_input_tokens"],
            usage["cache_creation_input_tokens"],
            usage["output_tokens"],
        )
        return (
            hit * p.cache_read + usage["input_tokens"] * p.input + write * p.cache_write_5m + out * p.output
        ) / 1e6
    total, out = (
        (usage["prompt_tokens"], usage["completion_tokens"])
        if api == "chat"
        else (usage["input_tokens"], usage["output_tokens"])
    )
    hit = usage["prompt_tokens_details" if api == "chat" else "input_tokens_details"]["cached_tokens"]
    return (hit * p.cache_read + (total - hit) * p.input + out * p.output) / 1e6


@pytest.mark.parametrize("api", APIS)
def test_a_proxied_call_records_the_money_its_usage_implies(api: str, tmp_path: Any) -> None:
    """Through the real loopback proxy: each call's ledger row costs what the fake provider's usage
    says at the model's list price (output included), and names the model and its output tokens."""
    from lightmem_plugin.store.ledger import Ledger

    fake = FakeUpstream()
    model = MONEY_MODEL[api]
    with ServerThread(fake.app) as up:
        cfg = Config()
        cfg.server.upstreams.anthropic, cfg.server.upstreams.openai = up.url, up.url + "/v1"
        ledger = Ledger(tmp_path / "ledger.sqlite3")
        with ServerThread(create_app(LightMem(cfg, ledger=ledger))) as px:
            body = {**payload(api, False, user="list the files " * 40), "model": model}
            usages = []
            for _ in range(2):
                fake.queue(Reply(text="ok, listing them now"))
                headers = {**AUTH[api], "x-lightmem2-session": f"money-{api}"}
                path = {
                    "anthropic": "/v1/messages",
                    "chat": "/v1/chat/completions",
                    "responses": "/v1/responses",
                }
                r = httpx.post(px.url + path[api], json=body, headers=headers, timeout=10)
                assert r.status_code == 200, r.text
                usages.append(r.json()["usage"])
                body = _followed(api, body)
            deadline = time.monotonic() + 5
            rows = ledger.calls(f"money-{api}")
            while (
                len(rows) < 2 or rows[-1].cost_usd is None or rows[-1].output_tokens is None
            ) and time.monotonic() < deadline:
                time.sleep(0.05)
                rows = ledger.calls(f"money-{api}")
    assert len(rows) == 2 and [r.model for r in rows] == [model, model]
    assert [r.real_input_tokens for r in rows] == [f["prompt"] for f in fake.reported]
    for row, usage in zip(rows, usages, strict=True):
        assert row.output_tokens == usage.get("output_tokens", usage.get("completion_tokens"))
        assert row.cost_usd == pytest.approx(_billed(api, usage, model), rel=1e-9)
        assert row.saved_usd is not None and row.cost_without_usd is not None
    assert (rows[1].real_hit_tokens or 0) > 0  # the second call read from the cache: priced as a read
    t = ledger.totals(f"money-{api}")
    assert (
        t.cost_usd == pytest.approx(sum(_billed(api, u, model) for u in usages)) and t.priced_real_calls == 2
    )
