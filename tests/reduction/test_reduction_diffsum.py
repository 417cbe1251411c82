from __future__ import annotations

from pathlib import Path

import pytest

from lightmem_plugin.reduction import diffsum
from lightmem_plugin.reduction.truncate import select_by_score

DIFF = (Path(__file__).resolve().parent.parent / "data" / "reduction" / "git_show.diff").read_text("utf-8")


def test_unified_diff_is_recognised() -> None:
    assert diffsum.is_diff(DIFF.splitlines())
    wrapped = "<returncode>0</returncode>\n<output>\n" + DIFF + "</output>\n"
    assert diffsum.is_diff(wrapped.splitlines())


@pytest.mark.parametrize(
    "text",
    [
        "@@ -1,3 +1,3 @@ def f():\n-a\n+b\n",
        " context\n-old\n+new\n@@ -40,2 +40,2 @@\n-x\n+y\n",  # a pipe cut off the head
    ],
)
def test_hunks_without_file_headers_are_recognised(text: str) -> None:
    assert diffsum.is_diff(text.splitlines())


@pytest.mark.parametrize(
    "text",
    [
        "--- a heading in markdown\n+++ not really\nplain text\n",
        "E   - expected\nE   + actual\n",
        "@@ -1,3 +1,3 @@ then prose\nthat is not\na hunk\n",
        "",
    ],
)
def test_non_diffs_are_not_recognised(text: str) -> None:
    assert not diffsum.is_diff(text.splitlines())


def test_scores_headers_changes_and_context() -> None:
    lines = DIFF.splitlines()
    scores = diffsum.score_lines(lines)
    by_line = dict(zip(lines, scores, strict=True))
    assert by_line["commit 2ee20ccdf62450db611acc4a1a7e42f407ce8a14"] == diffsum.S_FILE_HEADER
    assert by_line["diff --git a/src/pkg/modutils.py b/src/pkg/modutils.py"] == diffsum.S_FILE_HEADER
    assert by_line["+++ b/src/pkg/modutils.py"] == diffsum.S_FILE_HEADER
    assert (
        by_line["@@ -302,9 +302,8 @@ def _get_relative_base_path(filename, path_to_check):"]
        == diffsum.S_HUNK_HEADER
    )
    assert by_line["-        path = _canonicalize_path(path)"] == diffsum.S_CHANGE
    assert by_line["+        if not (path := _normalize_path(path)):"] == diffsum.S_CHANGE
    assert by_line["    Resolve symlinks in the import path (#1253)"] == diffsum.S_AROUND
    context = "     return os.path.realpath(os.path.expanduser(path))"
    assert by_line[context] < diffsum.S_AROUND


def test_hunk_counts_end_the_hunk_so_trailing_text_is_not_context() -> None:
    text = "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n keep\n-old\n+new\n</output>\n"
    scores = diffsum.score_lines(text.splitlines())
    assert scores[-1] == diffsum.S_AROUND


def test_a_removed_line_that_looks_like_a_header_stays_a_change() -> None:
    text = "--- a/x\n+++ b/x\n@@ -1,2 +1,1 @@\n--- a/inner\n keep\n"
    scores = diffsum.score_lines(text.splitlines())
    assert scores[3] == diffsum.S_CHANGE


def test_selection_under_budget_keeps_every_change_and_drops_context() -> None:
    lines = DIFF.splitlines()
    scores = diffsum.score_lines(lines)
    keep = select_by_score([len(x) for x in lines], scores, 1500, 0)
    kept = [x for x, k in zip(lines, keep, strict=True) if k]
    changes = [x for x, s in zip(lines, scores, strict=True) if s >= diffsum.S_CHANGE]
    assert all(x in kept for x in changes)
    assert '     package = "mypypa"' not in kept
    assert sum(len(x) + 1 for x in kept) <= 1500
