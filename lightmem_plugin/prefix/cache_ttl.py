"""How long the provider is asked to keep the cached prefix (``stabilizer.cacheTtl``).

Why: after a pause longer than the provider keeps a prefix, the whole prompt is written again
(DESIGN 1b). Two providers let the request choose how long:

- **Anthropic**: each ``cache_control`` breakpoint says ``"ttl": "5m"`` (the default, written at
  1.25x the input price) or ``"ttl": "1h"`` (written at 2x). A breakpoint with a longer TTL must come
  before one with a shorter TTL (tools, then system, then messages): this module gives *every*
  breakpoint the same TTL, so the order is valid by construction, whatever the host sent.
- **OpenAI** (Responses and Chat Completions): ``prompt_cache_retention: "24h"`` keeps the prefix up
  to a day instead of 5-10 minutes in memory, at the same price (the models this ships prices for).

Choices: ``host`` leaves the request as the host sent it (the default; the same object comes back);
``long`` asks for the longer TTL; ``short`` asks for the provider's default (Anthropic: the ``ttl``
field removed from every breakpoint; OpenAI: nothing changed, since its longer retention costs
nothing more and some models accept no other). The rewrite depends on the request and the choice
only, so every call of a session says the same and the cached prefix stays byte-stable.

Everything here is pure: a new request comes back, the one given (shared with the codecs' reuse) is
never changed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal, get_args

from ..errors import ConfigError
from ..model import JSON, Message, OpaquePart, Part, Request, ToolResultPart

CacheTtl = Literal["host", "short", "long"]
CHOICES: tuple[str, ...] = get_args(CacheTtl)

LONG_TTL_S: dict[str, float] = {"anthropic": 3600.0, "openai": 24 * 3600.0}
"""Seconds the provider keeps a prefix when the request asks for its longer TTL; a provider missing
here offers no choice (its requests are left as they are). The same figures as
:mod:`~..eviction.cold_cache` reads off a request (this layer may not import it; a test holds them equal)."""

SHORT_TTL_S: dict[str, float] = {"anthropic": 300.0, "openai": 600.0}
"""Seconds the provider keeps a prefix when the request asks for nothing longer (its default)."""

ANTHROPIC_LONG = "1h"
OPENAI_LONG = "24h"


def check(choice: str) -> CacheTtl:
    """``choice`` when it is one this module knows; else a :class:`ConfigError` naming it."""
    if choice not in CHOICES:
        raise ConfigError(f"stabilizer.cacheTtl: unknown choice {choice!r}; use one of {', '.join(CHOICES)}")
    return choice  # type: ignore[return-value]


def asked(choice: str, provider: str | None) -> float | None:
    """Seconds ``provider`` keeps a prefix under ``choice`` (None: ``host``, or a provider that
    offers no choice; the request itself says, :func:`~..eviction.cold_cache.requested_ttl`)."""
    if check(choice) == "host" or provider not in LONG_TTL_S:
        return None
    return (LONG_TTL_S if choice == "long" else SHORT_TTL_S)[provider]


def apply(req: Request, choice: str, provider: str | None) -> Request:
    """``req`` asking ``provider`` for the TTL ``choice`` names; ``req`` itself where nothing changes
    (``host``, a provider without a choice, a request that already asks for it)."""
    if check(choice) == "host":
        return req
    if provider == "anthropic":
        return _anthropic(req, ANTHROPIC_LONG if choice == "long" else None)
    if provider == "openai" and choice == "long" and req.extra.get("prompt_cache_retention") != OPENAI_LONG:
        return replace(req, extra={**req.extra, "prompt_cache_retention": OPENAI_LONG})
    return req


def _mark(holder: JSON, ttl: str | None) -> JSON:
    """``holder`` with its ``cache_control`` breakpoint asking ``ttl`` (None: no ``ttl`` field, the
    provider's default); ``holder`` itself when it has no breakpoint or already asks that."""
    mark = holder.get("cache_control")
    if not isinstance(mark, dict) or mark.get("ttl") == ttl:
        return holder
    new = {k: v for k, v in mark.items() if k != "ttl"}
    if ttl is not None:
        new["ttl"] = ttl
    return {**holder, "cache_control": new}


def _part(part: Any, ttl: str | None) -> Any:
    """``part`` (or a block inside a tool result) with its breakpoint asking ``ttl``."""
    if isinstance(part, OpaquePart):
        raw = _mark(part.raw, ttl)
        return part if raw is part.raw else OpaquePart(raw)
    extra = _mark(part.extra, ttl)
    if isinstance(part, ToolResultPart):
        content = [_part(p, ttl) for p in part.content]
        if extra is part.extra and all(a is b for a, b in zip(content, part.content, strict=True)):
            return part
        return replace(part, content=content, extra=extra)
    return part if extra is part.extra else replace(part, extra=extra)


def _message(msg: Message, ttl: str | None) -> Message:
    parts: list[Part] = [_part(p, ttl) for p in msg.parts]
    extra = _mark(msg.extra, ttl)
    if extra is msg.extra and all(a is b for a, b in zip(parts, msg.parts, strict=True)):
        return msg  # unchanged: the codec's reuse encodes the very object as last call
    return Message(msg.role, parts, extra, msg.hints)


def _anthropic(req: Request, ttl: str | None) -> Request:
    """Every breakpoint of an Anthropic request (tools, system and message blocks, the blocks inside
    tool results, the request's own automatic one) asking ``ttl``: one TTL for all, so no longer one
    follows a shorter one."""
    tools = [_mark(t, ttl) for t in req.tools]
    messages = [_message(m, ttl) for m in req.messages]
    extra = _mark(req.extra, ttl)
    same = extra is req.extra and all(a is b for a, b in zip(tools, req.tools, strict=True))
    if same and all(a is b for a, b in zip(messages, req.messages, strict=True)):
        return req
    return Request(messages, tools, extra, req.hints)


ASKED_WORDS = {"host": "as the host asks", "short": "5 minutes", "long": "1 hour"}
"""Each choice in the few words ``status`` has room for on its first line."""


def asked_words(choice: str) -> str:
    """What lightmem2 asks, for ``status``'s first line: ``cache TTL as the host asks``,
    ``cache TTL 1 hour`` (Anthropic's hour; OpenAI's 24 hours likewise)."""
    return f"cache TTL {ASKED_WORDS[check(choice)]}"


def shown(written: int, hourly: int) -> str:
    """The TTL the provider's usage shows it applied, for ``report``: ``written`` cache-write tokens it
    reported, ``hourly`` of them one-hour writes (``cache TTL the provider wrote: 5-minute``)."""
    if not written:
        return "cache TTL the provider wrote: no cache writes reported"
    if hourly >= written:
        return "cache TTL the provider wrote: 1-hour"
    if not hourly:
        return "cache TTL the provider wrote: 5-minute"
    return f"cache TTL the provider wrote: {hourly / written:.0%} 1-hour"


def written_by(calls: Any) -> tuple[int, int]:
    """Cache-write tokens the provider reported over ledger rows ``calls``, and the 1-hour share."""
    rows = list(calls)
    return (
        sum(c.real_cache_creation or 0 for c in rows),
        sum(c.real_cache_write_1h or 0 for c in rows),
    )
