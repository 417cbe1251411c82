"""The cause of each cache miss of a recorded session, read off its ledger rows (``report``).

Each row keeps the request's shape against the previous one (``miss_shape``), why its cache was cold
(``cold_start``), what broke the prefix (``break_reason``) and the money of its uncached input
(``uncached_usd``); :func:`~..metering.misses.attribute` splits the uncached input by cause: the
provider's own count when it reported one, else the simulated one.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..eviction import cold_cache
from ..metering.misses import CAUSES, Cause, Shape, Totals, attribute
from ..store.ledger import CallRecord
from .format import tokens

_BY = {"lightmem2": "lightmem2", "host": "host", "host-tools": "host", "host-compaction": "host compaction"}


def call_causes(rec: CallRecord) -> list[Cause] | None:
    """The causes of one call's uncached input, None for a row recorded before shapes were kept."""
    if not rec.miss_shape:
        return None
    try:
        common_s, new_s, by = rec.miss_shape.split()
        common, new = int(common_s), int(new_s)
    except ValueError:
        return None
    code = rec.cold_start or ""
    expired = cold_cache.describe(code) if code.startswith("pause") else None
    detail = rec.break_reason or ""
    if by == "host-tools":
        detail = "the host changed its tool definitions, which come first in the prompt"
    elif by == "host-compaction":
        detail = rec.break_reason or "the host dropped messages from its history (its compaction)"
    shape = Shape(rec.input_tokens, common, new, _BY.get(by), detail, expired, first=by == "first")
    if rec.has_real_usage:
        total = rec.real_input_tokens or 0
        return attribute(shape, total - (rec.real_hit_tokens or 0), total, rec.uncached_usd)
    return attribute(shape, rec.miss_tokens + rec.write_tokens, None, rec.uncached_usd)


def session_causes(calls: Sequence[CallRecord]) -> tuple[Totals, list[tuple[int, list[Cause]]], int]:
    """The session's uncached input by cause, each call's causes, and how many rows had no shape."""
    per_call: list[tuple[int, list[Cause]]] = []
    unknown = 0
    for rec in calls:
        causes = call_causes(rec)
        if causes is None:
            unknown += 1
        elif causes:
            per_call.append((rec.call_index, causes))
    return Totals.of(c for _, c in per_call), per_call, unknown


def lines(calls: Sequence[CallRecord]) -> list[str]:
    """``report``'s lines: the uncached input by cause, in tokens, share and money, and the calls
    whose misses were not new content alone."""
    totals, per_call, unknown = session_causes(calls)
    if not totals.uncached:
        return [
            "uncached input: none"
            + (f" ({unknown} calls recorded before causes were kept)" if unknown else "")
        ]
    money = f", ${totals.uncached_usd:.4f}" if totals.uncached_usd is not None else ""
    out = [f"uncached input by cause ({tokens(totals.uncached)} tokens{money}):"]
    for cause in CAUSES:
        n = totals.tokens.get(cause, 0)
        if not n:
            continue
        usd = totals.usd.get(cause)
        paid = f"  ${usd:.4f}" if usd is not None else ""
        out.append(f"  {cause:<16} {tokens(n):>10}  {100 * n / totals.uncached:5.1f}%{paid}")
    if unknown:
        out.append(f"  ({unknown} calls recorded before causes were kept are not counted)")
    notable = [(i, cs) for i, cs in per_call if any(c.cause != "new content" for c in cs)]
    if notable:
        out.append("misses past new content:")
        for call, causes in notable:
            named = "; ".join(
                f"{c.cause} {tokens(c.tokens)}"
                + (f" (${c.usd:.4f})" if c.usd is not None else "")
                + (f": {c.detail}" if c.detail else "")
                for c in causes
                if c.cause != "new content"
            )
            out.append(f"  call {call}: {named}")
    return out
