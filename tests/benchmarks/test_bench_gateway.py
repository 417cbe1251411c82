"""The team-gateway benchmark: its block of docs/BENCHMARKS.md is its results file, and it runs here.

The committed block is checked against the committed ``benchmarks/results/gateway.json`` (written on
the shared traces, too slow for a test). The benchmark itself runs for real on the bundled traces,
small: three serve processes on a throwaway PostgreSQL, one of them killed by PID, every request
compared with one process's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from readme_table import G_END, G_START, render_gateway  # noqa: E402


def test_doc_gateway_block_matches_its_results_file() -> None:
    result = json.loads((ROOT / "benchmarks" / "results" / "gateway.json").read_text(encoding="utf-8"))
    doc = (ROOT / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    block = G_START + doc.split(G_START, 1)[1].split(G_END, 1)[0] + G_END
    assert block == render_gateway(result), "gateway block is stale: run `make docs`"
    assert result["sessions"] >= 50 and result["processes"] == 3 and result["errors"] == 0
    assert all(v["differ"] == 0 for v in result["byte_equal"].values())


@pytest.mark.postgres
def test_bench_gateway_runs_and_compares_every_request(tmp_path: Path, pg_cluster: object) -> None:
    readme = tmp_path / "BENCHMARKS.md"
    shutil.copy(ROOT / "docs" / "BENCHMARKS.md", readme)
    out = tmp_path / "gateway.json"
    args = ["--traces", str(tmp_path / "none"), "--sessions", "4", "--calls", "6", "--kill-after", "10"]
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_gateway.py"),
            *args,
            "--out",
            str(out),
            "--readme",
            str(readme),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["source"] == "tests/data (bundled)" and result["sessions"] == 4
    assert set(result["runs"]) == {"direct", "single", "single_pg", "fleet", "fleet_kill"}
    fleet = result["runs"]["fleet"]
    assert len(fleet["served_by"]) == 3 and fleet["calls"] == result["calls"] == 24
    assert result["runs"]["fleet_kill"]["killed_after"] == 10 and result["runs"]["fleet_kill"]["calls"] == 24
    assert {n: v["differ"] for n, v in result["byte_equal"].items()} == {
        "single_pg": 0,
        "fleet": 0,
        "fleet_kill": 0,
    }
    assert result["runs"]["fleet"]["stub_keys"] > 0 and result["runs"]["fleet"]["keys_lost"] == 0
    assert render_gateway(result) in readme.read_text()
