"""``benchmarks/kind_audit.py`` on the bundled real sessions: the file views the agent later quoted stay in
view, and the audit does see it when a reduction hides them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from kind_audit import audit  # noqa: E402

SESSIONS = sorted((ROOT / "tests" / "data").glob("deepseek_*.json.gz"))


@pytest.mark.parametrize("mode", ["vanilla", "normal", "aggressive"])
def test_every_later_used_line_of_a_file_view_stays_in_view(mode: str) -> None:
    kinds = audit(SESSIONS, mode)
    assert kinds["file_view"]["uses"] >= 10, kinds  # the sessions do quote what they viewed
    assert all(k["not_kept"] == 0 for k in kinds.values()), kinds


def test_the_audit_sees_file_views_cut_by_head_and_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the file-view pass, views fall to head + tail, as every output did before kinds."""
    from lightmem_plugin.reduction import passes

    monkeypatch.setattr(passes, "PASSES", tuple(p for p in passes.PASSES if p.name != "fileview"))
    kinds = audit(SESSIONS, "normal")
    assert kinds["file_view"]["not_kept"] >= 5, kinds
