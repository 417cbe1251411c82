"""``benchmarks/frame_audit.py`` on the bundled real sessions: the model reads how each command ended and
every error line, in the modes that reduce, and each repeat marker names the call whose output shows
its lines; and the audit does see it when they are hidden or misnamed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from frame_audit import audit  # noqa: E402

SESSIONS = sorted((ROOT / "tests" / "data").glob("deepseek_*.json.gz"))


@pytest.mark.parametrize("mode", ["normal", "aggressive"])
def test_no_status_line_or_error_line_is_hidden(mode: str) -> None:
    counts = audit(SESSIONS, mode)
    assert counts["sessions"] == 2 and counts["with_status"] >= 40 and counts["with_errors"] >= 1
    assert counts["searches"] >= 5
    assert counts["changed_outside_stubs"] == 0, counts
    assert counts["status_hidden"] == 0 and counts["errors_hidden"] == 0 and counts["matches_hidden"] == 0, (
        counts
    )
    assert counts["repeat_markers"] >= 2, counts  # the sessions do fold lines shown before
    assert counts["repeats_unnamed"] == 0 and counts["repeats_misnamed"] == 0, counts


def test_the_audit_sees_a_status_line_folded_away(monkeypatch: pytest.MonkeyPatch) -> None:
    """As before the frame was known: the whole text reduced, repeated status lines folded."""
    from lightmem_plugin.reduction import envelope, linedup

    monkeypatch.setattr(envelope, "_XML", re.compile(r"(?!)"))
    monkeypatch.setattr(envelope, "is_status_line", lambda line: False)
    monkeypatch.setattr(linedup, "protected_lines", lambda *args: set())
    assert audit(SESSIONS, "normal")["status_hidden"] >= 1


def test_the_audit_sees_a_line_of_ours_inside_the_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """As before the stub went before the body's last line break: a blank line under the closing tag."""
    from lightmem_plugin.reduction import dedup

    monkeypatch.setattr(dedup, "_with_stub", lambda text, stub_line: f"{text}\n{stub_line}")
    assert audit(SESSIONS, "normal")["changed_outside_stubs"] >= 1


def test_the_audit_sees_a_marker_that_names_the_wrong_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line remembered as shown by the call before the one that showed it: the markers then name
    outputs that lack their lines (or the output's own call)."""
    from lightmem_plugin.reduction import linedup

    previous: dict[int, str | None] = {}
    add_as_shown = linedup.LineIndex.add

    def add(self: linedup.LineIndex, text: str, source: str | None = None) -> None:
        wrong = previous.get(id(self))
        previous[id(self)] = source
        add_as_shown(self, text, wrong or source)

    monkeypatch.setattr(linedup.LineIndex, "add", add)
    counts = audit(SESSIONS, "normal")
    assert counts["repeats_misnamed"] >= 1, counts


def test_the_audit_sees_a_marker_that_names_no_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """As before sources were kept: every marker says "as shown in an earlier output"."""
    from lightmem_plugin.reduction import linedup

    unnamed = linedup.marker
    monkeypatch.setattr(linedup, "marker", lambda first, last, sources=(): unnamed(first, last))
    counts = audit(SESSIONS, "normal")
    assert counts["repeat_markers"] >= 2 and counts["repeats_unnamed"] == counts["repeat_markers"], counts
