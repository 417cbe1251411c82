"""Whitespace pass: drop what a terminal would not show and what carries no information.

Why it is (nearly) lossless: it only removes ANSI escape sequences (colours, cursor moves), trailing
whitespace and repeated blank lines. Every line it keeps is its input line minus those bytes, and it
reports the original line number of each kept line so that later passes can still name exact line
ranges of the archived original in their stubs.

Lines are split the way the artifact registry splits them for ``lightmem2_recover(lines=...)``
(``str.splitlines``), so line numbers in stubs and in recovery agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .spec import PassSpec
from .work import Work

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), and two-byte escapes (ESC + one char).
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")


def split_lines(text: str) -> list[str]:
    """Lines of ``text`` without their terminators, numbered as the registry numbers them."""
    return text.splitlines()


def strip_ansi(line: str) -> str:
    """``line`` without ANSI escape sequences."""
    return _ANSI_RE.sub("", line) if "\x1b" in line else line


def clean(lines: Sequence[str]) -> tuple[list[str], list[int]]:
    """Cleaned lines and, for each, the 0-based index of the input line it came from.

    Strips ANSI escapes and trailing whitespace, and keeps only the first of consecutive blank
    lines. Pure and linear in the input size.
    """
    out: list[str] = []
    index: list[int] = []
    prev_blank = False
    for i, raw in enumerate(lines):
        line = strip_ansi(raw).rstrip()
        blank = not line
        if blank and prev_blank:
            continue
        prev_blank = blank
        out.append(line)
        index.append(i)
    return out, index


def clean_work(work: Work) -> Work:
    """The whitespace pass on a :class:`Work` (line origins composed with the cleaning's)."""
    lines, index = clean(work.lines)
    origin = None if work.origin is None else [work.origin[i] for i in index]
    return Work(work.original, lines, origin, work.what)


PASS = PassSpec("whitespace", "clean", True, "ANSI escapes, trailing blanks, blank-line runs", clean_work)
