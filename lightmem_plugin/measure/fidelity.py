"""Bytes outside stubs: every line a reduction shows must be a line of the original, in order.

Why a checker: DESIGN section 4 promises that outside a stub every line a pass keeps is byte-exact,
whitespace included. Retention only looks at what the agent later quoted; this looks at every line
the model was shown. A reduced tool output passes when, once the lightmem2 lines are set aside,
its lines are a subsequence of the original's lines.

Set aside as ours:

- stub and marker lines: every line that starts with ``[lightmem2`` (the archive stub of
  ``reduction/base.py``, the in-place ``Mark`` of ``reduction/work.py``, the repeat ``marker`` of
  ``reduction/linedup.py``, the ``reference`` of ``reduction/dedup.py``, the eviction stub of
  ``eviction/stubs.py``);
- the session record an eviction stub carries: everything after a ``[lightmem2 session record]``
  line (the record is rendered text of ours, not tool output);
- the stabilizer's blocks, which are appended text parts, not tool output lines: a trailing
  ``\\n\\n[lightmem2 now: ...]`` tail or ``\\n\\n[lightmem2 session values: ...]`` block is cut off
  before the lines are compared. The stabilizer replaces values by placeholders only in the head
  (system/developer messages and the first user messages), never in tool outputs.

A line too long to keep whole is cut inside, with the stub on the same line (``start[stub]end``): the
text before the stub must start an original line, the text after it end one (at or after that line).

Anything else is a changed line: a stripped trailing space, a line cut without a stub on it, a
rewritten value.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from typing import Any

import xxhash

from ..prefix.stabilizer import SESSION_BLOCK_PREFIX, TAIL_PREFIX

MARKER_PREFIX = "[lightmem2"
RECORD_LINE = "[lightmem2 session record]"
_BLOCKS = (TAIL_PREFIX, SESSION_BLOCK_PREFIX)


def is_marker_line(line: str) -> bool:
    """True for a line lightmem2 wrote (stub, marker, reference, eviction stub)."""
    return line.startswith(MARKER_PREFIX)


def strip_blocks(text: str) -> str:
    """``text`` without the stabilizer's trailing tail / session-values blocks."""
    changed = True
    while changed:
        changed = False
        for prefix in _BLOCKS:
            cut = text.rfind(prefix)
            if cut >= 0 and text.endswith("]") and "\n" not in text[cut + len(prefix) :]:
                text, changed = text[:cut], True
    return text


_INLINE_STUB = re.compile(r"\[lightmem2[^\]\n]*\]")


def _inline_stub(line: str) -> tuple[str, str] | None:
    """(text before, text after) a stub that shares its line with cut-line text, else None."""
    m = _INLINE_STUB.search(line)
    if m is None or (m.start() == 0 and m.end() == len(line)):
        return None
    return line[: m.start()], line[m.end() :]


def _cut_line_at(lines: list[str], pos: int, before: str, after: str) -> int | None:
    """The index after the original lines that ``before`` starts and ``after`` ends, from ``pos``."""
    start = next((j for j in range(pos, len(lines)) if lines[j].startswith(before)), None)
    if start is None:
        return None
    if not after:
        return start + 1
    end = next((j for j in range(start, len(lines)) if lines[j].endswith(after)), None)
    return None if end is None else end + 1


def changed_lines(original: str, reduced: str) -> list[str]:
    """The lines of ``reduced`` outside lightmem2 stubs and blocks that are not lines of ``original``
    taken in order (a subsequence); empty when the reduction kept every shown line byte-exact.

    Matched greedily against the earliest unused equal line, which finds a subsequence whenever one
    exists; a line that has no match from there on is reported and consumes nothing.
    """
    where: dict[str, list[int]] = {}
    lines = original.split("\n")
    for i, line in enumerate(lines):
        where.setdefault(line, []).append(i)
    pos = 0
    out: list[str] = []
    for line in strip_blocks(reduced).split("\n"):
        if line == RECORD_LINE:
            break
        inline = _inline_stub(line) if line not in where else None
        if inline is not None:
            after = _cut_line_at(lines, pos, *inline)
            if after is None:
                out.append(line)
            else:
                pos = after
            continue
        if is_marker_line(line):
            continue
        spots = where.get(line)
        j = bisect.bisect_left(spots, pos) if spots else 0
        if spots and j < len(spots):
            pos = spots[j] + 1
        else:
            out.append(line)
    return out


def shown_lines(reduced: str) -> int:
    """How many lines of ``reduced`` are tool output (not ours): the denominator of the count."""
    n = 0
    for line in strip_blocks(reduced).split("\n"):
        if line == RECORD_LINE:
            break
        n += not is_marker_line(line)
    return n


def _text(message: Mapping[str, Any]) -> str:
    """A tool message's text; the stabilizer's blocks, separate text parts in list content, left out."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = (
            str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
        return "\n".join(t for t in texts if not t.startswith(_BLOCKS))
    return ""


class ChangedLinesTracker:
    """Counts changed lines over every tool output as the model received it in a session.

    Each call's transformed prompt is aligned with its original from the end (policies that drop or
    fold old messages keep the newest ones), and each tool message is compared with the original
    tool message at the same position. Every distinct (original, shown form) pair counts once, so an
    output re-read on fifty calls is not counted fifty times; an output shown in a new form (an
    eviction stub) is checked again.
    """

    def __init__(self) -> None:
        self._seen: set[tuple[int, int]] = set()
        self._hold: dict[int, Mapping[str, Any]] = {}
        self.changed = 0
        self.shown = 0
        self.examples: list[str] = []

    def add_call(
        self, original: Sequence[Mapping[str, Any]], transformed: Sequence[Mapping[str, Any]]
    ) -> None:
        for orig, shown in zip(reversed(original), reversed(transformed), strict=False):
            if orig.get("role") != "tool" or shown.get("role") != "tool":
                continue
            reduced = strip_blocks(_text(shown))
            self._hold.setdefault(id(orig), orig)  # holding it keeps the id from being reused
            key = (id(orig), xxhash.xxh3_64_intdigest(reduced.encode("utf-8", "surrogatepass")))
            if key in self._seen:
                continue
            self._seen.add(key)
            text = _text(orig)
            if reduced == text:
                self.shown += text.count("\n") + 1
                continue
            bad = changed_lines(text, reduced)
            self.changed += len(bad)
            self.shown += shown_lines(reduced)
            self.examples += bad[: max(0, 20 - len(self.examples))]
