"""The bound beside the continuous chains (benchmarks/continuous.py ``alone``): each task of the
chains as a session of its own, so what a policy that pages out finished work could at best reach is
a replay anyone can rerun, not a claim."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import continuous  # noqa: E402
from readme_table import render_timed  # noqa: E402

from lightmem_plugin.measure.traces import load_trace  # noqa: E402
from lightmem_plugin.measure.traces.continuous import Pauses  # noqa: E402

DATA = ROOT / "tests" / "data"
SWE = (
    "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz",
    "deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz",
)


def test_each_task_alone_is_the_chain_s_tasks_with_nothing_carried(tmp_path: Path) -> None:
    swe = tmp_path / "swe"
    swe.mkdir()
    for name in SWE:
        shutil.copy(DATA / name, swe / name)
    pauses = Pauses(10.0, 30.0)
    (chained,) = (load_trace(p) for p in continuous.build(swe, tmp_path / "chains", 2, pauses))
    tasks = [load_trace(p) for p in continuous.alone(swe, tmp_path / "alone", 1, 2, pauses)]
    originals = [load_trace(swe / name) for name in sorted(SWE)]
    assert [len(t.calls) for t in tasks] == [len(t.calls) for t in originals]
    assert sum(len(t.calls) for t in tasks) == len(chained.calls)
    # each task's prompts are its own: the second carries nothing of the first, unlike in the chain
    for task, original in zip(tasks, originals, strict=True):
        assert [c.prompt for c in task.calls] == [c.prompt for c in original.calls]
    first_of_second = chained.calls[len(tasks[0].calls)].prompt
    assert len(first_of_second) > len(tasks[1].calls[0].prompt)


def test_the_bound_rows_are_named_and_explained_in_the_timed_table() -> None:
    row = {
        "usd": 1.0,
        "usd_vs_vanilla": 1.0,
        "K_vs_vanilla": 1.0,
        "cold_starts": 2,
        "hit_rate": 0.9,
        "retention_kept_lines": 1.0,
        "retention_lost": 0.0,
        "calls": 10,
    }
    run = {"cache": "anthropic", "pause_minutes": 30.0, "priced_as": "claude-x", "rows": {"vanilla": row}}
    plain = "\n".join(render_timed({"timed": [run], "call_seconds": 10.0}))
    bound = {
        **run,
        "rows": {"vanilla": row, continuous.ALONE + "aggressive": {**row, "usd_vs_vanilla": 0.285}},
    }
    text = "\n".join(render_timed({"timed": [bound], "call_seconds": 10.0}))
    assert "each task alone: the bound" not in plain
    assert (
        "| each task alone: aggressive | $1.00 | **0.285** |" in text and "each task alone: the bound" in text
    )
