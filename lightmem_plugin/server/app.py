"""The ASGI app of ``lightmem2 serve``: provider routes, a health route and the OpenClaw sidecar.

Routes (hosts point their SDK base URL here; upstreams come from ``server.upstreams``): each wire API
declares the paths it serves (``routes`` of its :class:`~lightmem_plugin.wire.base.WireApi`: today
``POST /v1/messages`` and ``/v1/messages/count_tokens`` to the Anthropic upstream, ``POST
/v1/responses`` and ``/v1/chat/completions`` to the OpenAI one, the OpenAI two also under ``POST
/u/<name>/v1/...`` to ``server.upstreams.named[<name>]``), and this app adds what no API owns:

====================================  =====================================================
``* /v1/<anything else>``              passed through (Anthropic when ``anthropic-version`` is sent)
``* /u/<name>/v1/<anything else>``     passed through to the named upstream
``GET /healthz``                       ``{"status": "ok", ...}``; ``"degraded"`` and a ``"reason"`` while
                                       ``store.url``'s database does not answer (calls pass through)
``/sidecar/...``                       the OpenClaw plugin's routes (see :mod:`.sidecar`)
``/lightmem2/v1/...``                  a gateway user's sessions, report, recover, search (:mod:`.gateway`)
====================================  =====================================================

Who may call (see :mod:`.guard`): every route answers only to a loopback ``Host`` name (proxy routes
to any name with ``--allow-remote``); ``/sidecar`` routes also need the per-install secret, JSON bodies
and no ``Origin``. Proxy routes need no secret: the host's own traffic carries the user's API key and
they never return archived content. With ``gateway.users`` set (a team gateway), proxy and user routes
need the user's token (:mod:`.gateway`), and each user's sessions and archives are their own.

Why a size limit: the proxy buffers a request to transform it, so a runaway client must not exhaust
memory; a body over ``server.maxRequestBytes`` gets a 413 in the provider's error shape, naming the key.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from urllib.parse import unquote

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from yarl import URL

from .. import wire
from .._version import __version__
from ..errors import AccessDenied
from ..faults import on_surface
from ..hookspec import LineRunner
from ..pipeline import LightMem
from ..store import store_trouble
from ..wire import WireRoute
from .chat_commands import CommandRunner
from .gateway import Gate, gateway_routes
from .guard import LoopbackHost, SidecarGuard
from .memory import Busy, InFlight, sweep_idle
from .proxy import Outgoing, Proxy, TooLarge, error_response, read_body
from .sidecar import sidecar_routes


def create_app(
    plugin: LightMem | None = None,
    allow_remote: bool = False,
    secret: str | None = None,
    commands: LineRunner | None = None,
) -> Starlette:
    """The proxy app for ``plugin`` (default: one that follows the user's config file).

    ``allow_remote`` lets proxy routes answer under any ``Host`` name (never the sidecar, see
    :mod:`.guard`). ``secret`` replaces the per-install sidecar secret (default: the data dir's file,
    created on first use). ``commands`` answers ``/sidecar/command`` (``lightmem2 serve`` passes
    :func:`lightmem_plugin.commands.table.run_remote_line`); without it that route says it is not
    wired (503) and every other route works.
    """
    lm = plugin or LightMem.from_config()
    holder: dict[str, Proxy] = {}
    busy = Busy()  # requests in flight: serve trims memory when none is
    guard = SidecarGuard(secret=secret)
    gate = Gate(lm)
    runner = CommandRunner(commands, sink=lm.faults)

    def proxy() -> Proxy:
        if "p" not in holder:
            holder["p"] = Proxy(lm)
        return holder["p"]

    async def handle(request: Request, api: str, url: str, transform: bool) -> Response:
        try:
            user = gate.user(request.headers)  # None: the single loopback user (no gateway.users)
        except AccessDenied as err:
            return error_response(api, err.status, str(err))
        limit = lm.config.server.maxRequestBytes
        try:
            body = await read_body(request, limit)
        except ClientDisconnect:
            return Response(status_code=499)  # the client left mid-upload: nothing to answer
        except TooLarge as err:
            return error_response(
                api,
                413,
                f"request body is {err.size} bytes, over server.maxRequestBytes={limit}; "
                "raise server.maxRequestBytes in the lightmem2 config or send a smaller request",
            )
        p = proxy()
        with on_surface("proxy"):
            out = await p.prepare(api, body, request.headers, user) if transform else Outgoing(body)
            return await p.forward(request, api, url, out)

    def openai_base(request: Request) -> str | None:
        name = request.path_params.get("name")
        ups = lm.config.server.upstreams
        base = ups.openai if name is None else ups.named.get(str(name))
        return base.rstrip("/") if base else None

    def wire_route(api: str, route: WireRoute) -> Callable[[Request], Awaitable[Response]]:
        """The handler of one route an API declares: its upstream's base, then the API's path."""

        async def serve(request: Request) -> Response:
            if route.upstream == "anthropic":
                base: str | None = lm.config.server.upstreams.anthropic.rstrip("/")
            else:
                base = openai_base(request)
                if base is None:
                    return unknown_upstream(request, api)
            return await handle(request, api, f"{base}{route.upstream_path}", route.transform)

        return serve

    async def other(request: Request) -> Response:
        rest = request.path_params["rest"]
        anthropic = "name" not in request.path_params and "anthropic-version" in request.headers
        api = "anthropic" if anthropic else "chat"
        if anthropic:
            base = lm.config.server.upstreams.anthropic.rstrip("/") + "/v1"
        else:
            found = openai_base(request)
            if found is None:
                return unknown_upstream(request, "chat")
            base = found
        if escapes_base(base, rest):
            return error_response(
                api,
                400,
                f"path segment '.' or '..' in /v1/{rest[:80]!s} (percent-encoded or not); send the "
                "provider path itself (lightmem2 never forwards outside the upstream's base URL)",
            )
        return await handle(request, api, f"{base}/{rest}", False)

    def unknown_upstream(request: Request, api: str) -> Response:
        """404 naming the one asked for; the configured names are not listed (measured before: any
        caller, signed in or not, learned every named upstream of a gateway from one bad request)."""
        name = str(request.path_params.get("name"))[:80]
        return error_response(
            api,
            404,
            f"unknown upstream {name!r}; the names this server forwards to are in its config's "
            "server.upstreams.named (`lightmem2 config show` on that machine); add it there",
        )

    async def healthz(request: Request) -> Response:
        body: dict[str, object] = {"status": "ok", "version": __version__, "sessions": len(lm.sessions)}
        if getattr(lm.states, "shared", False):  # a shared database may not answer: never on the loop
            trouble = await anyio.to_thread.run_sync(store_trouble, lm.states)
            if trouble is not None:  # still 200: the proxy serves, passing calls through unreduced
                body.update(status="degraded", reason=trouble)
        return JSONResponse(body)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        proxy()
        sweeper = asyncio.get_running_loop().create_task(sweep_idle(lm, busy))
        try:
            yield
        finally:
            sweeper.cancel()
            lm.settle()  # the last calls' ledger rows and saved state
            runner.close()
            if "p" in holder:
                await holder.pop("p").aclose()

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        *(Route(r.path, wire_route(w.name, r), methods=["POST"]) for w in wire.WIRES for r in w.routes),
        *(
            Route("/u/{name}" + r.path, wire_route(w.name, r), methods=["POST"])
            for w in wire.WIRES
            for r in w.routes
            if r.named
        ),
        Route("/u/{name}/v1/{rest:path}", other, methods=methods),
        *sidecar_routes(lambda: proxy(), guard, runner),
        *gateway_routes(lambda: proxy(), gate),
        Route("/v1/{rest:path}", other, methods=methods),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(LoopbackHost, allow_remote=allow_remote), Middleware(InFlight, busy=busy)],
    )
    app.state.proxy = proxy
    app.state.guard = guard
    return app


DECODE_ROUNDS = 8
"""How many layers of percent-encoding :func:`escapes_base` peels (a path still encoded after that many
is refused: no client encodes a provider path that deeply)."""


def escapes_base(base: str, rest: str) -> bool:
    """True when forwarding ``rest`` under ``base`` could leave the upstream's base URL.

    Starlette hands ``rest`` decoded once, and the URL builder (yarl) decodes and resolves dot segments
    again, so ``/v1/%252e%252e/%252e%252e/admin`` reached the upstream as ``/admin`` (measured before
    this: the check looked at the path after one decode only). So: ``rest`` is decoded until it no longer
    changes, backslashes count as slashes, and any ``.`` or ``..`` segment is refused, however it was
    spelled; and the URL as it will be sent must still lie under ``base`` (in case a builder resolves
    something this check did not foresee).
    """
    decoded = rest
    for _ in range(DECODE_ROUNDS):
        once = unquote(decoded)
        if once == decoded:
            break
        decoded = once
    else:
        return True
    if any(seg in (".", "..") for seg in decoded.replace("\\", "/").split("/")):
        return True
    root = URL(base).path.rstrip("/") + "/"
    return not URL(f"{base.rstrip('/')}/{rest}").path.startswith(root)


def proxy_of(app: Starlette) -> Proxy:
    """The running app's :class:`Proxy` (its plugin, session locks and usage book)."""
    get: Callable[[], Proxy] = app.state.proxy
    return get()
