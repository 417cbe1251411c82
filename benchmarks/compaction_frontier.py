"""The compaction knobs against issue #42's Claude Code target: what each setting of the compaction
before the host's costs on the long Claude Code sessions, in money, and what it keeps.

Why: #42 asks aggressive mode to cost at most 0.75 x vanilla on the long Claude Code sessions
(replayed with recorded luck, as if the host had not compacted; vanilla with its own compaction, in
money, output included), with no host compaction and nothing lost. Two knobs decide most of what a
long session costs once lightmem2 compacts: how early (``eviction.compactMarginTokens``: the earlier,
the smaller the context every later call reads, at the price of more compactions, each re-writing the
context) and how much of the newest history stays whole (``eviction.compactKeepTokens``: less is
cheaper to read and to re-write, and sends the agent to a stub more often). This replays the sessions
through a grid of both and judges each against the target, so whether it is in reach of the knobs,
and what the best setting costs, is a rerunnable figure and not a claim. Writes
``benchmarks/results/compaction_frontier.json`` and its block of docs/BENCHMARKS.md.

Run: ``.venv/bin/python benchmarks/compaction_frontier.py`` (part of ``make bench``; ~12 minutes on 2 CPUs).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from frontier import Setting, replay_all  # noqa: E402
from readme_table import BENCHMARKS, publish, update_readme_compaction_frontier  # noqa: E402

from lightmem_plugin.config import Config  # noqa: E402

MARGINS = (57_000, 67_000, 77_000, 87_000)
KEEPS = (4_000, 6_000, 12_000)
TARGET = 0.75
"""#42: aggressive money / vanilla money at most this, with no host compaction and nothing lost."""
OURS = "lightmem2 change"
"""The miss cause of the cache breaks lightmem2 made (:mod:`lightmem_plugin.metering.misses`)."""
KEYS = (
    "usd",
    "K",
    "K_charged",
    "retention_kept_lines",
    "retention_lost",
    "host_compactions",
    "sessions",
    "calls",
)
"""What a row keeps of its replay's summary."""


def setting(margin: int, keep: int) -> Setting:
    """Aggressive mode with the two compaction knobs set (named "(default)" where they are the shipped ones)."""
    shipped = Config().eviction
    default = (margin, keep) == (shipped.compactMarginTokens, shipped.compactKeepTokens)
    name = f"margin {margin:,}, keep {keep:,}" + (" (default)" if default else "")
    return Setting(
        name, "aggressive", {"eviction": {"compactMarginTokens": margin, "compactKeepTokens": keep}}
    )


SETTINGS: tuple[Setting, ...] = tuple(setting(m, k) for m in MARGINS for k in KEEPS)


def judge(row: dict[str, Any], vanilla_usd: float) -> list[str]:
    """What ``row`` misses of #42's Claude Code target, each with its distance; empty when met."""
    misses = []
    ratio = row["usd"] / vanilla_usd
    if ratio > TARGET:
        misses.append(f"money {ratio - TARGET:.3f} over")
    if row["host_compactions"]:
        misses.append(f"{row['host_compactions']} host compactions")
    if row["retention_lost"] > 0:
        misses.append(f"{row['retention_lost']:.2%} lost")
    return misses


def row_of(summary: dict[str, Any], s: Setting) -> dict[str, Any]:
    """A setting's row: its figures, what lightmem2's own cache breaks cost, and its two knobs."""
    ours = next((c for c in summary["miss_causes"]["causes"] if c["cause"] == OURS), None)
    knobs = s.overrides["eviction"]
    return {k: summary[k] for k in KEYS} | {
        "ours_usd": ours["usd"] if ours else 0.0,
        "margin": knobs["compactMarginTokens"],
        "keep": knobs["compactKeepTokens"],
    }


def measure(traces: Path, settings: tuple[Setting, ...], workers: int) -> dict[str, Any]:
    """Vanilla and every setting replayed over ``traces``; rows with their judgements."""
    vanilla, summaries = replay_all(traces, settings, workers, "compaction frontier")
    rows = {s.name: row_of(summaries[s.name], s) for s in settings}
    usd, k = vanilla["usd"], float(vanilla["K"]) or 1.0
    for row in rows.values():
        row["usd_vs_vanilla"] = round(row["usd"] / usd, 4)
        row["K_charged_vs_vanilla"] = round(float(row["K_charged"]) / k, 4)
        row["misses"] = judge(row, usd)
    best = min(rows, key=lambda n: rows[n]["usd"])
    return {
        "set": traces.name,
        "sessions": vanilla["sessions"],
        "calls": vanilla["calls"],
        "vanilla_usd": usd,
        "target": f"aggressive: money <= {TARGET:.2f} x vanilla, no host compaction, lost 0",
        "order": [s.name for s in settings],
        "best": best,
        "rows": rows,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--traces", default=str(HERE.parent.parent / "shared" / "traces"))
    ap.add_argument("--out", default=str(HERE / "results" / "compaction_frontier.json"))
    ap.add_argument(
        "--doc", "--readme", dest="readme", default=str(BENCHMARKS), help="the file to update; '' for none"
    )
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    sessions = Path(args.traces) / "claude-code"
    if not sessions.exists():
        print(f"compaction frontier: no Claude Code traces at {sessions}; pass --traces DIR", file=sys.stderr)
        return 2
    result = measure(sessions, SETTINGS, max(1, args.workers))
    publish(result, Path(args.out), args.readme, update_readme_compaction_frontier)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
