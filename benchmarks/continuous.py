"""Continuous sessions benchmark: the swe sessions chained 5 at a time, replayed through each mode.

Why: a chat assistant runs task after task in one session; finished tasks stay in every later prompt
unless something evicts them (DESIGN 5, the continuous-sessions issue). The swe sessions that have
calls are sorted by name and chained in groups of ``--group`` (``lightmem2 continuous`` does the
same for your own transcripts); each chain is replayed through vanilla and the three modes.
Writes ``benchmarks/results/continuous.json`` (K, K charged, hit rate, kept lines/spans, lost).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

from lightmem_plugin.replay import replay_paths, summarize  # noqa: E402
from lightmem_plugin.traces import load_trace  # noqa: E402
from lightmem_plugin.traces.continuous import chain  # noqa: E402

MODES = ("vanilla", "conservative", "normal", "aggressive")
KEYS = ("K", "K_charged", "hit_rate", "retention_kept_lines", "retention_kept", "retention_lost", "calls")


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--traces", default=str(HERE.parent.parent / "shared" / "traces"))
    ap.add_argument("--group", type=int, default=5)
    ap.add_argument("--out", default=str(HERE / "results" / "continuous.json"))
    args = ap.parse_args()
    swe = Path(args.traces) / "swe"
    if not swe.exists():
        print(f"continuous: no swe traces at {swe}; pass --traces DIR", file=sys.stderr)
        return 2
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="lightmem2-continuous-") as tmp:
        paths = build(swe, Path(tmp), args.group)
        for mode in MODES:
            s = summarize(replay_paths(paths, mode))
            rows[mode] = {k: s[k] for k in KEYS}
            print(f"  continuous {mode:<13} K {s['K']:>14,.0f}", file=sys.stderr)
    base = float(rows["vanilla"]["K"]) or 1.0
    for row in rows.values():
        row["K_vs_vanilla"] = round(float(row["K"]) / base, 4)
        row["K_charged_vs_vanilla"] = round(float(row["K_charged"]) / base, 4)
    result = {"chains": len(paths), "group": args.group, "rows": rows}
    Path(args.out).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
