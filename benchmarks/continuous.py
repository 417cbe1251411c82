"""Continuous sessions benchmark: the swe sessions chained 5 at a time, replayed through each mode.

Why: a chat assistant runs task after task in one session; finished tasks stay in every later prompt
unless something evicts them (DESIGN 5, the continuous-sessions issue). The swe sessions that have
calls are sorted by name and chained in groups of ``--group`` (``lightmem2 continuous`` does the
same for your own transcripts); each chain is replayed through vanilla and the three modes.
Writes ``benchmarks/results/continuous.json`` (K, K charged, hit rate, kept lines/spans, lost) and its
block of ``docs/BENCHMARKS.md``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

import xxhash  # noqa: E402

from lightmem_plugin.measure.replay import (  # noqa: E402
    LightMemPolicy,
    PolicyFactory,
    SessionPolicy,
    replay_paths,
    summarize,
)
from lightmem_plugin.measure.traces import load_trace  # noqa: E402
from lightmem_plugin.measure.traces.base import Trace  # noqa: E402
from lightmem_plugin.measure.traces.continuous import chain  # noqa: E402

sys.path.insert(0, str(HERE))
import record_recall  # noqa: E402
from readme_table import BENCHMARKS, publish, update_readme_continuous  # noqa: E402

MODES = ("vanilla", "conservative", "normal", "aggressive")
KEYS = (
    "K",
    "K_charged",
    "K_charged_all",
    "hit_rate",
    "retention_kept_lines",
    "retention_kept",
    "retention_lost",
    "task_kept",
    "task_kept_lines",
    "said_kept",
    "said_recoverable",
    "said_lost",
    "error_lines_kept",
    "calls",
)


def build(swe: Path, out: Path, group: int) -> list[Path]:
    """Chains of ``group`` sessions (sorted by file name) written under ``out``; their paths."""
    traces = [t for t in (load_trace(p) for p in sorted(swe.glob("*.json.gz"))) if t.calls]
    paths = []
    for n, start in enumerate(range(0, len(traces) - group + 1, group)):
        doc = chain(traces[start : start + group], f"chain-{n:02d}")
        path = out / f"chain-{n:02d}.json.gz"
        path.write_bytes(gzip.compress(json.dumps(doc, sort_keys=True).encode(), mtime=0))
        paths.append(path)
    return paths


def oracle(root: Path) -> PolicyFactory:
    """Aggressive mode told the true remaining calls (in the task, in the session) at every check:
    the yardstick for the horizon the evictor estimates from the session itself."""

    def make(trace: Trace) -> SessionPolicy:
        policy = LightMemPolicy(trace, "aggressive", root / xxhash.xxh3_64_hexdigest(trace.id.encode()))
        goals = [sum(1 for m in c.prompt if m.get("role") == "user") for c in trace.calls]
        starts = [i + 1 for i, g in enumerate(goals) if i == 0 or g > goals[i - 1]]  # 1-based calls
        total = len(trace.calls)

        def remaining(call: int) -> tuple[float, float]:
            end = next((s for s in starts if s > call), total + 1)
            return float(max(1, end - call)), float(max(1, total + 1 - call))

        policy.session.evictor.remaining_hint = remaining
        return policy

    return make


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--traces", default=str(HERE.parent.parent / "shared" / "traces"))
    ap.add_argument("--group", type=int, default=5)
    ap.add_argument("--out", default=str(HERE / "results" / "continuous.json"))
    ap.add_argument(
        "--doc", "--readme", dest="readme", default=str(BENCHMARKS), help="the file to update; '' for none"
    )
    args = ap.parse_args()
    swe = Path(args.traces) / "swe"
    if not swe.exists():
        print(f"continuous: no swe traces at {swe}; pass --traces DIR", file=sys.stderr)
        return 2
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="lightmem2-continuous-") as tmp:
        paths = build(swe, Path(tmp), args.group)
        runs: dict[str, str | PolicyFactory] = {m: m for m in MODES}
        runs["aggressive (oracle horizon)"] = oracle(Path(tmp) / "oracle")
        for mode, policy in runs.items():
            s = summarize(replay_paths(paths, policy))
            rows[mode] = {k: s[k] for k in KEYS}
            print(f"  continuous {mode:<27} K {s['K']:>14,.0f}", file=sys.stderr)
        record = record_recall.measure_tasks(paths)
    base = float(rows["vanilla"]["K"]) or 1.0
    for row in rows.values():
        row["K_vs_vanilla"] = round(float(row["K"]) / base, 4)
        row["K_charged_vs_vanilla"] = round(float(row["K_charged"]) / base, 4)
        row["K_charged_all_vs_vanilla"] = round(float(row["K_charged_all"]) / base, 4)
    result = {
        "chains": len(paths),
        "group": args.group,
        "rows": rows,
        "record": {k: v for k, v in record.items() if k != "task_misses"},
    }
    publish(result, Path(args.out), args.readme, update_readme_continuous)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
