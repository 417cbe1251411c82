"""Diff pass: a diff the agent asked for stays whole; a very long one keeps headers and changes.

Why whole: the agent printed the diff to read it, like a file view, and on the dev traces it acted on
its changed lines and on the context next to them (a ``-`` line it restored, the unchanged line it
anchored a ``sed`` on). Cut to ``capChars`` before, a diff lost 19% (normal) / 29% (aggressive) of
its later-used lines, changed lines among them. So a diff up to ``fileViewChars`` is kept whole, as
a file view is. A longer one keeps file headers, hunk headers and every changed line first, then
the context nearest the changes, under the same budget; hunk headers keep the line numbers, so the
reader still knows where each change sits. Lines around the diff (a ``git show`` commit header, a
tool envelope) are kept too. Hunk bodies are walked by the counts in their ``@@ -a,b +c,d @@``
header, so text after the last hunk is never mistaken for context.

A diff cut by the command that printed it (``git diff ... | tail -100``) has no ``---``/``+++``
header: it is still a diff when a hunk header is followed by hunk lines (before, such a diff was
not recognised and fell to head + tail, which hid its changes).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import truncate
from .spec import PassSpec
from .work import Piece, Work, selectable, unchanged

if TYPE_CHECKING:
    from .base import PassContext

S_FILE_HEADER = 100
S_HUNK_HEADER = 90
S_CHANGE = 70
S_AROUND = 50
S_CONTEXT = 0
S_NEAR_CHANGE = (10, 5)
"""Context lines 1 and 2 lines away from a change: shown when the budget has room to spare."""

_HUNK_RE = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_FILE_HEADER_RE = re.compile(
    r"^(?:commit [0-9a-f]{7,40}\b|diff --git |diff -|--- |\+\+\+ |index [0-9a-f]+\.\."
    r"|new file mode |deleted file mode |old mode |new mode |similarity index "
    r"|rename (?:from|to) |copy (?:from|to) |Binary files )"
)


_HUNK_LINE = re.compile(r"^(?:[ +\\-]|$)")
"""A line of a hunk body: context (a space, or empty where a tool strips it), added, removed, or a
``\\ No newline at end of file`` note."""


def is_diff(lines: Sequence[str]) -> bool:
    """True when ``lines`` hold a unified diff: a ``---``/``+++`` pair followed by a hunk header, or
    (a diff whose head a pipe cut off) a hunk header followed by at least two hunk lines."""
    for i in range(len(lines) - 2):
        if lines[i].startswith("--- ") and lines[i + 1].startswith("+++ ") and _HUNK_RE.match(lines[i + 2]):
            return True
        if _HUNK_RE.match(lines[i]) and all(_HUNK_LINE.match(x) for x in lines[i + 1 : i + 3]):
            return True
    return False


def score_lines(lines: Sequence[str]) -> list[int]:
    """A keep-priority per line: headers, then changes, then text around the diff; context is 0."""
    scores: list[int] = []
    old_left = new_left = 0
    headed = False  # a header came: before one, +/- lines are the body of a hunk a pipe cut into
    for line in lines:
        if old_left > 0 or new_left > 0:
            if line.startswith("+"):
                new_left -= 1
                scores.append(S_CHANGE)
                continue
            if line.startswith("-"):
                old_left -= 1
                scores.append(S_CHANGE)
                continue
            if line.startswith(" ") or line == "":
                old_left -= 1
                new_left -= 1
                scores.append(S_CONTEXT)
                continue
            if line.startswith("\\"):
                scores.append(S_CONTEXT)
                continue
            old_left = new_left = 0  # the hunk ended early (a truncated diff): fall through
        m = _HUNK_RE.match(line)
        if m:
            old_left = int(m.group(1)) if m.group(1) is not None else 1
            new_left = int(m.group(2)) if m.group(2) is not None else 1
            scores.append(S_HUNK_HEADER)
            headed = True
        elif _FILE_HEADER_RE.match(line):
            scores.append(S_FILE_HEADER)
            headed = True
        elif not headed and line.startswith(("+", "-")):
            scores.append(S_CHANGE)
        elif line.startswith("\\"):
            scores.append(S_CONTEXT)
        else:
            scores.append(S_AROUND if line.strip() else 0)
    _near_changes(scores)
    return scores


def _near_changes(scores: list[int]) -> None:
    """Give context lines next to a changed line a small claim on spare budget."""
    changes = [i for i, s in enumerate(scores) if s == S_CHANGE]
    for i in changes:
        for dist, bonus in enumerate(S_NEAR_CHANGE, start=1):
            for k in (i - dist, i + dist):
                if 0 <= k < len(scores) and scores[k] < bonus:
                    scores[k] = bonus


WHAT = "chars of diff (context lines elided)"


def select(work: Work, ctx: PassContext) -> list[Piece] | None:
    """The whole diff when it fits ``fileViewChars``; else headers and changed lines first, then the
    context nearest them, under that budget, and one stub."""
    if not selectable(work) or not is_diff(work.lines):
        return None
    if work.chars() <= ctx.table.fileViewChars:
        return unchanged(work)
    lengths = [len(line) for line in work.lines]
    keep = truncate.select_by_score(lengths, score_lines(work.lines), ctx.table.fileViewChars, 0)
    kept: list[Piece] = [line for line, k in zip(work.lines, keep, strict=True) if k]
    return [*kept, work.whole(WHAT)]


PASS = PassSpec(
    "diff", "select", False, "a diff stays whole, or keeps its headers and changed lines", select, WHAT
)
