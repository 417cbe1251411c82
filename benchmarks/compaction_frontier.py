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
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from readme_table import BENCHMARKS, publish, update_readme_compaction_frontier  # noqa: E402

from lightmem_plugin.config import Config  # noqa: E402
from lightmem_plugin.measure.replay import policy_for, replay_paths, summarize  # noqa: E402

MARGINS = (57_000, 67_000, 77_000, 87_000)
KEEPS = (4_000, 6_000, 12_000)
TARGET = 0.75
"""#42: aggressive money / vanilla money at most this, with no host compaction and nothing lost."""
OURS = "lightmem2 change"
"""The miss cause of the cache breaks lightmem2 made (:mod:`lightmem_plugin.metering.misses`)."""


@dataclass(frozen=True)
class Setting:
    """One replayed configuration of aggressive mode: the two compaction knobs."""

    margin: int
    keep: int

    @property
    def name(self) -> str:
        default = Config().eviction
        shipped = (self.margin, self.keep) == (default.compactMarginTokens, default.compactKeepTokens)
        return f"margin {self.margin:,}, keep {self.keep:,}" + (" (default)" if shipped else "")

    def config(self) -> Config:
        return Config.model_validate(
            {
                "mode": "aggressive",
                "eviction": {"compactMarginTokens": self.margin, "compactKeepTokens": self.keep},
            }
        )


SETTINGS: tuple[Setting, ...] = tuple(Setting(m, k) for m in MARGINS for k in KEEPS)


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


def _replay(traces: str, mode: str, config: Config | None) -> dict[str, Any]:
    """One replay of the set (a worker process: each keeps its own archive directory)."""
    with tempfile.TemporaryDirectory(prefix="lightmem2-compaction-frontier-") as tmp:
        s = summarize(replay_paths([Path(traces)], policy_for(mode, Path(tmp), config)))
    ours = next((c for c in s["miss_causes"]["causes"] if c["cause"] == OURS), None)
    return {
        "usd": s["usd"],
        "K": s["K"],
        "K_charged": s["K_charged"],
        "retention_kept_lines": s["retention_kept_lines"],
        "retention_lost": s["retention_lost"],
        "host_compactions": s["host_compactions"],
        "ours_usd": ours["usd"] if ours else 0.0,
        "sessions": s["sessions"],
        "calls": s["calls"],
    }


def measure(traces: Path, settings: tuple[Setting, ...], workers: int) -> dict[str, Any]:
    """Vanilla and every setting replayed over ``traces``; rows with their judgements."""
    with ProcessPoolExecutor(max_workers=workers) as pool:
        base = pool.submit(_replay, str(traces), "vanilla", None)
        jobs = {s.name: pool.submit(_replay, str(traces), "aggressive", s.config()) for s in settings}
        vanilla = base.result()
        rows = {}
        for s in settings:
            row = jobs[s.name].result() | {"margin": s.margin, "keep": s.keep}
            print(f"  compaction frontier {s.name:<34} ${row['usd']:,.2f}", file=sys.stderr)
            rows[s.name] = row
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
