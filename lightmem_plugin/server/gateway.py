"""A team gateway's users: who a request is (its token), and the routes that show a user their own work.

With ``gateway.users`` set, every ``/v1`` and ``/u`` request must carry its user's token in
``x-lightmem2-token`` (see :mod:`~.security.tenancy`): without it, or with a token no user has, the
answer is a 401 in the provider's error shape and nothing reaches the provider. The token header is
never forwarded; the provider's own key is, untouched, and is never stored. With no users (the loopback
default) nothing changes: requests need no token and the routes below answer 404.

Routes for a user (token required; JSON; another user's session or key is 404, as an unknown one is):

``GET /lightmem2/v1/sessions``
    ``{"user", "sessions": [{"session", "calls", "mode", "inputTokens", "baselineTokens"}]}``: the
    user's sessions the ledger holds, as the user names them, in the order they started.
``GET /lightmem2/v1/report?session=ID[&format=json]``
    ``{"text"}`` (or ``{"report"}``: the JSON of ``lightmem2 report --json``) for one of the user's
    sessions.
``POST /lightmem2/v1/recover``
    ``{"key", "lines"?: "A:B"}`` -> ``{"text"}``: an archived original one of the user's sessions made.
``POST /lightmem2/v1/search``
    ``{"query", "limit"?: 10, "regex"?: false}`` -> ``{"hits": [{"key", "line", "excerpt", "score",
    "recover"}]}``: lines of the user's archived originals.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import AccessDenied, ArtifactNotFound, LightMemError, StoreUnavailable
from ..pipeline import LightMem
from ..security import tenancy
from ..views.report import session_data, session_text
from ..views.search import hit_dict
from .proxy import Proxy, TooLarge, read_body

PREFIX = "/lightmem2/v1"
_FIX = (
    "send your token in the x-lightmem2-token header (Claude Code: ANTHROPIC_CUSTOM_HEADERS; Codex: "
    "env_http_headers of the model provider); an admin creates one with `lightmem2 gateway add-user NAME`"
)


class Gate:
    """Decides who a request is, from ``gateway.users`` of the plugin's config (read per request, so an
    added or removed user takes effect without a restart)."""

    def __init__(self, plugin: LightMem) -> None:
        self.plugin = plugin

    @property
    def enabled(self) -> bool:
        """True when the config lists users: every request must then name one."""
        return bool(self.plugin.config.gateway.users)

    def user(self, headers: Mapping[str, str]) -> str | None:
        """The request's user; None when there are no users (the loopback default); else AccessDenied
        (401) for a missing or unknown token."""
        users = self.plugin.config.gateway.users
        if not users:
            return None
        presented = headers.get(tenancy.TOKEN_HEADER)
        if not presented:
            raise AccessDenied(
                f"missing x-lightmem2-token header: this gateway serves named users; {_FIX}", 401
            )
        name = tenancy.authenticate(users, presented)
        if name is None:
            raise AccessDenied(f"x-lightmem2-token is not a token of any user of this gateway; {_FIX}", 401)
        return name


class NotFound(Exception):
    """Unknown to this user (whether it exists for another one is not said)."""


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def gateway_routes(get_proxy: Callable[[], Proxy], gate: Gate) -> list[Route]:
    """The user routes (see the module docstring), bound to the app's proxy and gate."""

    def user_route(
        work: Callable[[LightMem, str, Request, dict[str, Any]], Any],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def route(request: Request) -> Response:
            if not gate.enabled:
                return _error(
                    404,
                    f"{request.url.path}: this server has no gateway.users, so it has no per-user routes; "
                    "on one machine use the lightmem2 CLI (recover, search, report)",
                )
            try:
                user = gate.user(request.headers)
                assert user is not None
                body: dict[str, Any] = {}
                if request.method == "POST":
                    body = await _json_body(request, get_proxy())
                _no_nul(request, body)
                plugin = get_proxy().plugin
                answer = await anyio.to_thread.run_sync(work, plugin, user, request, body)
            except AccessDenied as err:
                return _error(err.status, str(err))
            except NotFound as err:
                return _error(404, str(err))
            except ValueError as err:
                return _error(400, str(err))
            except StoreUnavailable as err:  # the shared database is down: the outage, not our fault
                return _error(503, str(err))
            except LightMemError as err:
                return _error(400 if err.exit_code == 2 else 500, str(err))
            return JSONResponse(answer)

        return route

    def sessions(plugin: LightMem, user: str, request: Request, body: dict[str, Any]) -> Any:
        ledger = plugin.ledger
        mine: list[dict[str, Any]] = []
        for stored in ledger.sessions() if ledger is not None else []:
            name = tenancy.own_view(user, stored)
            if name is None:
                continue
            t = ledger.totals(stored)  # type: ignore[union-attr]
            mine.append(
                {
                    "session": name,
                    "calls": t.calls,
                    "mode": t.mode,
                    "inputTokens": t.input_tokens,
                    "baselineTokens": t.baseline_tokens,
                }
            )
        return {"user": user, "sessions": mine}

    def report(plugin: LightMem, user: str, request: Request, body: dict[str, Any]) -> Any:
        sid = request.query_params.get("session", "")
        if not sid:
            raise ValueError("missing ?session=ID; list yours with GET /lightmem2/v1/sessions")
        calls = plugin.ledger.calls(tenancy.scoped(user, sid)) if plugin.ledger is not None else []
        if not calls:
            raise NotFound(f"no session {sid[:80]!r} of yours; list yours with GET /lightmem2/v1/sessions")
        if request.query_params.get("format") == "json":
            return {"report": session_data(sid, calls)}
        return {"text": session_text(sid, calls)}

    def recover(plugin: LightMem, user: str, request: Request, body: dict[str, Any]) -> Any:
        key = _str(body, "key")
        lines = _str(body, "lines", required=False)
        if not plugin.registry.owns(user, key):
            raise NotFound(f"no artifact {key[:60]!r} of yours; check the key in the stub")
        try:
            return {"text": plugin.registry.recover(key, lines)}
        except ArtifactNotFound:
            raise NotFound(f"no artifact {key[:60]!r} of yours; check the key in the stub") from None

    def search(plugin: LightMem, user: str, request: Request, body: dict[str, Any]) -> Any:
        query = _str(body, "query")
        limit = body.get("limit", 10)
        if not isinstance(limit, int) or not 1 <= limit <= 50:
            raise ValueError(f"limit: got {json.dumps(limit)[:40]}, expected a number of hits from 1 to 50")
        owned = plugin.registry.owned(user)
        with plugin.searching() as index:  # with store.url the fleet's one, every process fills it
            # the user's archives it lacks: archived by another process (embedded store: each process
            # has its own file), before the index existed, or when indexing failed open
            index.ensure(plugin.registry, owned)
            hits = index.search(query, regex=body.get("regex") is True, limit=limit, within=owned)
        return {"hits": [hit_dict(h) for h in hits]}

    return [
        Route(PREFIX + "/sessions", user_route(sessions), methods=["GET"]),
        Route(PREFIX + "/report", user_route(report), methods=["GET"]),
        Route(PREFIX + "/recover", user_route(recover), methods=["POST"]),
        Route(PREFIX + "/search", user_route(search), methods=["POST"]),
    ]


def _no_nul(request: Request, body: dict[str, Any]) -> None:
    """A NUL in a parameter is a bad request (400): no session id, key or query holds one, and a
    database refuses it in text (measured before: 500 "the store may be unreachable")."""
    values = [*request.query_params.items(), *((k, v) for k, v in body.items() if isinstance(v, str))]
    for name, value in values:
        if "\x00" in value:
            raise ValueError(f"{name}: {value[:60]!r} holds a NUL character; send the value as listed")


def _str(body: dict[str, Any], name: str, required: bool = True) -> Any:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name}: got {json.dumps(value)[:60]}, expected a non-empty string")
    return value


async def _json_body(request: Request, proxy: Proxy) -> dict[str, Any]:
    try:
        body = json.loads(await read_body(request, proxy.plugin.config.server.maxRequestBytes))
    except TooLarge as err:
        raise ValueError(f"body is {err.size} bytes, over server.maxRequestBytes; send less") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"body is not JSON ({err}); send a JSON object") from None
    if not isinstance(body, dict):
        raise ValueError("body: expected a JSON object")
    return body
