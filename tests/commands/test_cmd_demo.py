from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lightmem_plugin.commands import demo
from lightmem_plugin.measure.traces import load_trace

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz"
NUMBER = r"[\d,]+"


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``lightmem2 demo`` on the bundled session, once for the module (it replays 184 calls 8 times, and once more into the ledger)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LIGHTMEM2_HOME", str(tmp_path_factory.mktemp("demo-home")))
        yield demo.run()


def _rows(text: str) -> dict[str, list[str]]:
    lines = text.splitlines()
    return {p: next(line for line in lines if line.startswith(p + " ")).split() for p in demo.POLICIES}


def _int(cell: str) -> int:
    return int(cell.replace(",", ""))


def test_demo_prints_every_policy_then_report_and_visual_and_reruns_cleanly() -> None:
    first = demo.run(str(TRACE))
    lines = first.splitlines()
    for policy in demo.POLICIES:
        assert any(line.startswith(policy + " ") for line in lines), policy
    assert f"session {demo.DEMO_SESSION_ID}" in first and "38 calls" in first
    assert "no pause longer than the cache's TTL, so no cold start" in first  # a session without times
    html, png = (Path(p) for p in lines[-2:])
    assert html.suffix == ".html" and html.exists()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    second = demo.run(str(TRACE))
    assert "38 calls" in second


def test_the_three_modes_give_three_rows_and_the_why_line_is_their_figures(bundled: str) -> None:
    """Issue 41: the single-task demo printed K/vanilla 0.906 for all three modes. On the bundled
    three-task session with pauses, each mode is its own row, and the line under the table gives the
    differences the table shows and the cold starts the pauses made."""
    rows = _rows(bundled)
    sent = {p: _int(r[1]) for p, r in rows.items()}
    money = {p: float(r[7].lstrip("$")) for p, r in rows.items()}
    assert sent["vanilla"] > sent["conservative"] > sent["normal"] > sent["aggressive"]
    assert money["vanilla"] > money["conservative"] > money["normal"] > money["aggressive"]
    why = next(line for line in bundled.splitlines() if line.startswith("why: "))
    m = re.search(rf"sent ({NUMBER}) input tokens fewer than conservative; aggressive ({NUMBER}) fewer", why)
    assert m is not None, why
    assert _int(m[1]) == sent["conservative"] - sent["normal"]
    assert _int(m[2]) == sent["normal"] - sent["aggressive"]
    assert re.search(r"collapsed [1-9]\d* finished tasks?, each into one stub", why), why
    cold = {p: int(r[3]) for p, r in rows.items()}
    assert set(cold.values()) == {2}  # two pauses of 30 minutes, each a cold start on a 5-minute cache
    assert "the 2 pauses of 30 minutes outlived the cache's 300 s: 2 cold start(s) in every policy" in why
    # normal changed the past at both (a free break): part of what it sent fewer is that
    assert "at 2 cold start(s) the old outputs it had kept whole cut again" in why


def test_the_report_says_what_it_counts_and_gives_the_figures_it_names(bundled: str) -> None:
    """The table counts with time on Anthropic's cache; the report under it is the ledger's model, with
    no clock. The demo says so, and the figures it names for that model are the report's."""
    note = re.search(
        rf"no clock.*normal is K ({NUMBER}) vs ({NUMBER}) vanilla, input ({NUMBER}) vs ({NUMBER}) tokens\.$",
        bundled,
        re.M,
    )
    assert note is not None, bundled
    report = re.search(
        rf"^K ({NUMBER}) vs ({NUMBER}) vanilla.*input ({NUMBER}) vs ({NUMBER}) tokens$", bundled, re.M
    )
    assert report is not None, bundled
    assert (_int(report[1]), _int(report[2])) == (_int(note[1]), _int(note[2]))
    assert (_int(report[3]), _int(report[4])) == (_int(note[3]), _int(note[4]))
    # vanilla does nothing at a pause: the table's timed replay sends what the report counts
    assert _int(report[4]) == _int(_rows(bundled)["vanilla"][1])
    assert "top reductions (tokens not sent" in bundled and "top reductions: none" not in bundled


def test_the_bundled_chain_is_what_its_script_builds_and_stays_small() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import demo_chain
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    bundled = demo.bundled_chain().read_bytes()
    assert bundled == demo_chain.build(), "stale: run `python benchmarks/demo_chain.py`"
    assert len(bundled) < 300_000
    trace = load_trace(demo.bundled_chain())
    assert trace.id == demo.DEMO_SESSION_ID and all(c.at is not None for c in trace.calls)


def test_bundled_sessions_are_shipped_in_the_package() -> None:
    assert demo.bundled_trace().exists() and demo.bundled_chain().exists()
