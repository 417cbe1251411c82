"""Search results: the match lines stay; a long result keeps every file's first matches.

Why: an agent greps to find *where* (which files, which lines) and then opens one. A search result
up to ``fileViewChars`` is kept whole. Beyond that, head + tail would hide whole files from the
agent; instead matches are taken file by file in rounds (every file's first match, then every
file's second, ...) while the budget lasts, so each file that matched is named at least once (up to
the hard cap) and each elided run is a line-range marker that recovers it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .spec import PassSpec
from .work import MARK_COST, Piece, Work, unchanged, with_protected

if TYPE_CHECKING:
    from .base import PassContext

WHAT = "chars of search results (first matches of every file shown)"
_FILE = re.compile(r"^([^\s:][^:\n]{0,300}?)(?::\d+[:-]|-\d+-)")


def file_of(line: str) -> str | None:
    """The file a ``path:line:`` (or context ``path-line-``) search line belongs to."""
    m = _FILE.match(line)
    return m.group(1) if m else None


def select(work: Work, ctx: PassContext) -> list[Piece] | None:
    """All matches when they fit ``fileViewChars``; else rounds of matches per file."""
    if work.origin is None:
        return None
    table = ctx.table
    if work.chars() <= table.fileViewChars:
        return unchanged(work)
    groups: dict[str, list[int]] = {}
    loose: list[int] = []
    for i, line in enumerate(work.lines):
        name = file_of(line)
        (groups.setdefault(name, []) if name is not None else loose).append(i)
    keep = [False] * len(work.lines)
    budget = table.fileViewChars
    used = 0
    for i in loose[:3] + loose[-3:]:  # lines that are not matches: a header, an error, a count
        keep[i] = True
        used += len(work.lines[i]) + 1
    depth = 0
    while used < budget and any(depth < len(g) for g in groups.values()):
        for indexes in groups.values():
            if depth < len(indexes):
                i = indexes[depth]
                cost = len(work.lines[i]) + 1 + (MARK_COST if depth else 0)
                if depth == 0 or used + cost <= budget:
                    keep[i] = True
                    used += cost
        depth += 1
    return with_protected(work, keep, WHAT, table.keepErrorLines)


PASS = PassSpec(
    "search",
    "select",
    False,
    "search results keep the match lines, every file named",
    select,
    WHAT,
    kinds=("search",),
)
