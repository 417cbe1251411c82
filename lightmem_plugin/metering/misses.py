"""Why a call's input was not read from the cache: each uncached token named by one cause.

Why (issue #43): users of context tools cannot tell what a cache miss cost nor who caused it, and a
tool whose own changes break the cache hides it behind "tokens saved". A provider's prefix cache reads
the longest cached prefix of a request, so what it did not read is a tail of the request, and that tail
splits along three regions, read from the end:

1. what the host appended since its previous request ("new content": nobody could have cached it);
2. what stood in the previous request but reads differently now, from the first changed token on (a
   change lightmem2 made: a batch, a reduction at a cold start, a compaction; or one the host made:
   its system prompt, a rewritten message, its own compaction);
3. the common prefix with the previous request, which a warm cache would have read: missed there
   because this is the session's first call, because the cache expired after an idle gap, because a
   change after it moved the read back to an earlier cache breakpoint (Anthropic caches prefixes
   that end at a breakpoint: the change is the cause), or because the provider dropped it on its own
   (nothing in the request changed and no pause explains it).

The uncached count is filled from region 1 backwards, so every uncached token gets exactly one cause
and the causes add up to the call's uncached input; their money is the call's uncached money split in
the same proportions. The same function serves the ledger (live, with the provider's own counts when it
reported them) and the replay (``replay --json``), from the :class:`Shape` each one measures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

FIRST = "first call"
EXPIRY = "expiry"
DROP = "provider drop"
OURS = "lightmem2 change"
PEER = "peer change"
"""A change a replayed policy other than lightmem2 made (a peer or a baseline in ``make bench``)."""
HOST = "host change"
HOST_COMPACTION = "host compaction"
NEW = "new content"
CAUSES = (FIRST, EXPIRY, DROP, OURS, PEER, HOST, HOST_COMPACTION, NEW)
"""Every cause, in the order reports list them."""


@dataclass(frozen=True, slots=True)
class Shape:
    """What one request was made of, against the previous one, in lightmem2's token count.

    ``total`` the request's input tokens; ``common`` its leading tokens identical to the previous
    request (0 on the first call); ``new`` the tokens of what the host appended since its previous
    request; ``changed_by`` who changed what stood between the two (``lightmem2``, ``host``, ``host
    compaction``; None: nobody); ``detail`` what changed, in words; ``expired`` the idle gap that
    outlasted the cache's TTL, in words (None: no expiry); ``first`` on a session's first call.
    """

    total: int
    common: int
    new: int
    changed_by: str | None = None
    detail: str = ""
    expired: str | None = None
    first: bool = False


@dataclass(frozen=True, slots=True)
class Cause:
    """One cause's share of a call's uncached input: tokens (in the unit the uncached count came in),
    money (None without a price), and what happened, in words."""

    cause: str
    tokens: int
    usd: float | None = None
    detail: str = ""


GRANULE = 128
"""Tokens at the end of a cached prefix a provider may not read for its block size (OpenAI caches in
128-token steps, the simulated cache in 64): counted with what is new, not as a drop."""

_CHANGER = {"lightmem2": OURS, "peer": PEER, "host": HOST, "host compaction": HOST_COMPACTION}


def attribute(shape: Shape, uncached: int, total: int | None = None, usd: float | None = None) -> list[Cause]:
    """``uncached`` tokens of the call ``shape`` describes, split by cause (module doc); ``total``
    the request's input in the unit of ``uncached`` (the provider's count; None: lightmem2's, as in
    ``shape``), to which the shape is scaled; ``usd`` the money of the uncached tokens, split in the
    same proportions. The tokens always sum to ``uncached`` (at least 0): what the regions cannot
    hold (the provider counted more than the shape says) goes to the common prefix's cause."""
    uncached = max(0, uncached)
    if uncached == 0:
        return []
    scale = total / shape.total if total and shape.total else 1.0
    total_f = shape.total * scale
    new = min(shape.new * scale, total_f)
    common = min(shape.common * scale, total_f - new)
    changed = total_f - new - common
    left = float(uncached)
    parts: list[tuple[str, float, str]] = []

    def take(cause: str, room: float, detail: str) -> None:
        nonlocal left
        n = min(left, room)
        if n <= 0:
            return
        left -= n
        if parts and parts[-1][0] == cause:  # one entry per cause
            n += parts.pop()[1]
        parts.append((cause, n, detail))

    take(NEW, new, "")
    if shape.first:
        take(FIRST, changed + common + left, "")
    else:
        changer = _CHANGER.get(shape.changed_by or "", HOST)
        take(changer, changed, shape.detail)
        if shape.expired is not None:
            take(EXPIRY, common + left, shape.expired)
        elif changed > 0:  # a cache holds prefixes up to its breakpoints: the change cost those too
            take(changer, common + left, shape.detail)
        else:  # a cache keeps whole blocks: the prefix's last partial block is read as new
            take(NEW, min(common, GRANULE * scale), "")
            take(DROP, common + left, "nothing before it changed and no pause explains it")
    return _rounded(parts, uncached, usd)


def _rounded(parts: list[tuple[str, float, str]], uncached: int, usd: float | None) -> list[Cause]:
    """Whole tokens that still sum to ``uncached`` (the largest share takes the rounding)."""
    counts = [round(n) for _, n, _ in parts]
    if counts:
        big = max(range(len(counts)), key=lambda i: parts[i][1])
        counts[big] += uncached - sum(counts)
    out = []
    for (cause, _, detail), n in zip(parts, counts, strict=True):
        if n > 0:
            out.append(Cause(cause, n, None if usd is None else usd * n / uncached, detail))
    return out


@dataclass
class Totals:
    """Causes summed over calls: tokens and money per cause, and the uncached input they explain."""

    tokens: dict[str, int]
    usd: dict[str, float]
    uncached: int = 0
    uncached_usd: float | None = None

    @classmethod
    def of(cls, calls: Iterable[Iterable[Cause]]) -> Totals:
        tokens: dict[str, int] = {}
        usd: dict[str, float] = {}
        priced = False
        for causes in calls:
            for c in causes:
                tokens[c.cause] = tokens.get(c.cause, 0) + c.tokens
                if c.usd is not None:
                    priced = True
                    usd[c.cause] = usd.get(c.cause, 0.0) + c.usd
        total = sum(tokens.values())
        return cls(tokens, usd, total, sum(usd.values()) if priced else None)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready: per cause (in :data:`CAUSES` order) its tokens, share and money."""
        return {
            "uncachedTokens": self.uncached,
            "uncachedUsd": self.uncached_usd,
            "causes": [
                {
                    "cause": cause,
                    "tokens": self.tokens[cause],
                    "share": round(self.tokens[cause] / self.uncached, 4) if self.uncached else 0.0,
                    "usd": self.usd.get(cause),
                }
                for cause in CAUSES
                if self.tokens.get(cause)
            ],
        }


def cause_dicts(causes: Iterable[Cause]) -> list[Mapping[str, object]]:
    """JSON-ready causes of one call."""
    return [{"cause": c.cause, "tokens": c.tokens, "usd": c.usd, "detail": c.detail} for c in causes]
