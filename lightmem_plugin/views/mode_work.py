"""What the mode did in a session, one line per kind of work, for ``status`` (issue #42 item 5).

Why: the modes differ in when they change what the model already saw (DESIGN 1b): conservative never
does; normal only where the break is free (a cold cache: :mod:`~lightmem_plugin.eviction.deferred`);
aggressive also pages out finished work when it pays, and compacts before the host's limit. A user
choosing a mode wants to see that difference on their own session, not read it in the docs. Each
line is read off the ledger rows (their ``break_reason`` says which batch a prefix break was, their
``cold_start`` which calls met a cold cache), so it is what was done, in the session's own figures.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..metering.accounting import HOST_COMPACTION, SUMMARISING_CALL
from ..metering.savings import CALL_IDS, EVICTION, STABILIZER
from ..store.ledger import CallRecord
from .format import tokens

NOT_ON_ARRIVAL = frozenset({CALL_IDS, EVICTION, STABILIZER})
"""Rows of a call's ``saved_by_pass`` that are no reduction of new tool output: the ids the model reads
short, paged-out work, the stabilizer's head (:mod:`~lightmem_plugin.metering.savings`)."""

REDUCED_AGAIN = "reduced again at a cold start"
"""How a deferred reduction's batch names itself (:meth:`~lightmem_plugin.eviction.state.EvictionState.describe_last`)."""
COMPACTION = "compaction before the host's limit"


@dataclass(frozen=True)
class Work:
    """A session's batches by kind: (how many, tokens saved) each; the eviction batches made at a cold
    start (``at_cold``), the session's cold starts, and the tokens the reduction of new output on
    arrival saved, summed over calls (``on_arrival``)."""

    reduced_again: tuple[int, int] = (0, 0)
    evicted: tuple[int, int] = (0, 0)
    compacted: tuple[int, int] = (0, 0)
    at_cold: int = 0
    cold_starts: int = 0
    on_arrival: int = 0
    host_compactions: tuple[int, ...] = ()
    """The calls that were the host's own summarising request (its compaction, seen on the wire)."""


def tally(rows: Iterable[CallRecord]) -> Work:
    """The batches of a session's ledger rows, by kind.

    ``on_arrival``: a call's rows by pass count every tool output shown otherwise than the host sent
    it, under the pass whose stub it carries, so an output reduced again at a cold start counts there
    from its batch on (measured on Claude Code: 3,897 tokens "on arrival" for a session whose outputs
    all arrived whole, three calls of a 1,299-token batch). Those batches' tokens, in force from their
    call on, are taken out: what is left is what arrival did (exact in normal mode; in aggressive, an
    output reduced again and later paged out counts under eviction, and is taken out all the same)."""
    counts = {"reduced": [0, 0], "evicted": [0, 0], "compacted": [0, 0]}
    at_cold = cold = arrival = again = 0
    host: list[int] = []
    for r in rows:
        cold += r.cold_start is not None
        reason = r.break_reason or ""
        if reason.startswith(HOST_COMPACTION) and SUMMARISING_CALL in reason:
            host.append(r.call_index)
        if r.evicted_tokens > 0 and REDUCED_AGAIN in reason:
            again += r.evicted_tokens
        arrival += sum(v for k, v in r.saved_by_pass.items() if k not in NOT_ON_ARRIVAL) - again
        if r.evicted_tokens <= 0:
            continue
        kind = "reduced" if REDUCED_AGAIN in reason else "compacted" if COMPACTION in reason else "evicted"
        counts[kind][0] += 1
        counts[kind][1] += r.evicted_tokens
        at_cold += kind == "evicted" and r.cold_start is not None
    return Work(
        (counts["reduced"][0], counts["reduced"][1]),
        (counts["evicted"][0], counts["evicted"][1]),
        (counts["compacted"][0], counts["compacted"][1]),
        at_cold,
        cold,
        max(0, arrival),
        tuple(host),
    )


def as_dict(work: Work) -> dict[str, int]:
    """``status --json``'s ``modeWork``."""
    return {
        "reducedAgainBatches": work.reduced_again[0],
        "reducedAgainTokens": work.reduced_again[1],
        "evictionBatches": work.evicted[0],
        "evictedTokens": work.evicted[1],
        "evictionsAtColdStart": work.at_cold,
        "compactions": work.compacted[0],
        "compactedTokens": work.compacted[1],
        "coldStarts": work.cold_starts,
        "savedOnArrival": work.on_arrival,
        "hostCompactions": len(work.host_compactions),
    }


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 'es' if noun.endswith('ch') else 's'}"


def lines(mode: str, work: Work) -> list[str]:
    """What ``mode`` did, one line each: the reduction of new output (every mode), then the past, and
    the host's own compactions, if any (what lightmem2 did about them)."""
    out = [f"on arrival: new tool output reduced, {tokens(work.on_arrival)} tokens saved"]
    if work.host_compactions:
        calls = ", ".join(str(c) for c in work.host_compactions)
        out.append(
            f"the host compacted: {_n(len(work.host_compactions), 'time')} (its summarising call {calls}); "
            "the history before it archived for lightmem2 search, lightmem2's note after its summary"
        )
    n, saved = work.reduced_again
    frees = f"{_n(work.cold_starts, 'cold start')} (free breaks)"
    if mode == "conservative":
        out.append("the past: never changed (conservative); " + frees)
        return out
    if n:
        out.append(
            f"at free breaks: {frees}; {_n(n, 'batch')} reduced old outputs again, {tokens(saved)} tokens"
        )
    else:
        out.append(f"at free breaks: {frees}; nothing kept whole was due to be reduced again")
    if mode == "aggressive":
        e, e_saved = work.evicted
        c, c_saved = work.compacted
        out.append(
            f"paged out: {_n(e, 'batch')} ({tokens(e_saved)} tokens, {work.at_cold} at a cold start); "
            f"compactions before the host's limit: {c}" + (f" ({tokens(c_saved)} tokens)" if c else "")
        )
    return out
