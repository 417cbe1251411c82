"""A fake LLM provider on loopback: Anthropic Messages, OpenAI Responses and Chat Completions.

Why a real server: the proxy is tested the way hosts use it, over HTTP, streamed and not. The fake
keeps a provider-style prefix cache and reports it in ``usage`` under the real field names
(Anthropic ``cache_read_input_tokens``/``cache_creation_input_tokens`` with ``input_tokens`` the
uncached rest; Chat ``prompt_tokens_details.cached_tokens``; Responses
``input_tokens_details.cached_tokens``), so a test reads cache hits the way a user would.

Cache model: the prompt is rendered as canonical JSON pieces in prompt order (tools, system or
instructions, then each message or input item; ``cache_control`` marks are ignored, as they do not
change the tokens), one token per 4 characters, cached in blocks of 16 tokens chained by hash, so a
changed byte misses everything after it. Every full block is cached on every request (writes are
reported as Anthropic cache creation); with ``ttl_s`` a block unused for longer expires, as a
provider's cache does after its TTL. Replies are scripted: queue :class:`Reply` objects (text, tool
calls, an HTTP error, a cut stream, a per-event delay); with none queued the reply is ``"ok"``.
Streams split text and arguments into ``chunk``-character deltas so placeholders cross boundaries.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fake_wire import CHARS_PER_TOKEN, STREAM, WIRE, Reply, usage_for
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

BLOCK_TOKENS = 16


@dataclass
class Received:
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    raw: bytes


class PrefixCache:
    """Chained-hash block cache over the rendered prompt.

    ``counter`` counts the tokens of a piece of rendered prompt (default: one per 4 characters); with
    one, the prompt, its cached prefix and the written blocks are counted with it (blocks stay
    64 characters), as a provider that tokenises with that encoding would report them. ``ttl_s``: a
    block not read or written for longer than this many seconds is gone, as a provider's cache
    expires (None: kept for ever).
    """

    def __init__(self, counter: Callable[[str], int] | None = None, ttl_s: float | None = None) -> None:
        self.blocks: dict[bytes, float] = {}  # block hash -> when it was last used (time.monotonic)
        self.counter = counter
        self.ttl_s = ttl_s

    def observe(self, text: str) -> tuple[int, int, int]:
        """(prompt tokens, cached tokens, newly written tokens) for a prompt, caching its blocks."""
        size = BLOCK_TOKENS * CHARS_PER_TOKEN
        tokens = -(-len(text) // CHARS_PER_TOKEN)
        h = b""
        hit = written = 0
        missed = False
        now = time.monotonic()
        for start in range(0, len(text) - size + 1, size):
            h = hashlib.sha256(h + text[start : start + size].encode("utf-8", "surrogatepass")).digest()
            used = self.blocks.get(h)
            if used is not None and self.ttl_s is not None and now - used > self.ttl_s:
                used = None  # expired
            if used is not None and not missed:
                hit += BLOCK_TOKENS
            else:
                missed = True
                written += BLOCK_TOKENS
            self.blocks[h] = now
        if self.counter is not None:
            hit_chars, full_chars = hit * CHARS_PER_TOKEN, (hit + written) * CHARS_PER_TOKEN
            tokens = self.counter(text)
            counted_hit = self.counter(text[:hit_chars]) if hit else 0
            return tokens, counted_hit, (self.counter(text[:full_chars]) - counted_hit) if written else 0
        return tokens, hit, written


def strip_marks(value: Any) -> Any:
    """``value`` without ``cache_control`` marks (they do not change the tokens a provider counts)."""
    if isinstance(value, dict):
        return {k: strip_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_marks(v) for v in value]
    return value


def _blocks(content: Any) -> Any:
    """Anthropic content as blocks: a string is the one text block it stands for."""
    return [{"type": "text", "text": content}] if isinstance(content, str) and content else content


def render(api: str, body: dict[str, Any]) -> str:
    """The prompt as the fake provider tokenises it (prompt order, canonical JSON pieces).

    Anthropic reads a string ``system`` or message ``content`` as one text block, so both spellings
    are the same prompt here too (OpenClaw sends a message as a marked text block on one turn and as
    a string on the next: counted as a change, the fake reported a cache miss Anthropic would not)."""
    pieces: list[Any] = [body.get("tools") or []]
    if api == "anthropic":
        pieces.append(_blocks(body.get("system") or ""))
        pieces.extend({**m, "content": _blocks(m.get("content"))} for m in body.get("messages") or [])
    elif api == "chat":
        pieces.extend(body.get("messages") or [])
    else:
        pieces.append(body.get("instructions") or "")
        items = body.get("input")
        pieces.extend([items] if isinstance(items, str) else items or [])
    return "".join(
        json.dumps(strip_marks(p), sort_keys=True, ensure_ascii=False, separators=(",", ":")) for p in pieces
    )


class FakeUpstream:
    """State and ASGI app of the fake provider."""

    def __init__(self, counter: Callable[[str], int] | None = None, ttl_s: float | None = None) -> None:
        self.script: deque[Reply] = deque()
        self.received: list[Received] = []
        self.reported: list[dict[str, int]] = []  # per call: prompt, cached, written
        self.cache = PrefixCache(counter, ttl_s)
        self.streams_started = 0
        self.streams_aborted = 0
        self.streams_completed = 0
        self.app = Starlette(
            routes=[
                Route("/v1/messages", self._endpoint("anthropic"), methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/chat/completions", self._endpoint("chat"), methods=["POST"]),
                Route("/v1/responses", self._endpoint("responses"), methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    def queue(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def hit_rate(self, first: int = 0) -> float:
        rows = self.reported[first:]
        total = sum(r["prompt"] for r in rows)
        return sum(r["cached"] for r in rows) / total if total else 0.0

    async def _read(self, request: Request) -> Any:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):  # a provider answers 400 to JSON it cannot read
            body = None
        self.received.append(Received(request.url.path, request.url.query, dict(request.headers), body, raw))
        return body

    async def _count_tokens(self, request: Request) -> Response:
        body = await self._read(request)
        text = render("anthropic", body)
        counted = self.cache.counter(text) if self.cache.counter else -(-len(text) // CHARS_PER_TOKEN)
        return JSONResponse({"input_tokens": counted})

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    def _endpoint(self, api: str) -> Any:
        async def handle(request: Request) -> Response:
            body = await self._read(request)
            if not isinstance(body, dict):
                return JSONResponse({"error": {"message": "body is not a JSON object"}}, 400)
            reply = self.script.popleft() if self.script else Reply()
            if reply.status >= 400:
                return JSONResponse(reply.error or {"error": {"message": "scripted failure"}}, reply.status)
            try:
                prompt, cached, written = self.cache.observe(render(api, body))
            except (RecursionError, TypeError, ValueError, AttributeError) as err:
                # a shape we cannot render (messages not a list, nested past the stack): a provider
                # refuses such a body with a 400 too
                return JSONResponse({"error": {"message": f"invalid request ({type(err).__name__})"}}, 400)
            self.reported.append({"prompt": prompt, "cached": cached, "written": written})
            usage = usage_for(api, prompt, cached, written, reply)
            n = len(self.received)
            if not body.get("stream"):
                answer = WIRE[api](reply, usage, n, body.get("model", "fake-model"))
                return Response(json.dumps(answer), media_type="application/json")  # \ud800 stays escaped
            events = STREAM[api](reply, usage, n, body)
            return StreamingResponse(self._pace(events, reply), media_type="text/event-stream")

        return handle

    async def _pace(self, events: list[bytes], reply: Reply) -> AsyncIterator[bytes]:
        self.streams_started += 1
        done = False
        try:
            for i, ev in enumerate(events):
                if reply.cut_after is not None and i >= reply.cut_after:
                    raise ConnectionAbortedError("scripted mid-stream disconnect")
                if reply.delay_s:
                    await asyncio.sleep(reply.delay_s)
                if reply.final_delay_s and i == len(events) - 1:
                    await asyncio.sleep(reply.final_delay_s)
                yield ev
            done = True
        finally:
            if done:
                self.streams_completed += 1
            else:
                self.streams_aborted += 1


if __name__ == "__main__":  # python fake_upstream.py PORT: serve until killed (benchmarks)
    import sys

    import uvicorn

    # the plain asyncio loop and h11 parser, whatever else is installed: the benchmark's fixed side (the
    # provider) does the same work it did when the proxy's targets were set
    uvicorn.run(
        FakeUpstream().app,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="warning",
        access_log=False,
        loop="asyncio",
        http="h11",
    )
