"""Recall of the record's written files against the benchmark's two independent checkers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from eviction_helpers import ASTROID, DJANGO, Session

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "record_recall.py"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record_recall_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_recall_on_recorded_sessions() -> None:
    result = bench().measure([ASTROID, DJANGO])
    assert result["git_files"] >= 2 and result["recall_git"] == 1.0, result["misses"]["git"]
    assert result["regex_files"] >= 30 and result["recall_regex"] >= 0.97, result["misses"]["regex"]
    assert result["precision_vs_either"] >= 0.95


def test_checkers_are_not_vacuous() -> None:
    """Each checker finds the writes of a small session, and the record matches them."""
    s = Session("fix it")
    s.call("cd /testbed && sed -i 's/a/b/' pkg/a.py", "")
    s.call("cd /testbed && cat > new.py << 'EOF'\nprint(1)\nEOF", "")
    s.call("cd /testbed && git diff", "diff --git a/pkg/a.py b/pkg/a.py\n--- a/pkg/a.py\n+++ b/pkg/a.py")
    module = bench()
    assert module.git_truth(s.messages) == {"pkg/a.py"}
    assert module.regex_truth(s.messages) == {"pkg/a.py", "new.py"}
    assert module.record_written(s.messages) == {"pkg/a.py", "new.py"}


def test_the_record_of_a_continuous_session_names_each_finished_task(tmp_path: Path) -> None:
    """Files and outcome of each finished task, checked against that task's own git output and tests;
    ``lightmem2 resume`` prints them."""
    import gzip
    import json

    from lightmem_plugin.commands.resume import from_trace
    from lightmem_plugin.measure.traces import load_trace
    from lightmem_plugin.measure.traces.continuous import chain

    data = Path(__file__).resolve().parents[1] / "data"
    sources = [
        data / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz",
        data / "deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz",
        ASTROID,
    ]
    path = tmp_path / "chain.json.gz"
    path.write_bytes(gzip.compress(json.dumps(chain([load_trace(p) for p in sources])).encode()))
    result = bench().measure_tasks([path])
    assert result["finished_tasks"] == 2
    assert result["task_git_files"] >= 1 and result["task_recall_git"] == 1.0, result["task_misses"]
    printed = from_trace(str(path), "full", None)
    assert "Finished tasks:" in printed and "- task 1 (turn 1):" in printed and "- task 2 " in printed
