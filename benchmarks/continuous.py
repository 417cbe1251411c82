"""Continuous sessions benchmark: the swe sessions chained 5 at a time, replayed through each mode.

Why: a chat assistant runs task after task in one session; finished tasks stay in every later prompt
unless something evicts them (DESIGN 5, the continuous-sessions issue). The swe sessions that have
calls are sorted by name and chained in groups of ``--group`` (``lightmem2 continuous`` does the
same for your own transcripts); each chain is replayed through vanilla and the three modes.
Writes ``benchmarks/results/continuous.json`` (K, K charged, hit rate, kept lines/spans, lost) and its
block of ``docs/BENCHMARKS.md``.

Time: the swe sessions have no call times, so the chains get them from the declared pause model
(``traces.continuous.Pauses``: ``--call-seconds`` apart within a task, ``--pause-minutes`` before each
new task). Every mode is replayed on two caches, each with pauses off and on: DeepSeek's (the
recorded provider; it keeps prefixes for hours, so a pause costs nothing) and Anthropic's (five
minutes: a pause is a cold start). Money: on DeepSeek each chain's recorded model at DeepSeek's list
price; on Anthropic, where a DeepSeek model has no price, the replayed tokens priced as
``--anthropic-model`` (default ``measure.priced.ANTHROPIC_STAND_IN``), named in the results file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

import xxhash  # noqa: E402

from lightmem_plugin.measure.priced import ANTHROPIC_STAND_IN, usd_as  # noqa: E402
from lightmem_plugin.measure.replay import (  # noqa: E402
    LightMemPolicy,
    PolicyFactory,
    SessionPolicy,
    SessionResult,
    replay_paths,
    summarize,
)
from lightmem_plugin.measure.traces import load_trace  # noqa: E402
from lightmem_plugin.measure.traces.base import Trace  # noqa: E402
from lightmem_plugin.measure.traces.continuous import (  # noqa: E402
    CALL_SECONDS,
    TASK_PAUSE_MINUTES,
    Pauses,
    chain,
)

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
TIMED_KEYS = (
    "K",
    "K_charged",
    "cold_starts",
    "hit_rate",
    "retention_kept_lines",
    "retention_lost",
    "retention_lost_lines",
    "task_kept_lines",
    "session_cold_starts",
    "evictions_at_cold",
    "calls",
)
"""The figures of each run on a cache with time (``timed`` in the results file): the running task's
kept lines too (what a change of the past at a cold start may not cut, issue #42)."""
CACHES = ("deepseek", "anthropic")


def build(swe: Path, out: Path, group: int, pauses: Pauses | None = None) -> list[Path]:
    """Chains of ``group`` sessions (sorted by file name) written under ``out``, their calls timed by
    ``pauses`` (None: no times); their paths."""
    traces = [t for t in (load_trace(p) for p in sorted(swe.glob("*.json.gz"))) if t.calls]
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, start in enumerate(range(0, len(traces) - group + 1, group)):
        doc = chain(traces[start : start + group], f"chain-{n:02d}", pauses)
        path = out / f"chain-{n:02d}.json.gz"
        path.write_bytes(gzip.compress(json.dumps(doc, sort_keys=True).encode(), mtime=0))
        paths.append(path)
    return paths


ALONE = "each task alone: "
"""The rows of the bound (:func:`alone`), named by this prefix and the mode each task ran in."""


def alone(swe: Path, out: Path, chains: int, group: int, pauses: Pauses) -> list[Path]:
    """The tasks of the first ``chains`` chains, each a session of its own, timed by ``pauses``.

    Why (issue #42's target of aggressive <= 0.15 x vanilla on these chains, 30-minute pauses,
    Anthropic's cache): a pause past the TTL makes every task start cold, so the cheapest a policy
    can make a chain, short of cutting into the tasks themselves, is what its tasks cost when nothing of
    an earlier one is carried at all, not even the session record. Replayed in a mode, that is the
    bound its chains can reach by paging out finished work; below it only the running task's own
    reduction can go (the single-task frontier: ``benchmarks/frontier.py``)."""
    return build(swe, out, 1, pauses)[: chains * group]


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


def timed(
    cache: str, minutes: float, model: str | None, runs: dict[str, list[SessionResult]]
) -> dict[str, Any]:
    """One run of every mode on ``cache`` (``runs``: mode -> its replayed chains, and any bound's rows
    after them), with the clock the chains carry: :data:`TIMED_KEYS`, and money (``usd``: the replay's own, or priced as ``model`` when
    one is named) with its ratio to vanilla's."""
    rows: dict[str, dict[str, Any]] = {}
    for mode, replayed in runs.items():
        s = summarize(replayed)
        rows[mode] = {k: s[k] for k in TIMED_KEYS}
        rows[mode]["usd"] = usd_as(replayed, model) if model else s["usd"]
    base_k, base_usd = float(rows["vanilla"]["K"]) or 1.0, rows["vanilla"]["usd"]
    for row in rows.values():
        row["K_vs_vanilla"] = round(float(row["K"]) / base_k, 4)
        row["K_charged_vs_vanilla"] = round(float(row["K_charged"]) / base_k, 4)
        row["usd_vs_vanilla"] = (
            round(row["usd"] / base_usd, 4) if row["usd"] is not None and base_usd else None
        )
    return {"cache": cache, "pause_minutes": minutes, "priced_as": model or "recorded model", "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--traces", default=str(HERE.parent.parent / "shared" / "traces"))
    ap.add_argument("--group", type=int, default=5)
    ap.add_argument(
        "--pause-minutes", type=float, default=TASK_PAUSE_MINUTES, help="the pause before each new task, 'on'"
    )
    ap.add_argument(
        "--call-seconds", type=float, default=CALL_SECONDS, help="seconds between calls of a task"
    )
    ap.add_argument(
        "--anthropic-model",
        default=ANTHROPIC_STAND_IN,
        help="the Claude model the runs on Anthropic's cache are priced as (the chains' models are DeepSeek's)",
    )
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
    runs_timed: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="lightmem2-continuous-") as tmp:
        # pauses off: calls a step apart and no more, so no cache expires (the whole-session table)
        off = build(swe, Path(tmp) / "off", args.group, Pauses(args.call_seconds, 0.0))
        on = build(swe, Path(tmp) / "on", args.group, Pauses(args.call_seconds, args.pause_minutes))
        runs: dict[str, str | PolicyFactory] = {m: m for m in MODES}
        runs["aggressive (oracle horizon)"] = oracle(Path(tmp) / "oracle")
        replayed: dict[str, list[SessionResult]] = {}
        for mode, policy in runs.items():
            replayed[mode] = replay_paths(off, policy)
            s = summarize(replayed[mode])
            rows[mode] = {k: s[k] for k in KEYS}
            print(f"  continuous {mode:<27} K {s['K']:>14,.0f}", file=sys.stderr)
        runs_timed.append(timed("deepseek", 0.0, None, {m: replayed[m] for m in MODES}))
        for cache, minutes, paths in (
            ("deepseek", args.pause_minutes, on),
            ("anthropic", 0.0, off),
            ("anthropic", args.pause_minutes, on),
        ):
            model = args.anthropic_model if cache == "anthropic" else None
            results = {m: replay_paths(paths, m, provider=cache) for m in MODES}
            if cache == "anthropic" and minutes:  # the setting of #42's target: its bound beside it
                tasks = alone(
                    swe, Path(tmp) / "alone", len(on), args.group, Pauses(args.call_seconds, minutes)
                )
                for mode in ("vanilla", "aggressive"):
                    results[ALONE + mode] = replay_paths(tasks, mode, provider=cache)
            runs_timed.append(timed(cache, minutes, model, results))
            v = runs_timed[-1]["rows"]
            print(
                f"  continuous {cache}, {minutes:g}-minute pauses: money / vanilla "
                + ", ".join(f"{m} {v[m]['usd_vs_vanilla']}" for m in list(v)[1:]),
                file=sys.stderr,
            )
        record = record_recall.measure_tasks(off)
    base = float(rows["vanilla"]["K"]) or 1.0
    for row in rows.values():
        row["K_vs_vanilla"] = round(float(row["K"]) / base, 4)
        row["K_charged_vs_vanilla"] = round(float(row["K_charged"]) / base, 4)
        row["K_charged_all_vs_vanilla"] = round(float(row["K_charged_all"]) / base, 4)
    result = {
        "chains": len(on),
        "group": args.group,
        "call_seconds": args.call_seconds,
        "rows": rows,
        "timed": runs_timed,
        "record": {k: v for k, v in record.items() if k != "task_misses"},
    }
    publish(result, Path(args.out), args.readme, update_readme_continuous)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
