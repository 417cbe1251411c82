"""Sidecar routes for the OpenClaw JS plugin: JSON over loopback HTTP, one route per plugin hook.

Why a sidecar: OpenClaw plugins are JS only, so the thin JS plugin forwards each hook to this Python
process, which owns the sessions, the registry and the ledger. Every route answers JSON; a bad body is a
400 ``{"error": "..."}`` naming the field; a pipeline failure never fails the call (I5): the route
answers with what it was given.

Who may call. Loopback is shared with every local user and every web page, and these routes serve
archived outputs and change the config, so each request passes, in this order (:mod:`.guard`):

* ``Host`` must be a loopback name (``127.0.0.1``, ``localhost``, ``[::1]``, any port), even under
  ``--allow-remote``: else 403 (DNS rebinding).
* no ``Origin`` header (only web pages send one): else 403.
* ``X-Lightmem2-Secret: <per-install secret>``: missing 401, wrong 403. The secret is the content of
  ``<data dir>/sidecar.secret`` (0600 in a 0700 dir, created once; ``lightmem2 config secret-path``
  prints the path, which is how the plugin finds it; :mod:`.secret`). Only the bare health probe
  answers without it.
* POST bodies must be ``Content-Type: application/json``: else 415 (a page can send ``text/plain``
  without a CORS preflight).

A refusal is ``{"error"}`` only: what was wrong and the fix, nothing else.

``POST /sidecar/assemble``
    ``{"sessionId", "messages", "tools"?, "format"?: "openai" | "anthropic", "system"?, "wholeTurn"?,
    "api"?: "anthropic" | "chat" | "responses", "model"?, "tokenBudget"?, "prompt"?}`` -> ``{"messages",
    "collapsed"?, "thinking"?, "system"?}``. The
    message list the model should see (reduced tool outputs, stable head, tail block). ``format`` names
    the message form: OpenAI chat (default) or Anthropic (``system`` then is the top-level system
    prompt, echoed back transformed). ``api`` names the wire API of the host's provider, whose cache
    prices an eviction batch (:mod:`lightmem_plugin.eviction.break_cost`; the Anthropic form implies
    ``anthropic``, the OpenAI form without it a prefix cache). In OpenAI
    form the answer has one message per message sent, except where a finished task left the context
    (aggressive mode): ``collapsed`` then lists those ranges of the sent ``messages``, ascending, as
    ``{"first", "last"}`` (inclusive indices), and each range is one assistant message in the answer
    (its summary, at the range's place), so the answer is shorter by ``last - first`` per range.
    Without ``collapsed`` the answer maps message for message. ``model`` (the host's model id) tells
    whether the model binds each thinking block to its prefix (:mod:`lightmem_plugin.wire.anthropic.binding`);
    ``thinking`` then lists the ranges ``{"start", "end"}`` (end exclusive, indices of the sent
    ``messages``) whose assistant messages the host must send without their thinking blocks: those
    produced before a change lightmem2 made to the past (a batch, a deferred reduction, a compaction)
    and after the first message it changed, which the provider would reject, and the answers a
    compaction left behind on any model. The chat form carries no thinking, so the host drops them.
    ``tokenBudget`` (OpenClaw's budget for the messages, from its model's window) is the threshold
    aggressive mode compacts under (:func:`lightmem_plugin.eviction.compacting.threshold`). ``prompt``
    (the turn's prompt, which OpenClaw sends after this history) is read for whether it sets a new
    goal, which closes the running task at this call (a cold start's free break); the answer never
    carries it.
``POST /sidecar/ingest`` and ``POST /sidecar/toolResult``
    ``{"sessionId", "toolCallId", "output", "toolName"?, "arguments"?}`` -> ``{"output"}``. A tool output
    as the model will see it, reduced once (memoised, I3). ``output`` is a string or a list of
    ``{"type": "text", "text"}`` parts; the tool's name and arguments (JSON text) tell its kind, and
    what must pass verbatim (:mod:`lightmem_plugin.reduction.verbatim`).
``POST /sidecar/afterTurn``
    ``{"sessionId", "response"?, "usage"?, "api"?: "openai" | "anthropic" | "responses"}`` ->
    ``{"response", "recorded"}``. Placeholders restored in the model's reply (a string or a chat-form
    message); ``usage`` (the provider's object, read as ``api``) is recorded.
    A whole turn instead: ``{"sessionId", "turn": [chat messages], "calls": [{"at", "usage"}], "api"}``
    -> ``{"recorded": N}``: one ledger row per model call the host made in the turn it assembled with
    ``wholeTurn`` (call k received the assembled history plus ``turn[:at]``, and reported ``usage``).
``POST /sidecar/command``
    ``{"text": "/lightmem2 mode aggressive"}`` -> ``{"text"}``: the slash command's answer, no LLM call.
    Only chat-safe commands and options run (:mod:`lightmem_plugin.commands._chat_policy`: status,
    report, doctor, mode, recover, search, resume without ``--trace``, export, visual without
    ``--out``/``--open``, config path|show|validate); one that names a file or starts something is a
    403 ``{"error"}`` saying to run it in a terminal. Commands run in a small thread pool: 504 after
    ``server.commandTimeoutS``, 503 while every worker is busy (or when the server was started without
    the command table), text cut at ``server.commandMaxChars``; ``/healthz`` and ``/v1`` never wait.
``POST /sidecar/search``
    ``{"query": "...", "limit": 10}`` -> ``{"text"}``: ranked hits over every archived output (the
    ``lightmem2_search`` tool), bounded to 4,000 chars.
``POST /sidecar/recover``
    ``{"key", "lines"?: "A:B"}`` -> ``{"text"}``: an archived original (404 for an unknown key).
``POST /sidecar/precompact``
    ``{"sessionId", "messages"}`` -> ``{"archived", "indexed", "conversation"}``: before OpenClaw
    compacts, the history (chat form) is archived for search: outputs kept whole, the conversation as
    one document (key ``conversation``) (:mod:`.sidecar_compaction`).
``POST /sidecar/compacted``
    ``{"sessionId", "summary", "conversation"?}`` -> ``{"note"}``: what to add to the compaction
    summary: the session record and how to search and recover; the same bytes for the same summary.
``GET /sidecar/health``
    Without the secret ``{"status": "ok"}`` only; with it also ``version``, ``mode``, ``sessions``.
    ``X-Lightmem2-Challenge: <nonce>`` adds ``proof`` = hex HMAC-SHA256(secret, nonce): the plugin
    checks it before sending the secret or any message, so a process squatting the port gets neither.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse as StarletteJSONResponse
from starlette.responses import Response
from starlette.routing import Route

from .. import wire
from .._version import __version__
from ..errors import AccessDenied, ArtifactNotFound, LightMemError
from ..eviction.thinking import stale_ranges
from ..faults import guard, on_surface
from ..model import Message, TextPart
from ..pipeline import Session
from ..reduction.kinds import ToolCall
from ..store import session_lock
from ..store.registry import KEY_RE
from ..views.search import bounded
from ..views.search import run as search_text
from ..wire.anthropic import binding
from ..wire.sse import json_bytes
from . import sidecar_compaction as _compaction
from .chat_commands import CommandRunner
from .guard import SidecarGuard
from .proxy import Proxy, TooLarge, read_body
from .secret import CHALLENGE_HEADER, proof
from .usage import record_usage

JSON = dict[str, Any]
_USAGE_API = {"openai": "chat", "chat": "chat", "anthropic": "anthropic", "responses": "responses"}


class BadRequest(Exception):
    """A sidecar body that does not fit the route (the message names the field)."""


def _field(body: JSON, name: str, kind: type, required: bool = True) -> Any:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, kind):
        raise BadRequest(f"{name}: got {json.dumps(value)[:60]}, expected a {kind.__name__}")
    return value


def _budget(body: JSON) -> int | None:
    """``tokenBudget``: the tokens OpenClaw allows the messages before it compacts (its model's window
    less its reserve and the prompt), or None when not sent."""
    value = body.get("tokenBudget")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 1:
        raise BadRequest(f"tokenBudget: got {json.dumps(value)[:60]}, expected a positive number of tokens")
    return int(value)


def _assemble(session: Session, body: JSON) -> JSON:
    session.respelled_ids = True  # OpenClaw: see Session.respelled_ids
    session.host = "openclaw"  # its compaction threshold (eviction.compacting)
    session.evictor.host_budget = _budget(body)
    prompt = _field(body, "prompt", str, required=False)  # the turn's prompt, which follows this history
    session.evictor.upcoming = Message("user", [TextPart(prompt)]) if prompt and prompt.strip() else None
    messages = _field(body, "messages", list)
    tools = _field(body, "tools", list, required=False)
    # the wire API of the host's provider: its cache prices an eviction's break
    api = _field(body, "api", str, required=False)
    if api is not None and api not in wire.NAMES:
        raise BadRequest(f"api: got {json.dumps(api)[:60]}, expected one of {', '.join(wire.NAMES)}")
    if body.get("format", "openai") == "openai":
        whole_turn = body.get("wholeTurn") is True  # the host makes the turn's calls: /afterTurn reports them
        sent = session.before_model_call(messages, tools=tools, whole_turn=whole_turn, api=api)
        answer: JSON = {"messages": sent}
        ranges = session.evictor.collapsed
        # only when the answer is exactly the sent list with each range made one message (a call that
        # failed open after the collapse sends the messages back whole)
        if ranges and len(sent) == len(messages) - sum(last - first for first, last in ranges):
            answer["collapsed"] = [{"first": first, "last": last} for first, last in ranges]
        model = _field(body, "model", str, required=False)
        binds = binding.wanted(session.cfg.stabilizer.thinkingBinding, model)
        stale = stale_ranges(session.evictor.state, binds)
        if stale:  # answers whose thinking would fail (or a compaction left behind): sent without it
            answer["thinking"] = [
                {"start": a, "end": min(b, len(messages))} for a, b in stale if a < len(messages)
            ]
        return answer
    if body.get("format") != "anthropic":
        raise BadRequest(
            f'format: got {json.dumps(body.get("format"))[:60]}, expected "openai" or "anthropic"'
        )
    from ..wire.anthropic import codec as anthropic

    payload: JSON = {"messages": messages}
    for key in ("system", "tools"):
        if body.get(key) is not None:
            payload[key] = body[key]
    with guard("codec", on_error=session.fail.report) as caught:
        req = anthropic.decode_request(payload)
        encoded = anthropic.encode_request(session.process(req, api=api or "anthropic"))
    if caught.error is not None:  # fail-open (I5): the host gets its own messages back
        return {"messages": messages, "system": body.get("system"), "error": str(caught.error)[:300]}
    out: JSON = {"messages": encoded.get("messages", messages)}
    if "system" in body:
        out["system"] = encoded.get("system")
    return out


def _ingest(session: Session, body: JSON) -> JSON:
    call_id = _field(body, "toolCallId", str)
    output = body.get("output")
    name = _field(body, "toolName", str, required=False)
    call = ToolCall(name, _field(body, "arguments", str, required=False) or "") if name else None
    session.respelled_ids = True  # OpenClaw: see Session.respelled_ids
    if isinstance(output, str):
        return {"output": session.ingest_tool_result(call_id, output, call)}
    if isinstance(output, list):
        parts = []
        for i, part in enumerate(output):
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                part = {
                    **part,
                    "text": session.ingest_tool_result(
                        f"{call_id}#{i}" if i else call_id, part["text"], call
                    ),
                }
            parts.append(part)
        return {"output": parts}
    raise BadRequest(f"output: got {json.dumps(output)[:60]}, expected a string or a list of text parts")


class JSONResponse(StarletteJSONResponse):
    """A JSON answer that stays valid UTF-8 when a string holds a lone surrogate (sent as ``\\ud800``).

    Why: OpenClaw (JavaScript) strings may hold lone surrogates, and JSON escapes them; Python decodes
    them to str and Starlette's UTF-8 encoding then failed, so the plugin got a 500 for its own text
    (measured on ``/sidecar/ingest``). Escaped again, the plugin reads back the very string it sent.
    """

    def render(self, content: Any) -> bytes:
        return json_bytes(content)


def sidecar_routes(get_proxy: Callable[[], Proxy], guard: SidecarGuard, runner: CommandRunner) -> list[Route]:
    """The sidecar routes, bound to the app's proxy (its plugin, session locks and usage book).

    Every route but the bare health probe passes ``guard`` first (no Origin, the secret, JSON bodies);
    ``runner`` runs chat commands off the event loop.
    """

    def guarded(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def route(request: Request) -> Response:
            try:
                guard.check(request.method, request.headers)
            except AccessDenied as err:
                return JSONResponse({"error": str(err)}, status_code=err.status)
            return await handler(request)

        return route

    def session_route(
        work: Callable[[Proxy, Session, JSON], JSON],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def route(request: Request) -> Response:
            proxy = get_proxy()
            try:
                body = await _body(request, proxy)
                sid = _unicode(_field(body, "sessionId", str), "sessionId")
                with on_surface("sidecar"):
                    async with proxy.locks[sid]:
                        with session_lock(proxy.plugin.states, sid):  # against other processes too
                            session = proxy.plugin.session(sid)
                            return JSONResponse(work(proxy, session, body))
            except BadRequest as err:
                return JSONResponse({"error": str(err)}, status_code=400)

        return guarded(route)

    def after_turn(proxy: Proxy, session: Session, body: JSON) -> JSON:
        api = _USAGE_API.get(str(body.get("api", "openai")), "chat")
        if "turn" in body:
            return _turn(proxy, session, body, api)
        usage = body.get("usage")
        usage = usage if isinstance(usage, dict) else None
        response = session.after_model_call(body.get("response"), usage=usage)  # restores, writes the ledger
        if usage is not None:
            record_usage(proxy.usage, session, api, usage, to_ledger=False)
        return {"response": response, "recorded": usage is not None}

    def _turn(proxy: Proxy, session: Session, body: JSON, api: str) -> JSON:
        turn = _field(body, "turn", list)
        calls: list[tuple[int, JSON]] = []
        for i, call in enumerate(_field(body, "calls", list)):
            if not (
                isinstance(call, dict)
                and isinstance(call.get("at"), int)
                and isinstance(call.get("usage"), dict)
            ):
                raise BadRequest(
                    f'calls[{i}]: got {json.dumps(call)[:60]}, expected {{"at": N, "usage": {{...}}}}'
                )
            calls.append((call["at"], call["usage"]))
        rows = session.record_turn(turn, calls, api)
        for _at, usage in calls:
            record_usage(proxy.usage, session, api, usage, to_ledger=False)
        return {"recorded": rows}

    @guarded
    async def command(request: Request) -> Response:
        proxy = get_proxy()
        try:
            text = _field(await _body(request, proxy), "text", str)
        except BadRequest as err:
            return JSONResponse({"error": str(err)}, status_code=400)
        server = proxy.plugin.config.server
        status, answer = await runner.run(text, server.commandTimeoutS, server.commandMaxChars)
        return JSONResponse(answer, status_code=status)

    async def threaded(request: Request, job: Callable[[JSON], Callable[[], JSON]]) -> Response:
        """``job`` reads the request's body (a :class:`BadRequest` is a 400) and gives the work, run off
        the event loop, whose JSON is the answer; an unknown artifact is a 404, a usage error a 400,
        any other lightmem2 error a 500 (the plugin carries on without the answer, I5)."""
        try:
            work = job(await _body(request, get_proxy()))
            with on_surface("sidecar"):
                return JSONResponse(await anyio.to_thread.run_sync(work))
        except BadRequest as err:
            return JSONResponse({"error": str(err)}, status_code=400)
        except ArtifactNotFound as err:
            return JSONResponse({"error": str(err)}, status_code=404)
        except LightMemError as err:
            return JSONResponse({"error": str(err)}, status_code=400 if err.exit_code == 2 else 500)

    def recovering(body: JSON) -> Callable[[], JSON]:
        key = _field(body, "key", str)
        lines = _field(body, "lines", str, required=False)
        registry = get_proxy().plugin.registry
        return lambda: {"text": registry.recover(key, lines)}

    def searching(body: JSON) -> Callable[[], JSON]:
        query = _unicode(_field(body, "query", str), "query")
        limit = min(int(_field(body, "limit", int, required=False) or 10), 20)

        def find() -> JSON:
            with get_proxy().plugin.searching() as index:  # the stores' index
                return {"text": bounded(search_text(index, query, None, True, False, limit))}

        return find

    def precompacting(body: JSON) -> Callable[[], JSON]:
        sid = _unicode(_field(body, "sessionId", str), "sessionId")
        messages = _field(body, "messages", list)
        plugin = get_proxy().plugin
        return lambda: _compaction.precompact(plugin, sid, messages)

    def compacting(body: JSON) -> Callable[[], JSON]:
        sid = _unicode(_field(body, "sessionId", str), "sessionId")
        summary = _field(body, "summary", str)
        key = _field(body, "conversation", str, required=False)
        if key is not None and not KEY_RE.match(key):
            raise BadRequest(f"conversation: got {json.dumps(key)[:60]}, expected a 32-hex artifact key")
        plugin = get_proxy().plugin
        return lambda: _compaction.compacted(plugin, sid, summary, key)

    @guarded
    async def recover(request: Request) -> Response:
        return await threaded(request, recovering)

    @guarded
    async def search(request: Request) -> Response:
        return await threaded(request, searching)

    @guarded
    async def precompact(request: Request) -> Response:
        return await threaded(request, precompacting)

    @guarded
    async def compacted(request: Request) -> Response:
        return await threaded(request, compacting)

    async def health(request: Request) -> Response:
        try:
            guard.check_origin(request.headers)
        except AccessDenied as err:
            return JSONResponse({"error": str(err)}, status_code=err.status)
        body: JSON = {"status": "ok"}
        challenge = request.headers.get(CHALLENGE_HEADER)
        if challenge and guard.secret is not None:
            body["proof"] = proof(guard.secret, challenge[:256])
        try:
            guard.check_secret(request.headers)
        except AccessDenied:
            return JSONResponse(body)  # the bare probe: alive, nothing else
        plugin = get_proxy().plugin
        body.update(version=__version__, mode=plugin.config.mode, sessions=len(plugin.sessions))
        return JSONResponse(body)

    ingest = session_route(lambda p, s, b: _ingest(s, b))
    return [
        Route("/sidecar/assemble", session_route(lambda p, s, b: _assemble(s, b)), methods=["POST"]),
        Route("/sidecar/ingest", ingest, methods=["POST"]),
        Route("/sidecar/toolResult", ingest, methods=["POST"]),
        Route("/sidecar/afterTurn", session_route(after_turn), methods=["POST"]),
        Route("/sidecar/command", command, methods=["POST"]),
        Route("/sidecar/recover", recover, methods=["POST"]),
        Route("/sidecar/search", search, methods=["POST"]),
        Route("/sidecar/precompact", precompact, methods=["POST"]),
        Route("/sidecar/compacted", compacted, methods=["POST"]),
        Route("/sidecar/health", health, methods=["GET"]),
    ]


def _unicode(text: str, name: str) -> str:
    """``text`` if it is valid Unicode; BadRequest naming the lone surrogate (the index stores UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise BadRequest(
            f"{name}: a lone surrogate {text[err.start]!r} at position {err.start}; send valid Unicode text"
        ) from None
    return text


async def _body(request: Request, proxy: Proxy) -> JSON:
    try:
        raw = await read_body(request, proxy.plugin.config.server.maxRequestBytes)
        body = json.loads(raw)
    except TooLarge as err:
        raise BadRequest(f"body is {err.size} bytes, over server.maxRequestBytes; send less") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise BadRequest(f"body is not JSON ({err}); send a JSON object") from None
    except RecursionError:
        raise BadRequest(
            f"body is JSON nested deeper than this server parses (limit ~{sys.getrecursionlimit()} "
            "levels); send a flatter JSON object"
        ) from None
    if not isinstance(body, dict):
        raise BadRequest("body: expected a JSON object")
    return body
