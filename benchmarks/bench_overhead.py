"""Per-call pipeline overhead on the largest recorded sessions: p50, p99 and peak memory.

Run: ``.venv/bin/python benchmarks/bench_overhead.py [--traces DIR] [--top N]``. Replays the N sessions
of ``DIR`` with the most model calls through each mode, timing only our pipeline (``before_model_call``)
per call, and reports the peak Python heap (tracemalloc) of the whole run per mode. Targets (issue 3):
p50 < 2 ms, p99 < 20 ms per call, work proportional to what is new.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from pathlib import Path

from lightmem_plugin.measure.replay import replay_paths, summarize
from lightmem_plugin.measure.traces import load_trace

HERE = Path(__file__).resolve().parent


def largest(root: Path, top: int) -> list[Path]:
    """The ``top`` traces under ``root`` with the most calls."""
    sized = [(len(load_trace(p).calls), p.name, p) for p in sorted(root.glob("*.json.gz"))]
    return [p for _, _, p in sorted(sized, reverse=True)[:top]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--traces", default=str(HERE.parent.parent / "shared" / "traces" / "swe"))
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args()
    root = Path(args.traces)
    if not root.exists():
        print(f"bench_overhead: no traces at {root}; pass --traces DIR", file=sys.stderr)
        return 2
    files = largest(root, args.top)
    out = {"sessions": [f.name for f in files], "modes": {}}
    replay_paths(files[:1], "vanilla")  # load the tokenizer first so no mode pays for it
    for mode in ("conservative", "normal", "aggressive"):
        t0 = time.perf_counter()
        s = summarize(replay_paths(files, mode))
        wall = time.perf_counter() - t0
        tracemalloc.start()  # a second pass for memory: tracemalloc slows allocation, so not timed
        replay_paths(files, mode)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out["modes"][mode] = {
            "calls": s["calls"],
            "overhead_ms_p50": s["overhead_ms_p50"],
            "overhead_ms_p99": s["overhead_ms_p99"],
            "peak_heap_mb": round(peak / 2**20, 1),
            "wall_s": round(wall, 1),
        }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
