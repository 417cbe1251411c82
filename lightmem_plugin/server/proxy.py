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
import json
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import anyio
import xxhash
from starlette.requests import Request as HttpRequest
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send
from yarl import URL

from .. import wire
from ..errors import PayloadError
from ..faults import guard, on_surface, report
from ..pipeline import LightMem, Session
from ..security.tenancy import TOKEN_HEADER, scoped
from ..store import session_lock
from ..wire.anthropic import binding
from ..wire.rewrite import StreamRewriter, body_usage
from ..wire.sse import json_bytes, json_value
from .codex_compaction import CodexCompactions
from .identity import HEADER, session_identity
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


MAX_UPSTREAM_CONNECTIONS = 2048
UPSTREAM_IDLE_S = 60.0


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
    unsettled: bool = False
    """The session's bookkeeping of this call is still to run (:meth:`Session.settle`): the proxy runs
    it once the request is on its way upstream."""
    headers: tuple[tuple[str, str], ...] = ()
    """(header, token) pairs to add to the host's comma-separated header of that name (``anthropic-beta``
    naming the thinking-binding beta, :mod:`..wire.anthropic.binding`); none when the host's request
    goes out as it came."""


def with_token(headers: list[tuple[str, str]], name: str, token: str) -> list[tuple[str, str]]:
    """``headers`` with ``token`` in the comma-separated header ``name`` (lower case): the host's
    tokens kept in their order, ``token`` once, after them."""
    tokens = [t.strip() for k, v in headers if k.lower() == name for t in v.split(",") if t.strip()]
    rest = [(k, v) for k, v in headers if k.lower() != name]
    return [*rest, (name, ",".join(dict.fromkeys([*tokens, token])))]


def transform(
    session: Session, api: str, payload: dict[str, Any], body: bytes, settle: bool = True
) -> Outgoing:
    """Decode, run the session's pipeline, encode; the original bytes on any failure or no change.
    Without ``settle``, the call's bookkeeping is left for the caller (:attr:`Outgoing.unsettled`)."""
    with on_surface("proxy"):  # also when run in a worker thread, which does not inherit the context
        out = _transform(session, api, payload, body)
        if settle:
            session.settle()
        return replace(out, unsettled=session.unsettled)


def _transform(session: Session, api: str, payload: dict[str, Any], body: bytes) -> Outgoing:
    api_wire = wire.get(api)
    try:
        req = api_wire.decode(payload, session.codec_reuse)
    except PayloadError as err:
        session.fail.report("codec", err)
        return Outgoing(body, session, {})
    out = session.begin(req, request_key=f"{api}:{xxhash.xxh3_128_hexdigest(body)}", api=api)
    with guard("codec", on_error=session.fail.report) as caught:
        encoded = api_wire.encode(out, session.codec_reuse)
    if caught.error is not None:
        return Outgoing(body, session, {})
    values = dict(session.stabilizer.values())
    if api == "anthropic" and binding.wanted(session.cfg.stabilizer.thinkingBinding, encoded.get("model")):
        # from the first call on, so the parameter never changes within the session: history lightmem2
        # changed must not fail the prefix check of the thinking blocks after it (400 by default)
        encoded = binding.allow_drop(encoded)
        return Outgoing(json_bytes(encoded), session, values, headers=(("anthropic-beta", binding.BETA),))
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
    """The upstream client (pooled), the plugin, and a lock per session.

    Why aiohttp upstream: under load the proxy's own HTTP client was its largest cost (measured with
    httpx/httpcore at 100 streaming clients on 2 cores: the pool's per-request scan of every connection,
    the request head and body in two writes, one read per HTTP chunk); aiohttp parses in C, keeps idle
    connections in a per-host queue, writes a request in one go and hands over everything one read
    brought. Proxy settings from the environment (``HTTPS_PROXY``, ``NO_PROXY``) are honoured, looked
    up once per upstream origin (aiohttp's own ``trust_env`` does it in a worker thread on every call,
    and also adds ``.netrc`` credentials, which a host's own auth header then collides with); no
    cookie is kept between calls (they belong to the host, not to us). The session is created on first
    use, inside the server's event loop.
    """

    def __init__(self, plugin: LightMem) -> None:
        self.plugin = plugin
        self.usage = UsageBook()
        self.locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.codex = CodexCompactions(plugin)
        self._client: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str], tuple[URL | None, aiohttp.BasicAuth | None]] = {}

    def client(self) -> aiohttp.ClientSession:
        """The pooled upstream session (created in the running loop on first use)."""
        if self._client is None:
            self._client = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=MAX_UPSTREAM_CONNECTIONS, limit_per_host=0, keepalive_timeout=UPSTREAM_IDLE_S
                ),
                timeout=self.upstream_timeout(),
                trust_env=False,  # see env_proxy
                cookie_jar=aiohttp.DummyCookieJar(),
                skip_auto_headers=("User-Agent", "Content-Type"),  # only what the host sent
                auto_decompress=True,  # a provider that compresses anyway is decoded, not relayed as is
            )
        return self._client

    def upstream_timeout(self) -> aiohttp.ClientTimeout:
        """``server.upstreamTimeoutS`` as in force now: each upstream request reads it (the pooled
        client outlives config edits; measured before: the value of serve's first request held)."""
        timeout = self.plugin.config.server.upstreamTimeoutS
        return aiohttp.ClientTimeout(
            total=None, connect=timeout, sock_connect=min(timeout, 30.0), sock_read=timeout
        )

    async def aclose(self) -> None:
        """Close pooled upstream connections."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def prepare(
        self, api: str, body: bytes, headers: Mapping[str, str], user: str | None = None
    ) -> Outgoing:
        """The request to send upstream for a host request of ``api`` (by gateway ``user``, if any)."""
        try:
            payload = json_value(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return Outgoing(body)
        sid = session_identity(api, payload, headers) if isinstance(payload, dict) else None
        if sid is None:
            return Outgoing(body)
        sid = scoped(user, sid)  # a gateway user's sessions are theirs alone (see ..tenancy)
        shared = self.plugin.states is not None and self.plugin.states.shared
        async with self.locks[sid]:
            if len(body) < THREAD_ABOVE_BYTES and not shared:
                # the bookkeeping runs once the request is on its way (forward); the session's next
                # call, in this process alone, runs it first if it is still pending
                return self._locked_transform(sid, api, payload, body, settle=False)
            # a shared store's lock and queries wait on the network: never on the event loop
            return await anyio.to_thread.run_sync(self._locked_transform, sid, api, payload, body)

    def _locked_transform(
        self, sid: str, api: str, payload: dict[str, Any], body: bytes, settle: bool = True
    ) -> Outgoing:
        """Hold the session against the other processes on the store, take it (reloaded when one of
        them served it since), and transform; the original bytes on any failure (I5). With a store
        shared between processes the call settles before its lock is let go (another process may take
        the session next)."""
        session: Session | None = None

        def failed(step: str, err: BaseException) -> None:
            if session is not None:
                session.fail.report("proxy", err)
            else:  # the session could not be taken: its state's fault, in the plugin's sink
                with on_surface("proxy"):
                    report(self.plugin.faults, "state", err, sid)

        with guard("proxy", on_error=failed), session_lock(self.plugin.states, sid):
            session = self.plugin.session(sid)
            if api == "responses":
                payload, body = self._host_compaction(session, payload, body)
            try:
                return transform(session, api, payload, body, settle)
            finally:
                session.host_event = ""  # this call's only, also when it never began (a codec error)
        return Outgoing(body)  # fail-open (I5): the host's own request goes out

    def _host_compaction(
        self, session: Session, payload: dict[str, Any], body: bytes
    ) -> tuple[dict[str, Any], bytes]:
        """Codex's compaction (:mod:`.codex_compaction`): the history archived at its summarising
        request, lightmem2's note in its summary after it; the host's request as it came on any
        failure (I5, counted under ``host_compaction``)."""
        with on_surface("proxy"), guard("host_compaction", on_error=session.fail.report) as caught:
            changed, event = self.codex.prepare(session.id, payload)
            session.host_event = event
            if changed is not None:
                return changed, json_bytes(changed)
        if caught.error is not None:
            session.host_event = ""
        return payload, body

    async def _send_then_settle(
        self, method: str, url: URL, headers: list[tuple[str, str]], out: Outgoing
    ) -> aiohttp.ClientResponse:
        """:meth:`_send`, and the session's bookkeeping of the call (:meth:`Session.settle`) while the
        upstream works: the send runs until it waits for the answer, then the session settles."""
        if out.session is None or not out.unsettled:
            return await self._send(method, url, headers, out.body)
        sending = asyncio.ensure_future(self._send(method, url, headers, out.body))
        try:
            # two turns of the loop: the send writes the head and starts the task that writes the body
            # (aiohttp on Python < 3.12 schedules it; measured: settling after one turn held the body
            # back by the whole bookkeeping), which writes it; then the send waits for the answer
            for _ in range(2):
                await asyncio.sleep(0)
        except BaseException:  # the host left: no send without it
            sending.cancel()
            raise
        finally:
            out.session.settle()
        return await sending

    async def _send(
        self, method: str, url: URL, headers: list[tuple[str, str]], body: bytes
    ) -> aiohttp.ClientResponse:
        """The upstream's response head; one retry when a pooled connection turns out closed.

        Why retry: a server closes an idle keep-alive connection on its own clock (uvicorn after 5 s),
        and a request written at that moment finds the socket gone without a byte of answer
        (measured: a 502 now and then at 100 clients). The hosts' SDKs retry such a connection error
        themselves; doing it here, once, spares them the error and the wait.
        """
        client = self.client()
        via, via_auth = self.env_proxy(url)
        for attempt in (1, 2):
            try:
                return await client.request(
                    method,
                    url,
                    headers=headers,
                    data=body or None,
                    allow_redirects=False,
                    proxy=via,
                    proxy_auth=via_auth,
                    timeout=self.upstream_timeout(),
                )
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as err:
                if attempt == 2 or isinstance(err, aiohttp.ClientConnectorError):
                    raise
        raise AssertionError("unreachable")

    def env_proxy(self, url: URL) -> tuple[URL | None, aiohttp.BasicAuth | None]:
        """The HTTP(S) proxy the environment names for ``url`` (``HTTPS_PROXY``, ``NO_PROXY``), if any."""
        key = (url.scheme, url.host or "")
        if key not in self._proxies:
            try:
                self._proxies[key] = aiohttp.helpers.get_env_proxy_for_url(url)
            except LookupError:
                self._proxies[key] = (None, None)
        return self._proxies[key]

    async def forward(self, request: HttpRequest, api: str, url: str, out: Outgoing) -> Response:
        """Send ``out`` to ``url`` and relay the answer (restored when ``out`` has a session)."""
        named = connection_tokens(request.headers.get("connection", ""))  # RFC 9110 7.6.1: hop-by-hop too
        headers = [
            (k, v)
            for k, v in request.headers.items()
            if k.lower() not in HOP_BY_HOP and k.lower() not in named
        ]
        headers.append(("accept-encoding", "identity"))
        for name, token in out.headers:
            headers = with_token(headers, name, token)
        try:
            target = upstream_url(url, request.url.query)
            resp = await self._send_then_settle(request.method, target, headers, out)
        except TimeoutError:
            return error_response(
                api, 504, f"lightmem2 proxy: upstream {url} timed out; check server.upstreamTimeoutS"
            )
        except (aiohttp.ClientError, ValueError) as err:
            log.warning("upstream %s unreachable: %s", url, type(err).__name__)
            return error_response(
                api, 502, f"lightmem2 proxy: cannot reach upstream {url} ({type(err).__name__})"
            )
        finally:
            if out.session is not None:  # settled already, unless the send never started
                out.session.settle()
        back = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in resp.raw_headers
            if k.decode("latin-1").lower() not in _DROP_BACK
        ]
        kind = resp.headers.get("content-type", "")
        if out.session is None or resp.status >= 400 or api not in wire.NAMES:
            return _streaming(self._relay(resp, None, lambda: None), resp.status, back)
        session, values = out.session, out.values or {}
        if kind.startswith("text/event-stream"):
            rewriter = wire.get(api).stream(values)
            rewriter.on_error = session.fail.report
            recorded: list[bool] = []

            def done() -> None:
                if rewriter.usage and not recorded:
                    recorded.append(True)
                    record_usage(self.usage, session, api, rewriter.usage)

            return _streaming(self._relay(resp, rewriter, done), resp.status, back)
        try:
            raw = await resp.read()
        except (aiohttp.ClientError, TimeoutError) as err:
            resp.close()
            log.warning("upstream %s cut its answer: %s", url, type(err).__name__)
            return error_response(
                api, 502, f"lightmem2 proxy: upstream {url} cut its answer short ({type(err).__name__})"
            )
        resp.release()
        return Response(self._restore_json(api, raw, session, values), resp.status, headers=dict(back))

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
        self, resp: aiohttp.ClientResponse, rewriter: StreamRewriter | None, done: Callable[[], None]
    ) -> AsyncIterator[bytes]:
        """The upstream body as it arrives: what one read brought is one chunk (restored by ``rewriter``).

        An upstream that cuts its stream ends ours the same way (StreamCut: the connection to the host
        is dropped, so it sees a cut stream, never a clean end of a truncated answer).
        """
        complete = False
        try:
            try:
                async for chunk in resp.content.iter_any():
                    data = rewriter.feed(chunk) if rewriter else chunk
                    if data:
                        yield data
            except (aiohttp.ClientError, TimeoutError) as err:
                log.warning("upstream %s cut its stream: %s", resp.url, type(err).__name__)
                raise StreamCut(str(resp.url)) from None
            if rewriter:
                tail = rewriter.finish()
                if tail:
                    yield tail
            complete = True
            done()
        finally:
            # a host that hangs up once it has the final event (measured: Codex 0.169 with gpt-5.5, now
            # and then) still had the call billed: the usage the stream carried is recorded anyway
            done()
            if complete:
                resp.release()  # read to the end: the connection goes back to the pool
            else:
                resp.close()  # the host left (or the upstream cut): closing cancels the provider call


class StreamCut(Exception):
    """The upstream ended its stream early; the host's connection is dropped the same way."""


def upstream_url(url: str, query: str) -> URL:
    """``url`` (path percent-encoded) with the host's query string exactly as it was sent."""
    base = str(URL(url))
    return URL(f"{base}?{query}" if query else base, encoded=True)


class _Relayed(StreamingResponse):
    """A streamed answer whose upstream may cut it: then the host's connection is dropped, no traceback."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except StreamCut:
            return  # the server closes the connection of a response left incomplete (one log line)


def _streaming(body: AsyncIterator[bytes], status: int, headers: list[tuple[str, str]]) -> Response:
    response = _Relayed(body, status_code=status)
    for k, v in headers:
        response.headers.append(k, v)
    return response
