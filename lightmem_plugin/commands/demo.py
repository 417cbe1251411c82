"""demo [--trace PATH]: replay a bundled real multi-task session through vanilla and every mode.

The bundled session is three real mini-swe-agent runs (a DeepSeek model fixing a Django, a pydicom
and a pvlib bug, MIT) chained into one session as an assistant agent runs tasks back to back, the
user away 30 minutes before each new task (``lightmem2 continuous``'s declared pause model). It is
replayed on Anthropic's cache, whose five-minute TTL turns each pause into a cold start, and priced
at a named Claude model's list price (the recorded model is DeepSeek's, which Anthropic does not
serve). For each policy it prints input tokens, cold starts, cache hit rate, cost K (0.1 x hit +
miss, writes at 1.25x) and money relative to vanilla, and retention (what the agent later used
that is still in context, recoverable, or lost); then one line on why the modes differ, computed
from those figures. Then it records the normal-mode run in the ledger and prints ``report`` for it
(the ledger's cache model has no clock: a line says what it counts) and writes ``visual``.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import xxhash

from ..config import Config, Mode
from ..eviction.record_store import RecordStore
from ..measure.luck import DEFAULT_TTL_S
from ..measure.priced import ANTHROPIC_STAND_IN, usd_as
from ..measure.replay import LightMemPolicy, PolicyFactory, called_tools, replay_paths, summarize
from ..measure.traces import load_trace
from ..measure.traces.base import Trace
from ..pipeline import LightMem
from ..reduction.base import prefers_shell
from ..store.home import Home
from ..store.ledger import Ledger
from . import report, visual
from .base import Command, Outcome

PAUSE_PRICED = ("vanilla", "aggressive")
"""The policies whose pauses the demo prices (each also replayed on a cache that never forgets)."""
POLICIES = ("vanilla", "conservative", "normal", "aggressive")
DEMO_SESSION_ID = "demo-three-tasks"
CACHE = "anthropic"
"""The cache the table replays on: five minutes, so a user's pause is a cold start."""


def bundled_trace() -> Path:
    """Path of the bundled single-task demo session (one of the chain's sources)."""
    return _data("demo_session.json.gz")


def bundled_chain() -> Path:
    """Path of the bundled multi-task session the demo replays (``benchmarks/demo_chain.py``)."""
    return _data("demo_chain.json.gz")


def _data(name: str) -> Path:
    return Path(str(resources.files("lightmem_plugin").joinpath("data", name)))


def _replay(path: Path, root: Path) -> tuple[dict[str, dict[str, Any]], int]:
    """Each policy's figures on :data:`CACHE` with the recorded clock (``usd`` priced as the stand-in
    Claude model, ``usd_no_pause`` for :data:`PAUSE_PRICED`: the same calls on a cache that never
    forgets), and the finished tasks aggressive collapsed."""
    collapsed: list[LightMemPolicy] = []

    def keep(mode: str) -> str | PolicyFactory:
        if mode == "vanilla":
            return mode
        chosen: Mode = mode  # type: ignore[assignment]

        def make(trace: Trace) -> LightMemPolicy:
            policy = LightMemPolicy(trace, chosen, root / mode / xxhash.xxh3_64_hexdigest(trace.id.encode()))
            if mode == "aggressive":
                collapsed.append(policy)
            return policy

        return make

    rows: dict[str, dict[str, Any]] = {}
    for name in POLICIES:
        results = replay_paths([path], keep(name), provider=CACHE)
        rows[name] = summarize(results)
        rows[name]["usd"] = usd_as(results, ANTHROPIC_STAND_IN)
        if name in PAUSE_PRICED:  # only these two are compared in the "why" line
            rows[name]["usd_no_pause"] = usd_as(
                replay_paths([path], name, provider=CACHE, clock="none"), ANTHROPIC_STAND_IN
            )
    tasks = sum(len(p.session.evictor.state.collapses) for p in collapsed)
    return rows, tasks


def _table(rows: dict[str, dict[str, Any]]) -> list[str]:
    base = rows["vanilla"]
    base_in, base_k, base_usd = int(base["input_tokens"]) or 1, float(base["K"]) or 1.0, base["usd"] or 1.0
    lines = [
        f"{'policy':<13} {'input tokens':>13} {'vs vanilla':>10} {'cold':>5} {'hit rate':>9} {'K':>11} "
        f"{'K/vanilla':>9} {'money':>9} {'$/vanilla':>9} {'kept':>6} {'recov.':>6} {'lost':>5}"
    ]
    for name, s in rows.items():
        lines.append(
            f"{name:<13} {int(s['input_tokens']):>13,} {int(s['input_tokens']) / base_in:>10.4f} "
            f"{int(s['cold_starts']):>5} {float(s['hit_rate']):>9.1%} {float(s['K']):>11,.0f} "
            f"{float(s['K']) / base_k:>9.4f} {'$' + format(s['usd'], '.4f'):>9} {s['usd'] / base_usd:>9.4f} "
            f"{float(s['retention_kept']):>6.1%} {float(s['retention_recoverable']):>6.1%} "
            f"{float(s['retention_lost']):>5.1%}"
        )
    return lines


def _pauses(trace: Trace) -> list[float]:
    """The gaps between calls (seconds) longer than :data:`CACHE`'s TTL: where a cached prefix expires."""
    ttl = DEFAULT_TTL_S[CACHE] or float("inf")
    times = [c.at for c in trace.calls]
    return [b - a for a, b in itertools.pairwise(times) if a is not None and b is not None and b - a > ttl]


def _cold(rows: dict[str, dict[str, Any]]) -> str:
    """The cold starts per policy, said once when every policy had as many."""
    cold = {p: int(s["cold_starts"]) for p, s in rows.items()}
    if len(set(cold.values())) == 1:
        return f"{cold['vanilla']} cold start(s) in every policy"
    return "cold starts " + ", ".join(f"{p} {n}" for p, n in cold.items())


def _signed(usd: float) -> str:
    """A difference in money in words: ``$0.4322 more`` / ``$0.0320 less``."""
    return f"${abs(usd):.4f} {'more' if usd >= 0 else 'less'}"


def why(rows: dict[str, dict[str, Any]], tasks_collapsed: int, pauses: list[float]) -> str:
    """One line on why the rows differ, from the replay's own figures."""
    con, nor, agg = (rows[p] for p in ("conservative", "normal", "aggressive"))
    parts = [
        f"normal (lossy cuts of long tool outputs allowed, and at {int(nor.get('evictions_at_cold') or 0):,} "
        "cold start(s) the old outputs it had kept whole cut again; conservative keeps every pass lossless "
        f"and never changes the past) sent {int(con['input_tokens']) - int(nor['input_tokens']):,} input "
        "tokens fewer than conservative",
        f"aggressive {int(nor['input_tokens']) - int(agg['input_tokens']):,} fewer than normal "
        f"({1 - int(agg['input_tokens']) / max(1, int(nor['input_tokens'])):.0%}): it collapsed "
        f"{tasks_collapsed} finished task{'s' if tasks_collapsed != 1 else ''}, each into one stub",
    ]
    if pauses:
        cost = {p: rows[p]["usd"] - rows[p]["usd_no_pause"] for p in PAUSE_PRICED}
        parts.append(
            f"the {len(pauses)} pause{'s' if len(pauses) != 1 else ''} of {max(pauses) / 60:.0f} minutes outlived the "
            f"cache's {DEFAULT_TTL_S[CACHE] or 0:.0f} s: {_cold(rows)}; against the same calls on a cache "
            f"that never forgets, they cost vanilla {_signed(cost['vanilla'])} and aggressive "
            f"{_signed(cost['aggressive'])} (a smaller prompt to write again, and the past changed where "
            "the break was free)"
        )
    else:
        parts.append("the session has no pause longer than the cache's TTL, so no cold start")
    return "why: " + "; ".join(parts) + "."


def _record(trace: Trace, ledger: Ledger) -> None:
    """Run the session through the Python API in normal mode, as a host would, writing the ledger."""
    lm = LightMem(config=Config(mode="normal"), ledger=ledger)
    lm.records = RecordStore(Home.default().records_dir, lm.registry.redactor)
    lm.attach_search_index()
    ledger.forget(DEMO_SESSION_ID)  # a rerun of the demo replaces its rows instead of continuing them
    session = lm.session(DEMO_SESSION_ID)
    # stubs name the recovery the recorded host has, as the table's replay does
    session.prefer_shell = prefers_shell(called_tools(trace))
    for call in trace.calls:
        session.before_model_call(call.prompt, model=trace.model)
        session.after_model_call(call.output)


def _ledger_note(path: Path, trace: Trace) -> str:
    """What the report under the table counts, with the same calls replayed that way to match it."""
    flat = {p: summarize(replay_paths([path], p, clock="none")) for p in ("vanilla", "normal")}
    return (
        f"The report below is the normal run as the ledger records a live session: on the recorded "
        f"provider's cache ({trace.provider}) with no clock, so without the pauses and cold starts above "
        f"(nor what normal does at them), priced at {trace.model or 'the recorded model'}. Replayed that "
        f"way, normal is K {flat['normal']['K']:,.0f} vs {flat['vanilla']['K']:,.0f} vanilla, input "
        f"{int(flat['normal']['input_tokens']):,} vs {int(flat['vanilla']['input_tokens']):,} tokens."
    )


def run(trace: str | None = None) -> str:
    """The text ``lightmem2 demo`` prints."""
    path = Path(trace) if trace else bundled_chain()
    t = load_trace(path)
    pauses = _pauses(t)
    counted = (
        "output included" if any(c.completion_tokens for c in t.calls) else "input only (no output counts)"
    )
    paused = f"{len(pauses)} pause(s) of up to {max(pauses) / 60:.0f} minutes" if pauses else "no pauses"
    out = [
        f"lightmem2 demo: {t.id} ({len(t.calls)} model calls, {paused}); replayed on {CACHE}'s cache "
        f"({DEFAULT_TTL_S[CACHE] or 0:.0f} s TTL), money at {ANTHROPIC_STAND_IN}'s list price (the recorded "
        f"model, {t.model}, has none there), {counted}",
        "",
    ]
    with tempfile.TemporaryDirectory(prefix="lightmem2-demo-") as tmp:
        rows, collapsed = _replay(path, Path(tmp))
    out += _table(rows)
    out += ["", why(rows, collapsed, pauses), "", _ledger_note(path, t)]
    ledger = Ledger.default()
    _record(t, ledger)
    out += ["", report.run(ledger, DEMO_SESSION_ID), "", visual.run(ledger, DEMO_SESSION_ID)]
    return "\n".join(out)


def configure(parser: argparse.ArgumentParser) -> None:
    """``--trace PATH``."""
    parser.add_argument("--trace", help="a trace file to use instead of the bundled session")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 demo``."""
    return run(args.trace)


COMMAND = Command("demo", __doc__, configure, main, chat=False)
