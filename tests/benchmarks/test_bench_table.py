from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from readme_table import END, START, render  # noqa: E402


def test_readme_table_matches_results_file() -> None:
    results = json.loads((ROOT / "benchmarks" / "results" / "results.json").read_text(encoding="utf-8"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = START + readme.split(START, 1)[1].split(END, 1)[0] + END
    assert block == render(results), "README benchmark table is stale: run `make bench`"


def test_results_cover_vanilla_modes_and_oracle_on_both_trace_sets() -> None:
    results = json.loads((ROOT / "benchmarks" / "results" / "results.json").read_text(encoding="utf-8"))
    for set_name in ("swe", "claude-code"):
        rows = results["traces"][set_name]["plain"]
        for name in ("vanilla", "conservative", "normal", "aggressive", "oracle"):
            assert name in rows
        assert rows["vanilla"]["K_vs_vanilla"] == 1.0
        assert all(
            r["retention_lost"] <= rows["vanilla"]["retention_lost"]
            for n, r in rows.items()
            if n in ("conservative", "normal", "aggressive")
        )
