"""Cache TTL benchmark: does asking Anthropic for its one-hour cache pay (``stabilizer.cacheTtl``)?

Why: an hour-long TTL keeps the prefix over a user's pause, so the call after it reads the context
instead of writing it again; but Anthropic bills every one-hour write at 2x the input price instead
of 1.25x, and a session writes at every call (what the call added). Which wins depends on the
pauses, so the issue (#42 item 4) asks to measure it before the key is on by default.

Three sets, each replayed through vanilla and the three modes, once with the requests asking the
five-minute TTL (``short``) and once the hour (``long``; the replay's cache keeps prefixes an hour and
bills its writes at 2x, :func:`~lightmem_plugin.measure.luck.chosen_ttl`):

- **several tasks, with pauses**: the swe sessions chained ``--group`` at a time (as
  ``benchmarks/continuous.py``), ``--call-seconds`` apart within a task and ``--pause-minutes`` away
  before each new task, on Anthropic's cache, priced as ``--anthropic-model``;
- **several tasks, no pauses**: the same chains with no pause beyond the call step;
- **Claude Code**: the dev Claude Code sessions at their recorded times and prices.

Writes ``benchmarks/results/cache_ttl.json`` (money per set, mode and TTL) and its block of
``docs/BENCHMARKS.md``; the README's verdict line is rendered from it by ``make docs``. ``--chains N``
replays the first N chains only and ``--modes`` fewer modes (for a quick look; the committed file is
a full run).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

from lightmem_plugin.config import Config  # noqa: E402
from lightmem_plugin.measure.priced import ANTHROPIC_STAND_IN, usd_as  # noqa: E402
from lightmem_plugin.measure.replay import replay_paths, summarize, trace_files  # noqa: E402
from lightmem_plugin.measure.traces.continuous import CALL_SECONDS, TASK_PAUSE_MINUTES, Pauses  # noqa: E402

sys.path.insert(0, str(HERE))
from continuous import build  # noqa: E402
from readme_table import BENCHMARKS, publish, update_readme_cache_ttl  # noqa: E402

MODES = ("vanilla", "conservative", "normal", "aggressive")
TTLS = ("short", "long")
SETS = ("paused", "unpaused", "claude-code")


def _config(ttl: str) -> Config:
    base = Config()
    return base.model_copy(update={"stabilizer": base.stabilizer.model_copy(update={"cacheTtl": ttl})})


def replay(job: tuple[str, list[str], str, str, str | None]) -> dict[str, Any]:
    """One set's sessions through one mode with one TTL choice: money (priced as ``model`` when one
    is named, else the replay's own), cold starts, hit rate, K."""
    name, paths, mode, ttl, model = job
    provider = "anthropic" if model else None
    results = replay_paths(paths, mode, provider=provider, config=_config(ttl))
    s = summarize(results)
    usd = usd_as(results, model) if model else s["usd"]
    print(f"  cache_ttl {name:<12} {mode:<13} {ttl:<5} ${usd:,.2f}", file=sys.stderr)
    return {
        "usd": usd,
        "K": s["K"],
        "cold_starts": s["cold_starts"],
        "hit_rate": s["hit_rate"],
        "write_tokens": s["write_tokens"],
        "sessions": s["sessions"],
        "calls": s["calls"],
    }


def compare(runs: dict[tuple[str, str], dict[str, Any]], modes: tuple[str, ...]) -> dict[str, Any]:
    """Per mode: each TTL's figures and the hour's money over the five minutes'."""
    rows: dict[str, Any] = {}
    for mode in modes:
        short, long = runs[(mode, "short")], runs[(mode, "long")]
        rows[mode] = {
            "short": short,
            "long": long,
            "long_vs_short": round(long["usd"] / short["usd"], 4) if short["usd"] else None,
        }
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=str(HERE.parent.parent / "shared" / "traces"))
    ap.add_argument("--group", type=int, default=5)
    ap.add_argument("--chains", type=int, default=0, help="replay only the first N chains (0: all)")
    ap.add_argument("--pause-minutes", type=float, default=TASK_PAUSE_MINUTES)
    ap.add_argument("--call-seconds", type=float, default=CALL_SECONDS)
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    ap.add_argument("--anthropic-model", default=ANTHROPIC_STAND_IN)
    ap.add_argument("--jobs", type=int, default=1, help="replays run at once (processes)")
    ap.add_argument("--out", default=str(HERE / "results" / "cache_ttl.json"))
    ap.add_argument("--doc", default=str(BENCHMARKS), help="the file to update; '' for none")
    args = ap.parse_args()
    traces = Path(args.traces)
    swe, cc = traces / "swe", traces / "claude-code"
    for needed, used in (
        (swe, {"paused", "unpaused"} & set(args.sets)),
        (cc, {"claude-code"} & set(args.sets)),
    ):
        if used and not needed.exists():
            print(f"cache_ttl: no traces at {needed}; pass --traces DIR", file=sys.stderr)
            return 2
    modes = tuple(m for m in MODES if m in args.modes)
    with tempfile.TemporaryDirectory(prefix="lightmem2-cache-ttl-") as tmp:
        sets: dict[str, tuple[list[str], str | None]] = {}
        for name, minutes in (("paused", args.pause_minutes), ("unpaused", 0.0)):
            if name in args.sets:
                paths = build(swe, Path(tmp) / name, args.group, Pauses(args.call_seconds, minutes))
                sets[name] = ([str(p) for p in paths[: args.chains or None]], args.anthropic_model)
        if "claude-code" in args.sets:
            sets["claude-code"] = ([str(p) for p in trace_files([cc])], None)
        jobs = [
            (name, paths, m, t, model) for name, (paths, model) in sets.items() for m in modes for t in TTLS
        ]
        with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            done = list(pool.map(replay, jobs))
    figures: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for (name, _, mode, ttl, _), result in zip(jobs, done, strict=True):
        figures.setdefault(name, {})[(mode, ttl)] = result
    result = {
        "group": args.group,
        "chains": args.chains or None,
        "call_seconds": args.call_seconds,
        "pause_minutes": args.pause_minutes,
        "priced_as": args.anthropic_model,
        "sets": {name: compare(runs, modes) for name, runs in figures.items()},
    }
    publish(result, Path(args.out), args.doc, update_readme_cache_ttl)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
