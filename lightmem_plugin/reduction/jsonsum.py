"""JSON pass: a large JSON document keeps its shape and its first items, verbatim, line by line.

Why: API replies and dumps are mostly repetition (hundreds of records with the same keys). The agent
needs the structure and a few real records; the rest is archived. The pass runs only on text that
is one valid JSON value (no NaN/Infinity, nothing before or after it), so logs or code that merely
look like JSON are left to the other passes.

Why verbatim: this pass used to print a summary of its own (records re-serialised on one line, long
strings shortened, and ``"…(57 more items, 60 in all)"`` as if it were an element of the array).
Those lines were no lines of the output, and the last one read as data. DESIGN section 4 says every
line a pass keeps outside a stub is byte-exact, so now it only chooses lines: the top-level keys
first, then the first :data:`ITEMS` items of every array, shallow lines before deep ones, each
elided region behind a marker that names its line range. A document on one line (minified) has no
lines to choose from; it is left to head + tail.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import truncate
from .spec import PassSpec
from .work import MARK_COST, Piece, Work, selectable, with_protected

if TYPE_CHECKING:
    from .base import PassContext

MAX_JSON_CHARS = 8_000_000
"""Above this the parse itself is too costly for a pass; truncation handles such outputs."""
ITEMS = 2
"""Items shown of each array (while the budget lasts): the first ones, whole."""
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},]')
"""A JSON string (whole, escapes included) or one of the characters that shape the document."""
TOP = 12
"""Score of a line at depth 0; each level deeper scores one less (never below 2)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not valid JSON: {name}")


def parse(text: str) -> Any | None:
    """The JSON value in ``text`` (strict: no NaN/Infinity), or None when it is not one JSON document."""
    s = text.strip()
    if len(s) < 2 or len(s) > MAX_JSON_CHARS or s[0] not in "{[" or s[-1] not in "}]":
        return None
    try:
        return json.loads(s, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None


def line_places(lines: Sequence[str]) -> list[tuple[int, int]]:
    """(depth, rank) of each line of a JSON document: how many containers hold it, and the highest
    index it has among the items of the arrays around it (0: it belongs to the first item of each).

    A line that starts by closing containers (``  ],``) is placed where the container it closes
    sits, so an array's closing bracket ranks with the array, not with its last item. Brackets and
    commas inside strings do not count.
    """
    stack: list[list[int]] = []  # [is_array, index of the current item]
    places: list[tuple[int, int]] = []
    for line in lines:
        body = line.lstrip()
        closing = 0
        while closing < len(body) and body[closing] in "]}":
            closing += 1
        around = stack[: max(0, len(stack) - closing)]
        places.append((len(around), max((item for is_array, item in around if is_array), default=0)))
        for token in _TOKEN.findall(line):  # strings are skipped whole (JSON has none across lines)
            if token in "[{":
                stack.append([token == "[", 0])
            elif token in "]}":
                if stack:
                    stack.pop()
            elif token == "," and stack and stack[-1][0]:
                stack[-1][1] += 1
    return places


def score_lines(lines: Sequence[str]) -> list[int]:
    """A keep-priority per line: shallow first; lines past the first :data:`ITEMS` items of an
    array score 1 (never chosen on their own)."""
    return [1 if rank >= ITEMS else max(2, TOP - depth) for depth, rank in line_places(lines)]


WHAT = "chars of JSON (its first items shown)"


def select(work: Work, ctx: PassContext) -> list[Piece] | None:
    """The document's shallow lines and first items, verbatim, under ``capChars``; None when the work
    text is not one JSON document of several lines."""
    if not selectable(work) or len(work.lines) < 3:
        return None
    value = parse("\n".join(work.lines))
    if not isinstance(value, dict | list):
        return None
    lengths = [len(line) for line in work.lines]
    keep = truncate.select_by_score(lengths, score_lines(work.lines), ctx.table.capChars, MARK_COST)
    if all(keep):
        return None
    return with_protected(work, keep, WHAT, ctx.table.keepErrorLines)


PASS = PassSpec(
    "json", "select", False, "one JSON document keeps its shape and first items, verbatim", select, WHAT
)
