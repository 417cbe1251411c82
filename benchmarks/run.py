"""`make bench`: every policy x both trace sets, into benchmarks/results/results.json and docs/BENCHMARKS.md.

Policies: vanilla, the three lightmem2 modes, the baselines in ``baselines.py``, the oracle and the real
peers in ``peers/`` (TokenMizer, Headroom; skipped with a line on stderr where their venv cannot be
built), on the plain sessions; vanilla and the modes again on the constructed volatile-head scenario. Each row gives
K and K charged (K plus a recover round trip for every use that is only recoverable), each as a
fraction of vanilla, how far it went from vanilla towards the oracle, hit rate, retention by line and
by span, error lines kept, lines changed outside stubs and the pipeline's time per call. The table in docs/BENCHMARKS.md is
generated from the results file (``readme_table.py``), and a test fails when the two disagree.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from baselines import BASELINES  # noqa: E402
from peers import headroom, tokenmizer  # noqa: E402
from peers.common import PeerError  # noqa: E402
from peers.task_probe import TaskProbe  # noqa: E402
from readme_table import BENCHMARKS, update_readme  # noqa: E402

from lightmem_plugin.measure.replay import replay_paths, summarize  # noqa: E402

MODES = ("vanilla", "conservative", "normal", "aggressive")
SETS = ("swe", "claude-code")
PEERS: tuple[tuple[str, Callable[[Path], dict[str, dict[str, Any]]], tuple[str, ...]], ...] = (
    ("TokenMizer", tokenmizer.peer_rows, ("swe",)),  # OpenAI-compatible only
    ("Headroom", headroom.peer_rows, ("swe", "claude-code")),
)
"""Each real peer (``peers/``): its name, its rows for one trace set, and the sets it is replayed on."""


def run_set(path: Path, quick: bool, peers: bool = False) -> dict[str, Any]:
    """All rows for one trace set; ``peers``: the real peers' rows too (each in its own venv)."""
    rows: dict[str, dict[str, Any]] = {}
    names = list(MODES) + ([] if quick else list(BASELINES))
    with tempfile.TemporaryDirectory(prefix="lightmem2-bench-") as tmp:
        for name in names:
            t0 = time.perf_counter()
            probe = TaskProbe(BASELINES[name]() if name in BASELINES else name, Path(tmp) / name)
            rows[name] = summarize(replay_paths([path], probe)) | probe.figures()
            rows[name]["wall_s"] = round(time.perf_counter() - t0, 1)
            print(f"  {path.name:<12} {name:<22} K {rows[name]['K']:>14,.0f}", file=sys.stderr)
    for peer, rows_of, sets in PEERS if peers else ():
        if path.name not in sets:
            continue
        try:
            found = rows_of(path)
        except PeerError as err:
            print(f"  {path.name:<12} {peer} rows skipped: {err}", file=sys.stderr)
            continue
        rows.update(found)
        for name in found:
            print(f"  {path.name:<12} {name:<22} K {rows[name]['K']:>14,.0f}", file=sys.stderr)
    volatile: dict[str, dict[str, Any]] = {}
    for name in MODES:
        volatile[name] = summarize(replay_paths([path], name, head="volatile"))
        print(f"  {path.name:<12} volatile {name:<13} K {volatile[name]['K']:>14,.0f}", file=sys.stderr)
    for table in (rows, volatile):
        base = float(table["vanilla"]["K"]) or 1.0
        for row in table.values():
            row["K_vs_vanilla"] = round(float(row["K"]) / base, 4)
            row["K_charged_vs_vanilla"] = round(float(row["K_charged"]) / base, 4)
    if "oracle" in rows:
        span = float(rows["vanilla"]["K"]) - float(rows["oracle"]["K"])
        for row in rows.values():
            row["way_to_oracle"] = (
                round((float(rows["vanilla"]["K"]) - float(row["K"])) / span, 3) if span else 0.0
            )
    return {"plain": rows, "volatile_head": volatile}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--traces", default=str(HERE.parent.parent / "shared" / "traces"))
    ap.add_argument("--quick", action="store_true", help="modes only, no baselines")
    ap.add_argument("--out", default=str(HERE / "results" / "results.json"))
    args = ap.parse_args()
    root = Path(args.traces)
    if not root.exists():
        print(f"bench: no traces at {root}; pass --traces DIR (the shared trace set)", file=sys.stderr)
        return 2
    results = {
        "traces": {
            s: run_set(root / s, args.quick, peers=not args.quick) for s in SETS if (root / s).exists()
        }
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    update_readme(BENCHMARKS, results)
    print(f"wrote {out} and the table in docs/BENCHMARKS.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
