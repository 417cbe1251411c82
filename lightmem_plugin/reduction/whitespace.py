"""Whitespace pass: drop runs of blank lines, and nothing else.

Why so little: every line the model sees outside a stub must be byte-exact (DESIGN I4): stripping a
trailing blank turned a diff context line ``" "`` into ``""``, and an agent that copies a kept line
into an edit must get the real bytes. So the pass only removes lines, never bytes of a line: the
second and later lines of a run of blank (whitespace-only) lines (the first is kept as it was), and
the caret lines Python 3.11+ prints under a traceback's code line (only ``^`` and ``~``), which
point at a column and cost ~10 tokens each, dozens per traceback. ANSI escapes stay
too (the patterns that classify lines look at an escape-free copy, :func:`strip_ansi`). It reports
the original line number of each kept line so that later passes can still name exact line ranges
of the archived original in their stubs.

Lines are split the way the artifact registry splits them for ``lightmem2_recover(lines=...)``
(``str.splitlines``), so line numbers in stubs and in recovery agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .ansi import strip_ansi as strip_ansi  # re-exported
from .spec import PassSpec
from .work import TIDIED_WHAT, Work

_CARETS = re.compile(r"^\s*[\^~]+\s*$")


def split_lines(text: str) -> list[str]:
    """Lines of ``text`` without their terminators, numbered as the registry numbers them."""
    return text.splitlines()


def line_sizes(text: str) -> list[int]:
    """Per line of :func:`split_lines`, its chars with its terminator (none after a last line
    that has no newline)."""
    return [len(x) for x in text.splitlines(keepends=True)]


def clean(lines: Sequence[str]) -> tuple[list[str], list[int]]:
    """Kept lines (byte-exact) and, for each, the 0-based index of the input line it came from.

    Keeps only the first of consecutive blank (whitespace-only) lines and drops caret lines. Pure and
    linear in the input.
    """
    out: list[str] = []
    index: list[int] = []
    prev_blank = False
    for i, line in enumerate(lines):
        blank = not line.strip()
        if (blank and prev_blank) or (not blank and _CARETS.match(line)):
            continue
        prev_blank = blank
        out.append(line)
        index.append(i)
    return out, index


def clean_work(work: Work) -> Work:
    """The whitespace pass on a :class:`Work` (line origins composed with the cleaning's)."""
    lines, index = clean(work.lines)
    origin = None if work.origin is None else [work.origin[i] for i in index]
    ends = None if work.origin_end is None else [work.origin_end[i] for i in index]
    return work.derived(lines, origin, ends, work.what)


PASS = PassSpec(
    "whitespace",
    "clean",
    True,
    "blank-line runs and traceback carets (kept lines stay byte-exact)",
    clean_work,
    TIDIED_WHAT,
)
