"""The cost / retention frontier (`benchmarks/frontier.py`): its judgements, its settings, its table.

The committed block of docs/BENCHMARKS.md is checked against the committed results file (both written by `make
bench` on the shared traces). The replay itself runs here on one bundled session, in a worker process
as `make bench` runs it, to show that a setting's config reaches the pipeline there.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import frontier  # noqa: E402
from readme_table import F_END, F_START, render_frontier  # noqa: E402

from lightmem_plugin.config import Config  # noqa: E402

ROW = {
    "K_charged_vs_vanilla": 0.75,
    "K_charged_all_vs_vanilla": 0.83,
    "retention_kept_lines": 0.962,
    "error_lines_kept": 1.0,
    "retention_lost": 0.0,
}
AGGRESSIVE, SINGLE_TASK = (
    next(t for t in frontier.TARGETS if t.name == n) for n in ("#17 aggressive", "#18 single-task")
)


def test_judge_names_each_miss_with_its_distance() -> None:
    assert frontier.judge(ROW, AGGRESSIVE) == ["K 0.010 over"]
    # #18 counts own-words uses in K charged
    assert frontier.judge(ROW, SINGLE_TASK) == ["K 0.130 over"]
    met = ROW | {"K_charged_vs_vanilla": 0.74}
    assert frontier.judge(met, AGGRESSIVE) == []
    worse = ROW | {"retention_kept_lines": 0.93, "error_lines_kept": 0.985, "retention_lost": 0.0002}
    assert frontier.judge(worse, AGGRESSIVE) == [
        "K 0.010 over",
        "kept lines 2.0 pt short",
        "error lines cut",
        "0.02% lost",
    ]


def test_every_setting_is_a_valid_config_that_changes_what_it_names() -> None:
    names = [s.name for s in frontier.SETTINGS]
    assert len(set(names)) == len(names)
    defaults = Config()
    for s in frontier.SETTINGS:
        config = Config.model_validate(s.overrides)
        if "(default)" in s.name:
            assert config == defaults, s.name
        else:
            assert config != defaults, f"{s.name} replays the defaults"
        assert s.mode in ("normal", "aggressive")
    # a target for each mode the frontier replays
    assert {t.mode for t in frontier.TARGETS} == {s.mode for s in frontier.SETTINGS}


def test_doc_frontier_block_matches_its_results_file() -> None:
    result = json.loads((ROOT / "benchmarks" / "results" / "frontier.json").read_text(encoding="utf-8"))
    doc = (ROOT / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    block = F_START + doc.split(F_START, 1)[1].split(F_END, 1)[0] + F_END
    assert block == render_frontier(result), "frontier table is stale: run `make docs`"
    assert result["order"] == [s.name for s in frontier.SETTINGS], "frontier.json is from other settings"
    for name, row in result["rows"].items():  # the verdicts in the file are the judge's, on its figures
        targets = [t for t in frontier.TARGETS if t.mode == row["mode"]]
        assert row["targets"] == {t.name: frontier.judge(row, t) for t in targets}, name


def test_measure_replays_each_setting_with_its_own_config(tmp_path: Path) -> None:
    swe = tmp_path / "swe"
    swe.mkdir()
    shutil.copy(ROOT / "tests" / "data" / "deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz", swe)
    settings = (
        frontier.Setting("normal (default)", "normal", {}),
        frontier.Setting(
            "normal, everything cut",
            "normal",
            {"reduction": {"normal": {"fileViewChars": 0, "triggerChars": 0}}},
        ),
    )
    result = frontier.measure(swe, settings, workers=2)
    default, cut = (result["rows"][s.name] for s in settings)
    assert result["sessions"] == 1 and result["calls"] > 10
    assert cut["K"] < default["K"]  # the override reached the worker's pipeline
    assert cut["retention_kept_lines"] <= default["retention_kept_lines"]
    assert default["targets"] == {"#17 normal": frontier.judge(default, frontier.TARGETS[0])}
    assert 0 < cut["K_vs_vanilla"] < default["K_vs_vanilla"] <= 1.0
