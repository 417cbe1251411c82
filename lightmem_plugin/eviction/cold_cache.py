"""Whether the provider's prompt cache is cold at a call, and why: the moment a break costs nothing extra.

Why it matters (DESIGN 1b): a provider keeps a cached prefix a few minutes after its last use. After a
longer pause the whole prompt is written again anyway, so changing the past at that call adds no cache
break of its own: the cost rule's price of a break (:mod:`.break_cost`) is zero there. Two signs say a
call met a cold cache:

- **a pause past the TTL in force**: the time since the session's previous call is longer than the
  provider keeps a prefix (:func:`ttl_in_force`: ``eviction.cacheTtlS`` when set, else one hour where
  the request asks for it, else the provider's default, :data:`DEFAULT_TTL_S`). Known before the call
  is sent, so it prices that call's break;
- **a drop the usage shows**: with nothing changed in the prefix, a call read at least
  :data:`MIN_DROP` tokens less from the cache than the call before it had left cached
  (:func:`dropped`). Known only once that call's usage comes, so it is counted and reported for that
  call; it prices nothing, since the call that dropped wrote the prompt again and the next one finds it.

Everything here is pure: times come in as arguments (epoch seconds, or None when unknown), and a time
drives a decision only; the codes it returns are for the ledger and reports, never for model text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..model import Request

HOUR_S = 3600.0

DEFAULT_TTL_S: dict[str, float | None] = {
    "anthropic": 300.0,  # ephemeral cache_control: 5 minutes from the last use
    "openai": 600.0,  # in-memory prompt cache retention: 5-10 minutes of inactivity
    "deepseek": None,  # context caching on disk, kept hours: longer than any recorded swe session
    "vllm": None,
    "token": None,
}
"""Seconds a provider keeps a cached prefix after its last use, where the request asks for nothing
longer (None: longer than a session's pauses, or unknown). Anthropic's one-hour cache and OpenAI's
24-hour retention are chosen per request (:func:`requested_ttl`)."""

OPENAI_EXTENDED_S = 24 * HOUR_S
"""OpenAI's ``prompt_cache_retention: "24h"``: the prefix is kept up to a day."""

MIN_DROP = 1024
"""Tokens a read must fall short by to count as the provider's drop: less is where the provider's cache
positions (blocks, breakpoints) fall, not a loss (recorded drops fell 8,000 to 90,000 tokens short)."""


@dataclass(frozen=True)
class Verdict:
    """Whether a call met a cold cache; ``code`` says why (:func:`describe` turns it into words).

    Codes: ``pause <seconds> <ttl>`` (a pause past the TTL), ``drop <tokens>`` (the usage showed a
    drop), ``""`` (warm, or nothing known)."""

    cold: bool
    code: str = ""


WARM = Verdict(False)


def _mark(value: Any) -> dict[str, Any] | None:
    """The ``cache_control`` breakpoint of a tool, a message or a block (None: it has none)."""
    mark = value.get("cache_control") if isinstance(value, dict) else None
    return mark if isinstance(mark, dict) else None


def _first_mark(req: Request) -> dict[str, Any] | None:
    """The request's first ``cache_control`` breakpoint, in the order the provider reads them (tools,
    system, messages)."""
    for tool in req.tools:
        if (mark := _mark(tool)) is not None:
            return mark
    for msg in req.messages:
        for holder in (msg.extra, *(getattr(p, "extra", None) for p in msg.parts)):
            if (mark := _mark(holder)) is not None:
                return mark
    return None


def requested_ttl(req: Request, provider: str | None) -> float | None:
    """The TTL the request asks ``provider`` for, when longer than its default: a day where it says
    ``prompt_cache_retention: "24h"`` (OpenAI), an hour where its breakpoints ask ``ttl: "1h"``
    (Anthropic); None otherwise. Anthropic requires longer-lived breakpoints before shorter ones, so
    the first breakpoint says whether any asks for an hour: the scan stops there (hosts mark the tools
    or the system prompt), and only an Anthropic request is scanned at all."""
    if provider == "openai":
        return OPENAI_EXTENDED_S if req.extra.get("prompt_cache_retention") == "24h" else None
    if provider != "anthropic":
        return None
    mark = _first_mark(req)
    return HOUR_S if mark is not None and mark.get("ttl") == "1h" else None


def ttl_in_force(provider: str | None, requested: float | None, override: float | None) -> float | None:
    """Seconds the provider keeps this session's prefix: ``override`` (``eviction.cacheTtlS``) when
    set, else what the request asked for, else the provider's default (None: no expiry known, so no
    pause makes a call cold)."""
    if override is not None:
        return override
    if requested is not None:
        return requested
    return DEFAULT_TTL_S.get(provider) if provider else None


def by_pause(previous_at: float | None, now: float | None, ttl: float | None) -> Verdict:
    """The verdict for a call made at ``now`` after the session's previous call at ``previous_at``:
    cold when the pause is longer than ``ttl`` (the provider keeps a prefix up to ``ttl`` seconds after
    its last use, as the replay's cache model does). Warm when any of the three is unknown: a cold
    verdict makes a break free, so it needs evidence."""
    if previous_at is None or now is None or ttl is None or now - previous_at <= ttl:
        return WARM
    return Verdict(True, f"pause {round(now - previous_at)} {round(ttl)}")


def dropped(left: int | None, read: int | None, unchanged: bool) -> int:
    """Tokens a call read short of what the call before it left cached (``left``: that call's cache
    reads plus writes, or its prompt where the provider caches whole prompts), when that is at least
    :data:`MIN_DROP` and nothing changed in the prefix between them (``unchanged``); else 0."""
    if left is None or read is None or not unchanged or left - read < MIN_DROP:
        return 0
    return left - read


def left_cached(read: int | None, written: int | None, prompt: int | None) -> int | None:
    """What a call left in the provider's cache, from its usage: what it read plus what it wrote where
    the provider says (Anthropic), else its whole prompt (OpenAI, DeepSeek cache every prompt)."""
    if written is not None:
        return (read or 0) + written
    return prompt


def by_drop(left: int | None, read: int | None, unchanged: bool) -> Verdict:
    """The verdict for the call whose usage read ``read`` tokens from the cache (:func:`dropped`)."""
    short = dropped(left, read, unchanged)
    return Verdict(True, f"drop {short}") if short else WARM


def ttl_words(seconds: int) -> str:
    """A TTL in words: ``5-minute``, ``1-hour``, ``45-second``."""
    if seconds and seconds % 3600 == 0:
        return f"{seconds // 3600}-hour"
    if seconds and seconds % 60 == 0:
        return f"{seconds // 60}-minute"
    return f"{seconds}-second"


def describe(code: str) -> str:
    """One cold start in words: ``a pause of 1,800 s past the 5-minute TTL``, ``a drop of 45,000 tokens
    shown by the provider's usage``; '' for a warm call."""
    kind, *figures = code.split()
    if kind == "pause" and len(figures) == 2:
        return f"a pause of {int(figures[0]):,} s past the {ttl_words(int(figures[1]))} TTL"
    if kind == "drop" and figures:
        return f"a drop of {int(figures[0]):,} tokens shown by the provider's usage"
    return ""


def summary(cold: Iterable[tuple[int, str]]) -> str:
    """The session's cold starts in one line, from (call index, code) pairs in call order:
    ``cold starts: 2 (pauses past the 5-minute TTL), the last at call 57``."""
    starts = [(call, code) for call, code in cold if code]
    if not starts:
        return "cold starts: none seen"
    kinds: dict[str, int] = {}  # insertion order: the order they first came, so the text is stable
    for _, code in starts:
        kind, *figures = code.split()
        if kind == "pause" and len(figures) == 2:
            key = f"past the {ttl_words(int(figures[1]))} TTL"
        else:
            key = "shown by the provider's usage"
        kinds[f"{kind} {key}"] = kinds.get(f"{kind} {key}", 0) + 1
    parts = []
    for label, n in kinds.items():
        kind, key = label.split(" ", 1)
        noun = ("pause" if kind == "pause" else "drop") + ("s" if n != 1 else "")
        parts.append(f"{noun} {key}" if len(kinds) == 1 else f"{n} {noun} {key}")
    return f"cold starts: {len(starts)} ({', '.join(parts)}), the last at call {starts[-1][0]}"
