"""The cost / retention frontier: what each knob buys in K charged and what it costs the agent.

Why: the K targets of the content-aware reduction issue (#17: normal <= 0.82, aggressive <= 0.74 x
vanilla) and of the finished-work issue (#18: single-task aggressive <= 0.70) come with retention
targets (kept lines >= 98% / 95%, error lines kept, nothing lost). The shipped defaults keep every
line the agent later used, and sit well above the K targets. This replays the swe sessions through
the settings that trade retention for K (smaller budgets for outputs kept whole, a looser cost rule
for batches, long tool-call arguments archived as they arrive) and judges each against every target,
so whether a target is in reach of the pipeline's knobs, and what it would cost, is a rerunnable
figure and not a claim. Writes ``benchmarks/results/frontier.json`` and its block of docs/BENCHMARKS.md.

Run: ``.venv/bin/python benchmarks/frontier.py`` (part of ``make bench``; ~3 minutes on 2 CPUs).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from readme_table import BENCHMARKS, publish, update_readme_frontier  # noqa: E402

from lightmem_plugin.config import Config  # noqa: E402
from lightmem_plugin.measure.replay import policy_for, replay_paths, summarize  # noqa: E402


@dataclass(frozen=True)
class Setting:
    """One replayed configuration: a mode and the config keys changed from its defaults."""

    name: str
    mode: str
    overrides: dict[str, Any]


def _views(mode: str, chars: int) -> dict[str, Any]:
    return {"reduction": {mode: {"fileViewChars": chars}}}


_ARRIVAL = {"argumentsOnArrival": True, "minSavingRatio": 1.0}
SETTINGS: tuple[Setting, ...] = (
    Setting("normal (default)", "normal", {}),
    Setting("normal, views whole up to 8,000 chars", "normal", _views("normal", 8000)),
    Setting("normal, views whole up to 4,000 chars", "normal", _views("normal", 4000)),
    Setting("aggressive (default)", "aggressive", {}),
    Setting(
        "aggressive, batch at saving >= 1x its break", "aggressive", {"eviction": {"minSavingRatio": 1.0}}
    ),
    Setting("aggressive, views whole up to 4,000 chars", "aggressive", _views("aggressive", 4000)),
    Setting(
        "aggressive, arguments archived on arrival", "aggressive", {"eviction": {"argumentsOnArrival": True}}
    ),
    Setting(
        "aggressive, on arrival, 1x, views up to 8,000",
        "aggressive",
        _views("aggressive", 8000) | {"eviction": _ARRIVAL},
    ),
    Setting(
        "aggressive, on arrival, 1x, views up to 4,000",
        "aggressive",
        _views("aggressive", 4000) | {"eviction": _ARRIVAL},
    ),
)


@dataclass(frozen=True)
class Target:
    """A "done when" line of an issue: K charged at most ``k``, with the retention it must keep."""

    name: str
    mode: str
    k: float
    kept_lines: float
    error_lines: float | None
    own_words: bool  # K charged counts a round trip for own-words uses too (#18 item 4)


TARGETS: tuple[Target, ...] = (
    Target("#17 normal", "normal", 0.82, 0.98, 1.0, False),
    Target("#17 aggressive", "aggressive", 0.74, 0.95, 0.99, False),
    Target("#18 single-task", "aggressive", 0.70, 0.95, None, True),
)


def judge(row: dict[str, Any], target: Target) -> list[str]:
    """What ``row`` misses of ``target``, each with its distance; empty when the target is met."""
    k = row["K_charged_all_vs_vanilla"] if target.own_words else row["K_charged_vs_vanilla"]
    misses = []
    if k > target.k:
        misses.append(f"K {k - target.k:.3f} over")
    if row["retention_kept_lines"] < target.kept_lines:
        misses.append(f"kept lines {100 * (target.kept_lines - row['retention_kept_lines']):.1f} pt short")
    if target.error_lines is not None and row["error_lines_kept"] < target.error_lines:
        misses.append("error lines cut")
    if row["retention_lost"] > 0:
        misses.append(f"{row['retention_lost']:.2%} lost")
    return misses


def _replay(traces: str, mode: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """One replay of the set (a worker process: each keeps its own archive directory)."""
    config = Config.model_validate(overrides) if overrides else None
    with tempfile.TemporaryDirectory(prefix="lightmem2-frontier-") as tmp:
        return summarize(replay_paths([Path(traces)], policy_for(mode, Path(tmp), config)))


KEYS = (
    "K",
    "K_charged",
    "K_charged_all",
    "retention_kept_lines",
    "retention_kept",
    "retention_lost",
    "said_kept",
    "error_lines_kept",
    "calls",
    "sessions",
)


def replay_all(
    traces: Path, settings: Sequence[Setting], workers: int, label: str
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Vanilla's summary and each setting's (by name), the replays spread over ``workers`` processes;
    each setting's K printed as it comes, after ``label``."""
    with ProcessPoolExecutor(max_workers=workers) as pool:
        base = pool.submit(_replay, str(traces), "vanilla", {})
        jobs = {s.name: pool.submit(_replay, str(traces), s.mode, s.overrides) for s in settings}
        vanilla = base.result()
        out = {}
        for name, job in jobs.items():
            out[name] = job.result()
            print(f"  {label} {name:<48} K {out[name]['K']:>14,.0f}", file=sys.stderr)
    return vanilla, out


def measure(traces: Path, settings: tuple[Setting, ...], workers: int) -> dict[str, Any]:
    """Vanilla and every setting replayed over ``traces``; rows with their judgements."""
    vanilla, summaries = replay_all(traces, settings, workers, "frontier")
    rows = {
        s.name: {k: summaries[s.name][k] for k in KEYS} | {"mode": s.mode, "overrides": s.overrides}
        for s in settings
    }
    k = float(vanilla["K"]) or 1.0
    for row in rows.values():
        row["K_vs_vanilla"] = round(float(row["K"]) / k, 4)
        row["K_charged_vs_vanilla"] = round(float(row["K_charged"]) / k, 4)
        row["K_charged_all_vs_vanilla"] = round(float(row["K_charged_all"]) / k, 4)
        row["targets"] = {t.name: judge(row, t) for t in TARGETS if t.mode == row["mode"]}
    return {
        "set": traces.name,
        "sessions": vanilla["sessions"],
        "calls": vanilla["calls"],
        "order": [s.name for s in settings],
        "targets": {
            t.name: f"{t.mode}: K charged{' (own words too)' if t.own_words else ''} <= {t.k:.2f}, "
            f"kept lines >= {t.kept_lines:.0%}"
            + (f", error lines kept >= {t.error_lines:.0%}" if t.error_lines else "")
            + ", lost 0"
            for t in TARGETS
        },
        "rows": rows,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--traces", default=str(HERE.parent.parent / "shared" / "traces"))
    ap.add_argument("--out", default=str(HERE / "results" / "frontier.json"))
    ap.add_argument(
        "--doc", "--readme", dest="readme", default=str(BENCHMARKS), help="the file to update; '' for none"
    )
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    swe = Path(args.traces) / "swe"
    if not swe.exists():
        print(f"frontier: no swe traces at {swe}; pass --traces DIR", file=sys.stderr)
        return 2
    result = measure(swe, SETTINGS, max(1, args.workers))
    publish(result, Path(args.out), args.readme, update_readme_frontier)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
