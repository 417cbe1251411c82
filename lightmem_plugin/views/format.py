"""Formatting shared by status, report, doctor and visual: numbers, percentages and ``--json`` shapes.

Why one place: the commands print the same quantities (tokens, hit rate, K) and the host adapters show
their text verbatim, so a figure must read the same way everywhere. JSON keys are camelCase like the
config, and every dump sorts its keys so the same ledger always gives the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

from ..eviction import cold_cache
from ..metering.prices import hint
from ..store.ledger import CallRecord, SessionTotals


def to_json(data: Any) -> str:
    """The ``--json`` text of every command: sorted keys, two-space indent."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False)


def tokens(n: float) -> str:
    """A token count with thousands separators (K values are rounded to whole tokens)."""
    return f"{round(n):,}"


def usd(value: float | None) -> str:
    """Dollars: four decimals below $1 (a call costs cents), two from there; "-" without a price."""
    if value is None:
        return "-"
    sign = "-" if value < 0 else ""
    amount = abs(value)
    return f"{sign}${amount:,.4f}" if amount < 1 else f"{sign}${amount:,.2f}"


def _usd_json(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def money_line(t: SessionTotals) -> str:
    """The session's money in one line (status, report): billed against without lightmem2, output
    included, and how many calls it covers; the hint naming the config key when no call has money."""
    if t.cost_usd is None:
        return hint(t.unpriced_model)
    pct_saved = t.saved_usd_pct or 0.0
    source = (
        "the provider's figures"
        if t.priced_real_calls == t.priced_calls
        else f"the provider's figures for {t.priced_real_calls} of {t.priced_calls} calls, the rest simulated"
    )
    line = (
        f"money: {usd(t.cost_usd)} vs {usd(t.cost_without_usd)} without lightmem2 "
        f"(saved {usd(t.saved_usd)}, {pct_saved:.1f}%); output included; {source}"
    )
    if t.unpriced_calls:
        line += f"; {t.unpriced_calls} of {t.calls} calls without a price"
    return line


def pct(ratio: float) -> str:
    """A ratio in 0..1 as a percentage with one decimal."""
    return f"{100.0 * ratio:.1f}%"


def size(n: int) -> str:
    """Bytes in binary units (B, KiB, MiB, GiB)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def where(call: CallRecord) -> str:
    """Where a prefix break happened, e.g. ``message 12, char 340``."""
    if call.prefix_break_at is None:
        return "-"
    msg, offset = call.prefix_break_at
    return f"message {msg}, char {offset}"


def totals_dict(t: SessionTotals) -> dict[str, Any]:
    """A session summary as JSON data (floats rounded so output is stable)."""
    rate, real = t.hit_rate()
    return {
        "session": t.session_id,
        "calls": t.calls,
        "mode": t.mode,
        "inputTokens": t.input_tokens,
        "baselineTokens": t.baseline_tokens,
        "contextTokens": t.last_input_tokens,
        "contextTokensWithout": t.last_baseline_tokens,
        "contextCountedBy": t.context_counted_by,
        "kReal": round(t.real_k, 1),
        "hitRate": round(rate, 4),
        "hitRateSource": "real" if real else "simulated",
        "realCalls": t.real_calls,
        "k": round(t.k, 1),
        "kBaseline": round(t.k_baseline, 1),
        "kSaved": round(t.k_saved, 1),
        "kSavedPct": round(t.k_saved_pct, 2),
        "savedByPass": t.saved_by_pass,
        "evictedTokens": t.evicted_tokens,
        "evictions": t.evictions,
        "prefixBreaks": t.prefix_breaks,
        "coldStarts": [{"call": call, "why": cold_cache.describe(code)} for call, code in t.cold],
        "errors": t.errors,
        "lastError": t.last_error,
        "outputTokens": t.output_tokens,
        "costUsd": _usd_json(t.cost_usd),
        "costUsdWithout": _usd_json(t.cost_without_usd),
        "savedUsd": _usd_json(t.saved_usd),
        "savedUsdPct": None if t.saved_usd_pct is None else round(t.saved_usd_pct, 2),
        "pricedCalls": t.priced_calls,
        "pricedRealCalls": t.priced_real_calls,
        "priceHint": hint(t.unpriced_model) if t.unpriced_calls else None,
    }


def call_dict(c: CallRecord) -> dict[str, Any]:
    """One call as JSON data."""
    rate, real = c.hit_rate()
    return {
        "call": c.call_index,
        "mode": c.mode,
        "inputTokens": c.input_tokens,
        "baselineTokens": c.baseline_tokens,
        "hitTokens": c.hit_tokens,
        "missTokens": c.miss_tokens,
        "writeTokens": c.write_tokens,
        "realCacheRead": c.real_cache_read,
        "realCacheCreation": c.real_cache_creation,
        "realCachedTokens": c.real_cached_tokens,
        "realInputTokens": c.real_input_tokens,
        "realBaselineTokens": c.real_baseline_tokens,
        "hitRate": round(rate, 4),
        "hitRateSource": "real" if real else "simulated",
        "k": round(c.k, 1),
        "kBaseline": round(c.k_baseline, 1),
        "savedByPass": dict(sorted(c.saved_by_pass.items())),
        "evictedTokens": c.evicted_tokens,
        "prefixBreakAt": list(c.prefix_break_at) if c.prefix_break_at else None,
        "breakReason": c.break_reason,
        "errors": dict(sorted(c.errors.items())),
        "model": c.model,
        "outputTokens": c.output_tokens,
        "realCacheWrite1h": c.real_cache_write_1h,
        "costUsd": _usd_json(c.cost_usd),
        "costUsdWithout": _usd_json(c.cost_without_usd),
        "savedUsd": _usd_json(c.saved_usd),
    }
