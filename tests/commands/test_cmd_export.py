"""lightmem2 export: JSON, Markdown and Obsidian Canvas of the session record plus the ledger totals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from crossproc import SEEDS, outputs
from ledger_rows import make_session
from search_replay import Replayed, replay

from lightmem_plugin.commands import export
from lightmem_plugin.errors import UsageError
from lightmem_plugin.eviction.record_store import RecordStore
from lightmem_plugin.store.ledger import Ledger

# a full-level rendering with every section, as record_render writes it
FULL = """Session record (turn 42):
Goal (turn 30): make the CSV importer skip blank rows
Open errors:
- turn 40: `pytest tests/test_import.py` -> AssertionError: 3 != 2
Decisions in force:
- use csv.DictReader (instead of manual split) because quoted commas broke parsing [turn 35]
Files modified: src/importer.py, tests/test_import.py
Files created: src/rows.py
Tasks: t1-t2 done; t3 active; current: fix blank row handling
Dropped decisions:
- D2 use pandas (superseded at turn 35 by D3)
- D1 parse with regex (superseded at turn 20 by D2)
Files read: README.md
Earlier goals:
- turn 1: add a CSV importer"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    return replay(tmp_path_factory.mktemp("replay"))


@pytest.fixture
def ledger(tmp_path: Path, run: Replayed) -> Ledger:
    led = Ledger(tmp_path / "ledger.sqlite3")
    for rec in make_session(run.session, "normal", 8):
        led.record_call(rec)
    return led


@pytest.fixture
def crafted(tmp_path: Path) -> RecordStore:
    store = RecordStore(tmp_path / "records")
    store.append("csv-session", 42, {"critical": FULL[:80], "standard": FULL[:300], "full": FULL})
    return store


def test_json_matches_the_record_and_the_ledger(run: Replayed, ledger: Ledger) -> None:
    data = json.loads(export.run("json", store=run.records, ledger=ledger))
    snap = run.records.snapshot()
    assert data["session"] == run.session and data["turn"] == snap["turn"]
    assert data["record"] == {level: snap[level] for level in ("critical", "standard", "full")}
    assert data["sections"]["files"]["modified"] == ["pydicom/config.py"]
    assert "test_fix.py" in data["sections"]["files"]["created"]
    assert data["sections"]["goal"].startswith("Goal (turn 1): pydicom should not define handler")
    totals = ledger.totals(run.session)
    assert data["ledger"]["calls"] == totals.calls == 8
    assert data["ledger"]["inputTokens"] == totals.input_tokens


def test_sections_parse_every_part(crafted: RecordStore) -> None:
    s = json.loads(export.run("json", store=crafted, ledger=Ledger(crafted.root / "l.sqlite3")))["sections"]
    assert s["openErrors"] == ["turn 40: `pytest tests/test_import.py` -> AssertionError: 3 != 2"]
    assert s["files"] == {
        "modified": ["src/importer.py", "tests/test_import.py"],
        "created": ["src/rows.py"],
        "read": ["README.md"],
    }
    assert s["tasks"] == "t1-t2 done; t3 active; current: fix blank row handling"
    assert s["earlierGoals"] == ["turn 1: add a CSV importer"]
    assert [(x["id"], x["by"], x["turn"]) for x in s["supersession"]] == [("D2", "D3", 35), ("D1", "D2", 20)]


def _canvas(text: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text)
    assert set(data) == {"nodes", "edges"}
    ids = [n["id"] for n in data["nodes"]]
    assert len(ids) == len(set(ids))
    for node in data["nodes"]:
        assert node["type"] == "text" and isinstance(node["text"], str)
        assert all(isinstance(node[k], int) for k in ("x", "y", "width", "height"))
    for edge in data["edges"]:
        assert set(edge) == {"id", "fromNode", "toNode", "label"}
        assert edge["fromNode"] in ids and edge["toNode"] in ids
    return data


def test_canvas_has_the_supersession_chain(crafted: RecordStore) -> None:
    data = _canvas(export.run("canvas", store=crafted, ledger=Ledger(crafted.root / "l.sqlite3")))
    text = {n["id"]: n["text"] for n in data["nodes"]}
    chain = [
        (text[e["fromNode"]][:5], text[e["toNode"]][:5], e["label"])
        for e in data["edges"]
        if e["id"] in ("e-D1", "e-D2")
    ]
    assert chain == [("D2 us", "D3 (i", "superseded at turn 35"), ("D1 pa", "D2 us", "superseded at turn 20")]
    assert any(t == "modified: src/importer.py" for t in text.values())


def test_canvas_of_the_replayed_session(run: Replayed, ledger: Ledger) -> None:
    data = _canvas(export.run("canvas", store=run.records, ledger=ledger))
    assert "8 calls" in data["nodes"][0]["text"]
    assert {e["label"] for e in data["edges"]} >= {"goals", "files"}


def test_markdown(run: Replayed, ledger: Ledger, crafted: RecordStore) -> None:
    md = export.run("markdown", store=run.records, ledger=ledger)
    assert md.startswith(f"# lightmem2 session {run.session}\n")
    assert run.records.snapshot()["full"] in md and "| calls | 8 |" in md
    fence = md.splitlines()[4][:-4]
    assert fence == "````" and md.count(fence) == 2  # the goal quotes ``` so the fence is longer
    assert "No ledger totals" in export.run("markdown", store=crafted, ledger=ledger)


EXPORT_CODE = """
import sys, tempfile
from pathlib import Path
from ledger_rows import make_session
from search_replay import replay
from lightmem_plugin.commands import export
from lightmem_plugin.store.ledger import Ledger
with tempfile.TemporaryDirectory() as d:
    run = replay(Path(d) / "replay")
    with Ledger(Path(d) / "ledger.sqlite3") as led:
        for rec in make_session(run.session, "normal", 8):
            led.record_call(rec)
        out = [export.run(fmt, store=run.records, ledger=led) for fmt in export.FORMATS]
sys.stdout.buffer.write("\\n<<<export>>>\\n".join(out).encode())
"""


def test_exports_are_deterministic_across_processes(run: Replayed, ledger: Ledger) -> None:
    # each process replays the trace itself, so the record, the archive keys and the exports are its own
    got = outputs(EXPORT_CODE, paths=(Path(__file__).parent,))
    assert len(got) == len(SEEDS) and len(set(got)) == 1, "an export depends on the hash seed"
    by_fmt = dict(zip(export.FORMATS, got[0].decode().split("\n<<<export>>>\n"), strict=True))
    for fmt in export.FORMATS:  # and the same bytes this process (another hash seed) writes
        assert by_fmt[fmt] == export.run(fmt, store=run.records, ledger=ledger), fmt
    data = json.loads(by_fmt["json"])
    assert data["session"] == run.session and data["ledger"]["calls"] == 8
    assert data["sections"]["files"]["modified"] == ["pydicom/config.py"]
    assert by_fmt["markdown"].startswith(f"# lightmem2 session {run.session}\n")
    assert "8 calls" in json.loads(by_fmt["canvas"])["nodes"][0]["text"]


@pytest.mark.parametrize(
    ("fmt", "session", "needle"),
    [("pdf", None, 'unknown export format "pdf"'), ("json", "nope", 'unknown session "nope"')],
)
def test_bad_input(run: Replayed, ledger: Ledger, fmt: str, session: str | None, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        export.run(fmt, session, store=run.records, ledger=ledger)


def test_defaults_to_the_data_dir(isolated_home: Path) -> None:
    with pytest.raises(UsageError, match="no session record yet"):
        export.run("json")
    RecordStore(isolated_home / "records").append("s", 3, {"critical": "c", "standard": "s", "full": FULL})
    assert json.loads(export.run("json"))["ledger"] is None
