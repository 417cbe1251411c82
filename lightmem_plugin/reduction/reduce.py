"""Reduce one tool output: run the enabled passes in order and leave stubs that name the archive.

Why this shape: the reduction happens once, when the output enters the history (DESIGN I3), and
must be a pure function of (text, settings) so a restarted proxy reproduces the same bytes (I1).
The original is archived byte-exact under its content key and every elided region is marked by a
stub naming that key and the 1-based line range of the original (I4), numbered like the registry's
``recover(lines=...)``. Passes change only what they are sure of:

1. whitespace: ANSI escapes, trailing blanks, blank runs (line numbers of the original are tracked);
2. html: only a real HTML document becomes its readable text;
3. json: only one valid JSON document becomes a summary of its shape;
4. log / diff: scored line selection under ``capChars`` (per-region stubs for logs, one stub for a
   diff whose context lines were dropped);
5. truncate: head ``headChars`` + tail ``tailChars`` around one stub.

``hardCapChars`` is enforced last, whatever the mode. A result that does not save at least
:data:`MIN_SAVING` chars is not worth a stub: the original is returned unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import diffsum, html, jsonsum, logsum, truncate, whitespace
from .base import STUB_PREFIX, PassContext, already_reduced, stub

MIN_SAVING = 200
MAX_SELECT_CHARS = 4_000_000
"""Above this, scoring every line costs seconds; such outputs go straight to head/tail truncation."""
_DUMMY_KEY = "0" * 32
WHAT_JSON = "chars of JSON"
WHAT_HTML = "chars of HTML"
WHAT_DIFF = "chars of diff (context lines elided)"
WHAT_LOG = "chars of log (errors, summaries, head and tail shown)"


@dataclass(frozen=True)
class _Gap:
    """An elided region: 0-based inclusive original line range, its size, and what it was."""

    first: int
    last: int
    chars: int
    what: str = "chars"


@dataclass(frozen=True)
class _Mark:
    """A short in-place marker for one elided region when a single stub covers the whole output."""

    first: int
    last: int

    def text(self) -> str:
        return f"{STUB_PREFIX}lines {self.first + 1}:{self.last + 1} elided]"


Piece = str | _Gap | _Mark


@dataclass
class _Work:
    """The text as the passes see it: its lines and, while known, each line's original index."""

    original: list[str]
    lines: list[str]
    origin: list[int] | None
    what: str = "chars"

    def chars(self) -> int:
        return sum(len(line) + 1 for line in self.lines)

    def gap(self, first: int, last: int) -> _Gap:
        """The stub for work lines ``first..last``, widened over neighbouring dropped blank lines."""
        n = len(self.original)
        if self.origin is None:
            return _Gap(0, n - 1, sum(len(x) + 1 for x in self.original), self.what)
        lo = self.origin[first - 1] + 1 if first > 0 else 0
        hi = self.origin[last + 1] - 1 if last + 1 < len(self.lines) else n - 1
        return _Gap(lo, hi, sum(len(x) + 1 for x in self.original[lo : hi + 1]), self.what)

    def whole(self, what: str, ranged: bool = True) -> _Gap:
        """A stub for the whole original; ``ranged=False`` leaves the range to in-place markers."""
        last = len(self.original) - 1 if ranged else -2
        return _Gap(0, last, sum(len(x) + 1 for x in self.original), what)


def _piece_text(piece: Piece, key: str) -> str:
    if isinstance(piece, str):
        return piece
    if isinstance(piece, _Mark):
        return piece.text()
    lines = (piece.first + 1, piece.last + 1) if piece.last >= piece.first else None
    return stub(key, piece.chars, lines, piece.what)


def _render(pieces: list[Piece], key: str) -> str:
    return "\n".join(_piece_text(p, key) for p in pieces)


MARK_COST = len(_Mark(999_999, 999_999).text()) + 1
"""Chars one in-place marker costs, used as the per-region cost when selecting lines."""


def _masked(work: _Work, keep: list[bool], what: str) -> list[Piece]:
    """Kept lines with elided regions marked: one stub if there is one region, else a stub on top
    for the whole output and a short line-range marker per region (a stub per region costs ~150
    chars, which a 1,200-char budget cannot afford several times)."""
    gaps = {first: last for first, last in truncate.regions(keep)}
    single = len(gaps) == 1
    pieces: list[Piece] = [] if single else [work.whole(what, ranged=False)]
    i = 0
    while i < len(work.lines):
        if i in gaps:
            gap = work.gap(i, gaps[i])
            pieces.append(gap if single else _Mark(gap.first, gap.last))
            i = gaps[i] + 1
        else:
            pieces.append(work.lines[i])
            i += 1
    return pieces


def _cut(work: _Work, head_chars: int, tail_chars: int) -> list[Piece] | None:
    lengths = [len(line) for line in work.lines]
    cut = truncate.head_tail(lengths, head_chars, tail_chars)
    if cut is None:
        return None
    n = len(work.lines)
    first = cut.head_lines
    last = n - 1 - cut.tail_lines
    pieces: list[Piece] = list(work.lines[:first])
    if cut.head_part:
        pieces.append(work.lines[first][: cut.head_part])
    pieces.append(work.gap(first, last))
    if cut.tail_part:
        pieces.append(work.lines[last][-cut.tail_part :])
    pieces.extend(work.lines[n - cut.tail_lines :])
    return pieces


def _stub_len(text: str, n_lines: int) -> int:
    """An upper bound on the length of one stub line for this output."""
    longest = max((WHAT_JSON, WHAT_HTML, WHAT_DIFF, WHAT_LOG), key=len)
    return len(stub(_DUMMY_KEY, len(text), (n_lines, n_lines), longest)) + 1


def _lossy(work: _Work, ctx: PassContext) -> list[Piece] | None:
    """The json, log, diff and truncate passes, first one that applies wins."""
    table = ctx.table
    passes = set(table.passes)
    if work.origin is not None and "json" in passes:
        summary = jsonsum.summarize("\n".join(work.lines), table.capChars)
        if summary is not None:
            return [summary, work.whole(WHAT_JSON)]
    lengths = [len(line) for line in work.lines]
    selectable = work.origin is not None and sum(lengths) <= MAX_SELECT_CHARS
    if selectable and "diff" in passes and diffsum.is_diff(work.lines):
        keep = truncate.select_by_score(lengths, diffsum.score_lines(work.lines), table.capChars, 0)
        kept: list[Piece] = [line for line, k in zip(work.lines, keep, strict=True) if k]
        return [*kept, work.whole(WHAT_DIFF)]
    if selectable and "log" in passes and logsum.is_log(work.lines):
        scores = logsum.score_lines(work.lines, table.headChars, table.tailChars)
        keep = truncate.select_by_score(lengths, scores, table.capChars, MARK_COST, True)
        return _masked(work, keep, WHAT_LOG)
    if "truncate" in passes:
        return _cut(work, table.headChars, table.tailChars)
    return None


def _size(pieces: list[Piece], stub_len: int) -> int:
    return sum(
        len(p) + 1 if isinstance(p, str) else (MARK_COST if isinstance(p, _Mark) else stub_len)
        for p in pieces
    )


def _plan(text: str, ctx: PassContext) -> list[Piece] | None:
    """What the model will see, as text pieces and stubs; None to leave ``text`` as it is."""
    table = ctx.table
    passes = set(table.passes)
    original = whitespace.split_lines(text)
    work = _Work(original, original, list(range(len(original))))
    if "whitespace" in passes:
        lines, origin = whitespace.clean(original)
        work = _Work(original, lines, origin)
    if "html" in passes:
        slim = html.slim("\n".join(work.lines))
        if slim is not None:
            work = _Work(original, slim.splitlines(), None, WHAT_HTML)
    stub_len = _stub_len(text, len(original))
    pieces: list[Piece] | None = None
    if work.chars() > table.capChars:
        pieces = _lossy(work, ctx)
    if pieces is None and (work.lines != original or work.origin is None):
        pieces = [*work.lines, work.whole(work.what)]
    hard = ctx.reduction.hardCapChars
    if (pieces is None and len(text) > hard) or (pieces is not None and _size(pieces, stub_len) > hard):
        room = max(0, hard - 2 * stub_len)
        pieces = _cut(work, room * 3 // 5, room - room * 3 // 5)
    return pieces


def reduce_text(text: str, ctx: PassContext) -> str:
    """What the model sees of the tool output ``text``: reduced with stubs, or ``text`` itself.

    Unchanged when it is short (``triggerChars``), already carries a stub, or reducing would not
    save :data:`MIN_SAVING` chars. Otherwise the original is archived once, byte-exact, and the
    result holds about ``capChars`` plus stub lines, never more than ``hardCapChars``.
    """
    if len(text) <= ctx.table.triggerChars or (
        already_reduced(text) and len(text) <= ctx.reduction.hardCapChars
    ):
        return text
    pieces = _plan(text, ctx)
    if pieces is None:
        return text
    draft = _render(pieces, _DUMMY_KEY)
    if len(draft) > len(text) - MIN_SAVING and len(text) <= ctx.reduction.hardCapChars:
        return text
    key = ctx.archive(text.encode("utf-8", "surrogatepass"))
    return _render(pieces, key)
