"""A session's report: one row per model call and what saved, evicted and broke the cache
(``lightmem2 report``, the chat command, the team gateway's ``/lightmem2/v1/report``)."""

from __future__ import annotations

from typing import Any

from ..eviction import cold_cache
from ..metering.misses import Totals, cause_dicts
from ..metering.prices import hint
from ..prefix import cache_ttl
from ..store.ledger import CallRecord, summarize
from . import miss_report, verdicts
from .format import call_dict, money_line, pct, tokens, totals_dict, where

# input/vanilla: our estimate of the messages (with and without lightmem2); provider: the input the
# provider counted for the call (system prompt and tools included), what `visual` draws when reported
_HEADER = f"{'call':>5} {'mode':<12} {'input':>9} {'vanilla':>9} {'provider':>9} {'hit%':>7} {'K':>9} {'K vanilla':>10} "
_HEADER += f"{'evicted':>8}  break"


def _row(c: CallRecord) -> str:
    rate, real = c.hit_rate()
    hit = f"{100 * rate:.1f}" + ("" if real else "*")
    brk = f"m{c.prefix_break_at[0]}:{c.prefix_break_at[1]}" if c.prefix_break_at else "-"
    evicted = tokens(c.evicted_tokens) if c.evicted_tokens else "-"
    provider = tokens(c.real_input_tokens) if c.real_input_tokens is not None else "-"
    return (
        f"{c.call_index:>5} {c.mode:<12} {tokens(c.input_tokens):>9} {tokens(c.baseline_tokens):>9} "
        f"{provider:>9} {hit:>7} {tokens(c.k):>9} {tokens(c.k_baseline):>10} {evicted:>8}  {brk}"
    )


def _top_reductions(saved: dict[str, int]) -> list[tuple[str, int]]:
    """Every row that saved or cost tokens, the largest saving first (a cost, negative, last)."""
    return sorted(((name, n) for name, n in saved.items() if n), key=lambda item: (-item[1], item[0]))


def _killers(calls: list[CallRecord]) -> list[CallRecord]:
    return [c for c in calls if c.prefix_break_at is not None]


def session_data(session_id: str, calls: list[CallRecord]) -> dict[str, Any]:
    """One session's report as JSON data."""
    totals = summarize(session_id, calls)
    each = [miss_report.call_causes(c) for c in calls]  # None: a row recorded before shapes were kept
    causes = Totals.of(x for x in each if x)
    known = {c.call_index: x or [] for c, x in zip(calls, each, strict=True)}
    return {
        "summary": totals_dict(totals),
        "calls": [
            {**call_dict(c), "missCauses": None if x is None else cause_dicts(x)}
            for c, x in zip(calls, each, strict=True)
        ],
        "missCauses": {**causes.as_dict(), "callsWithoutShape": sum(x is None for x in each)},
        "interventions": [
            v.as_dict() for v in verdicts.batch_verdicts(calls, causes=known) + verdicts.pass_verdicts(calls)
        ],
        "topReductions": [{"pass": n, "tokens": v} for n, v in _top_reductions(totals.saved_by_pass)],
        "evictions": [{"call": c.call_index, "tokens": c.evicted_tokens} for c in calls if c.evicted_tokens],
        "cacheKillers": [
            {
                "call": c.call_index,
                "message": c.prefix_break_at[0] if c.prefix_break_at else None,
                "char": c.prefix_break_at[1] if c.prefix_break_at else None,
                "reason": c.break_reason or "unknown",
                "usd": c.cost_usd,
            }
            for c in _killers(calls)
        ],
    }


def _billed(c: CallRecord) -> str:
    """What the call that broke the cache cost, in money where a price is known: a batch or a
    compaction is paid for there (issue #42: report names each compaction and what it cost)."""
    return f" (this call ${c.cost_usd:.4f})" if c.cost_usd is not None else ""


def session_text(session_id: str, calls: list[CallRecord]) -> str:
    """One session's report as text; under the cold starts, the TTL the provider's reported writes
    show it applied (:func:`~..prefix.cache_ttl.shown`)."""
    t = summarize(session_id, calls)
    rate, real = t.hit_rate()
    lines = [
        f"session {session_id} · mode {t.mode} · {t.calls} calls · hit rate {pct(rate)} "
        f"({'real' if real else 'simulated'})",
        f"K {tokens(t.k)} vs {tokens(t.k_baseline)} vanilla, both simulated: saved {tokens(t.k_saved)} "
        f"({t.k_saved_pct:.1f}%); input {tokens(t.input_tokens)} vs {tokens(t.baseline_tokens)} tokens",
        *(
            [
                f"K by the provider's own figures: {tokens(t.real_k)} ({t.real_calls} of {t.calls} calls reported)"
            ]
            if t.real_calls
            else []
        ),
        money_line(t),
        cold_cache.summary(t.cold),
        cache_ttl.shown(*cache_ttl.written_by(calls)),
        "",
        _HEADER,
        *(_row(c) for c in calls),
    ]
    if any(not c.hit_rate()[1] for c in calls):
        lines.append("* simulated: the provider reported no cache usage for that call")
    if t.cost_usd is not None and t.unpriced_calls:  # the line naming the config key, for those calls
        lines.append(hint(t.unpriced_model))
    lines.append("")
    top = _top_reductions(t.saved_by_pass)
    lines.append("top reductions (tokens not sent, summed over calls):" if top else "top reductions: none")
    lines += [f"  {name:<12} {tokens(n):>12}" for name, n in top]
    evict_calls = [c for c in calls if c.evicted_tokens]
    if evict_calls:
        at = ", ".join(str(c.call_index) for c in evict_calls)
        lines.append(f"evictions: {len(evict_calls)} batches, {tokens(t.evicted_tokens)} tokens (calls {at})")
    else:
        lines.append("evictions: none")
    killers = _killers(calls)
    lines.append(
        f"cache killers ({len(killers)}):"
        if killers
        else "cache killers: none (every call extended the last)"
    )
    lines += [
        f"  call {c.call_index} at {where(c)}: {c.break_reason or 'unknown'}{_billed(c)}" for c in killers
    ]
    lines += miss_report.lines(calls)
    lines += verdicts.lines(calls)
    if t.errors:
        lines.append("pass errors: " + ", ".join(f"{n} x{v}" for n, v in t.errors.items()))
    return "\n".join(lines)
