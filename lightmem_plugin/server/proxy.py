"""Forwarding one host request to its provider: transform on the way out, restore on the way back.

Why this shape: the proxy must never be the reason a call fails (I5), so every step that can fail
falls back to forwarding what the host sent. A request whose body is not JSON, has no messages, or
that a codec cannot read goes out byte for byte; a request the pipeline leaves equal also goes out as
the original bytes. Auth headers (``x-api-key``, ``authorization``, ``anthropic-*``, ``openai-*``) are
forwarded untouched and never logged or stored; only hop-by-hop headers are dropped, and the upstream is
asked for an uncompressed body so SSE can be parsed as it arrives.

Responses: an upstream error (4xx/5xx) reaches the host exactly as the provider sent it. A streamed
(``text/event-stream``) answer is forwarded event by event through the API's rewriter (placeholders
restored, usage picked up); a JSON answer is restored as a whole. If the host disconnects, the
upstream response is closed at once, which cancels the provider call. An upstream that cannot be
reached or times out becomes a 502/504 in the provider's own error shape.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import xxhash
from starlette.requests import Request as HttpRequest
from starlette.responses import Response, StreamingResponse

from .. import wire
from ..errors import PayloadError
from ..faults import on_surface, report
from ..pipeline import LightMem, Session
from ..store import session_lock
from ..tenancy import TOKEN_HEADER, scoped
from .identity import HEADER, session_identity
from .rewrite import StreamRewriter, body_usage
from .sse import json_bytes
from .usage import UsageBook, record_usage

log = logging.getLogger("lightmem2.server")

HOP_BY_HOP = frozenset(
    (
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
        HEADER,
        "x-lightmem2-secret",  # never leaves the machine, should a client send it to /v1
        TOKEN_HEADER,  # a gateway user's token is ours, never the provider's
    )
)
_DROP_BACK = frozenset(
    ("connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding")
)
THREAD_ABOVE_BYTES = 256 * 1024


def connection_tokens(value: str) -> frozenset[str]:
    """Header names a ``Connection`` header lists: hop-by-hop for this hop, never forwarded."""
    return frozenset(t.strip().lower() for t in value.split(",") if t.strip())


POOL_SHARDS = 8


def error_body(api: str, status: int, message: str) -> dict[str, Any]:
    """An error in the provider's own shape, so the host's SDK reports it normally."""
    kind = {413: "request_too_large", 502: "api_error", 504: "timeout_error"}.get(status, "api_error")
    return wire.get(api).error(kind, message)


def error_response(api: str, status: int, message: str) -> Response:
    """JSON error response (``api`` decides the shape)."""
    return Response(json.dumps(error_body(api, status, message)), status, media_type="application/json")


@dataclass
class Outgoing:
    """What we send upstream, and the session whose placeholders to restore in the answer."""

    body: bytes
    session: Session | None = None
    values: Mapping[str, str] | None = None


def _count(session: Session, name: str, err: Exception) -> None:
    session.fail.report(name, err)


def transform(session: Session, api: str, payload: dict[str, Any], body: bytes) -> Outgoing:
    """Decode, run the session's pipeline, encode; the original bytes on any failure or no change."""
    with on_surface("proxy"):  # also when run in a worker thread, which does not inherit the context
        return _transform(session, api, payload, body)


def _transform(session: Session, api: str, payload: dict[str, Any], body: bytes) -> Outgoing:
    api_wire = wire.get(api)
    try:
        req = api_wire.decode(payload)
    except PayloadError as err:
        _count(session, "codec", err)
        return Outgoing(body, session, {})
    out = session.process(req, request_key=f"{api}:{xxhash.xxh3_128_hexdigest(body)}")
    try:
        encoded = api_wire.encode(out)
    except Exception as err:  # fail-open (I5)
        _count(session, "codec", err)
        return Outgoing(body, session, {})
    values = dict(session.stabilizer.values())
    if encoded == payload:
        return Outgoing(body, session, values)
    return Outgoing(json_bytes(encoded), session, values)


class TooLarge(Exception):
    """The request body is over the configured limit."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


async def read_body(request: HttpRequest, limit: int) -> bytes:
    """The whole body, or TooLarge as soon as it is known to exceed ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(int(declared))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(size)
        chunks.append(chunk)
    return b"".join(chunks)


class Proxy:
    """The upstream clients (pooled), the plugin, and a lock per session.

    Why several clients: httpcore's pool scans every connection each time a request is assigned or a
    connection released, so with hundreds of concurrent streams one pool spends more CPU scanning than
    relaying. Requests go round-robin to ``POOL_SHARDS`` clients, each with its own keep-alive pool.
    Proxy settings from the environment (``HTTPS_PROXY``, ``NO_PROXY``) are honoured.
    """

    def __init__(self, plugin: LightMem, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.plugin = plugin
        self.usage = UsageBook()
        self.locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        timeout = plugin.config.server.upstreamTimeoutS
        self.clients = [
            httpx.AsyncClient(
                timeout=httpx.Timeout(timeout, connect=min(timeout, 30.0)),
                limits=httpx.Limits(max_connections=256, max_keepalive_connections=32, keepalive_expiry=60.0),
                transport=transport,
                follow_redirects=False,
            )
            for _ in range(1 if transport else POOL_SHARDS)
        ]
        self._turn = itertools.count()

    async def aclose(self) -> None:
        """Close pooled upstream connections."""
        for client in self.clients:
            await client.aclose()

    async def prepare(
        self, api: str, body: bytes, headers: Mapping[str, str], user: str | None = None
    ) -> Outgoing:
        """The request to send upstream for a host request of ``api`` (by gateway ``user``, if any)."""
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return Outgoing(body)
        sid = session_identity(api, payload, headers) if isinstance(payload, dict) else None
        if sid is None:
            return Outgoing(body)
        sid = scoped(user, sid)  # a gateway user's sessions are theirs alone (see ..tenancy)
        shared = self.plugin.states is not None and self.plugin.states.shared
        async with self.locks[sid]:
            if len(body) < THREAD_ABOVE_BYTES and not shared:
                return self._locked_transform(sid, api, payload, body)
            # a shared store's lock and queries wait on the network: never on the event loop
            return await anyio.to_thread.run_sync(self._locked_transform, sid, api, payload, body)

    def _locked_transform(self, sid: str, api: str, payload: dict[str, Any], body: bytes) -> Outgoing:
        """Hold the session against the other processes on the store, take it (reloaded when one of
        them served it since), and transform; the original bytes on any failure (I5)."""
        session: Session | None = None
        try:
            with session_lock(self.plugin.states, sid):
                session = self.plugin.session(sid)
                return transform(session, api, payload, body)
        except Exception as err:  # fail-open (I5): the host's own request goes out
            if session is not None:
                _count(session, "proxy", err)
            else:
                with on_surface("proxy"):
                    report(self.plugin.faults, "state", err, sid)
            return Outgoing(body)

    async def forward(self, request: HttpRequest, api: str, url: str, out: Outgoing) -> Response:
        """Send ``out`` to ``url`` and relay the answer (restored when ``out`` has a session)."""
        named = connection_tokens(request.headers.get("connection", ""))  # RFC 9110 7.6.1: hop-by-hop too
        headers = [
            (k, v)
            for k, v in request.headers.items()
            if k.lower() not in HOP_BY_HOP and k.lower() not in named
        ]
        headers.append(("accept-encoding", "identity"))
        client = self.clients[next(self._turn) % len(self.clients)]
        upstream = client.build_request(
            request.method, url, params=request.url.query or None, headers=headers, content=out.body
        )
        try:
            resp = await client.send(upstream, stream=True)
        except httpx.TimeoutException:
            return error_response(
                api, 504, f"lightmem2 proxy: upstream {url} timed out; check server.upstreamTimeoutS"
            )
        except httpx.HTTPError as err:
            log.warning("upstream %s unreachable: %s", url, type(err).__name__)
            return error_response(
                api, 502, f"lightmem2 proxy: cannot reach upstream {url} ({type(err).__name__})"
            )
        back = [(k, v) for k, v in resp.headers.multi_items() if k.lower() not in _DROP_BACK]
        kind = resp.headers.get("content-type", "")
        if out.session is None or resp.status_code >= 400 or api not in wire.NAMES:
            return _streaming(self._relay(resp, None, lambda: None), resp.status_code, back)
        session, values = out.session, out.values or {}
        if kind.startswith("text/event-stream"):
            rewriter = wire.get(api).stream(values)
            rewriter.on_error = session.fail.report
            recorded: list[bool] = []

            def done() -> None:
                if rewriter.usage and not recorded:
                    recorded.append(True)
                    record_usage(self.usage, session, api, rewriter.usage)

            return _streaming(self._relay(resp, rewriter, done), resp.status_code, back)
        try:
            raw = await resp.aread()
        finally:
            await resp.aclose()
        return Response(self._restore_json(api, raw, session, values), resp.status_code, headers=dict(back))

    def _restore_json(self, api: str, raw: bytes, session: Session, values: Mapping[str, str]) -> bytes:
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return raw
        if not isinstance(body, dict):
            return raw
        usage = body_usage(body)
        if usage is not None:
            record_usage(self.usage, session, api, usage)
        restore = wire.get(api).restore
        new = session.fail.run("restore", lambda: restore(body, values), body)
        if new == body:
            return raw
        return json_bytes(new)

    async def _relay(
        self, resp: httpx.Response, rewriter: StreamRewriter | None, done: Callable[[], None]
    ) -> AsyncIterator[bytes]:
        try:
            async for chunk in resp.aiter_bytes():
                data = rewriter.feed(chunk) if rewriter else chunk
                if data:
                    yield data
            if rewriter:
                tail = rewriter.finish()
                if tail:
                    yield tail
            done()
        finally:
            # a host that hangs up once it has the final event (measured: Codex 0.169 with gpt-5.5, now
            # and then) still had the call billed: the usage the stream carried is recorded anyway
            done()
            with anyio.CancelScope(shield=True):
                await resp.aclose()


def _streaming(body: AsyncIterator[bytes], status: int, headers: list[tuple[str, str]]) -> Response:
    response = StreamingResponse(body, status_code=status)
    for k, v in headers:
        response.headers.append(k, v)
    return response
