"""Formatting shared by status, report, doctor and visual: numbers, percentages and ``--json`` shapes.

Why one place: the commands print the same quantities (tokens, hit rate, K) and the host adapters show
their text verbatim, so a figure must read the same way everywhere. JSON keys are camelCase like the
config, and every dump sorts its keys so the same ledger always gives the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

from ..store.ledger import CallRecord, SessionTotals


def to_json(data: Any) -> str:
    """The ``--json`` text of every command: sorted keys, two-space indent."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False)


def tokens(n: float) -> str:
    """A token count with thousands separators (K values are rounded to whole tokens)."""
    return f"{round(n):,}"


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
        "errors": t.errors,
        "lastError": t.last_error,
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
    }
