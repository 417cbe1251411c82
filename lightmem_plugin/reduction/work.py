"""The text a reduction works on, and the pieces (kept lines, stubs, markers) a reduction renders.

Why one shared shape: every lossy pass ends the same way, by keeping some lines of its input verbatim
and eliding the rest behind stubs that name the 1-based line range of the archived original. Passes
that clean the text first (whitespace, HTML) hand on a :class:`Work` that still knows, for each line,
which original line it came from, so a later pass can still name exact ranges.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from . import error_lines, truncate
from .ansi import strip_ansi
from .base import STUB_PREFIX, stub


@dataclass(frozen=True)
class Gap:
    """An elided region: 0-based inclusive original line range, its size, and what it was.

    ``before`` / ``after``: the kept start of the region's first line and end of its last line, when a
    line too long to keep whole is cut inside. They share the stub's line (``before[stub]after``), so
    the model sees that the line goes on, and every line it sees whole is an original line.
    """

    first: int
    last: int
    chars: int
    what: str = "chars"
    before: str = ""
    after: str = ""


@dataclass(frozen=True)
class Mark:
    """A short in-place marker for one elided region when a single stub covers the whole output."""

    first: int
    last: int

    def text(self) -> str:
        return f"{STUB_PREFIX}lines {self.first + 1}:{self.last + 1} elided]"


Piece = str | Gap | Mark
TIDIED_WHAT = "chars (blank-line runs and traceback carets dropped)"
"""The label of the stub of an output only the whitespace pass changed. Why a label of its own: the
generic ``N chars archived`` under a complete-looking output left the model to guess what was
missing, and ``report`` read it as a head + tail cut when a host's frame (``</output>``) followed."""


@dataclass
class Work:
    """The text as the passes see it: its lines and, while known, each line's original index."""

    original: list[str]
    lines: list[str]
    origin: list[int] | None
    what: str = "chars"
    kind: str = "other"
    origin_end: list[int] | None = None
    """Per line, the last original line it stands for when that is not ``origin`` (a repeat marker
    stands for a run of original lines); None: each line stands for one."""
    sizes: list[int] | None = None
    """Per original line, its chars with its terminator as the archive holds them (``\\r\\n`` is two,
    a last line without a newline has none); None: one newline each. Why: a stub's ``N chars`` is
    what ``recover`` returns, and one newline per line overcounted an output that ends without one."""
    _protected: set[int] | None = field(default=None, repr=False, compare=False)

    def protected(self) -> set[int]:
        """Indexes of lines no selection may cut: error lines and the code line under each frame
        (computed once per work text; several passes and the renderer ask)."""
        if self._protected is None:
            marks = self._error_marks()
            self._protected = marks | error_lines.frame_code_lines(self.lines) if marks else marks
        return self._protected

    def _error_marks(self) -> set[int]:
        """Indexes of the error lines among :attr:`lines`, judged in the original where each line's
        origin is known. Why: whether a line is an error line can depend on the lines above it (an
        Elixir ``└─`` place under a warning's header), and the repeat pass may have folded that header
        into a marker; in the original it is still there."""
        if self.origin is None:
            return error_lines.error_indexes([strip_ansi(line) for line in self.lines])
        found = error_lines.error_indexes([strip_ansi(line) for line in self.original])
        ends = self.origin_end
        return {i for i, o in enumerate(self.origin) if o in found and (ends is None or ends[i] == o)}

    def chars(self) -> int:
        return sum(len(line) + 1 for line in self.lines)

    def span_chars(self, lo: int, hi: int) -> int:
        """Chars of original lines ``lo..hi`` (inclusive) as the archive holds them."""
        if self.sizes is not None:
            return sum(self.sizes[lo : hi + 1])
        return sum(len(x) + 1 for x in self.original[lo : hi + 1])

    def derived(self, lines: list[str], origin: list[int] | None, ends: list[int] | None, what: str) -> Work:
        """A clean pass's result: new work lines over the same original."""
        return Work(self.original, lines, origin, what, self.kind, ends, self.sizes)

    def gap(self, first: int, last: int) -> Gap:
        """The stub for work lines ``first..last``, widened over neighbouring dropped blank lines."""
        n = len(self.original)
        if self.origin is None:
            return Gap(0, n - 1, self.span_chars(0, n - 1), self.what)
        ends = self.origin_end or self.origin
        lo = ends[first - 1] + 1 if first > 0 else 0
        hi = self.origin[last + 1] - 1 if last + 1 < len(self.lines) else n - 1
        return Gap(lo, hi, self.span_chars(lo, hi), self.what)

    def tidied(self) -> list[Piece]:
        """The lines as they stand with one stub for the whole original, when only the clean stage
        changed the text (labelled by what changed it: HTML made readable, or :data:`TIDIED_WHAT`)."""
        return [*self.lines, self.whole(TIDIED_WHAT if self.what == "chars" else self.what)]

    def whole(self, what: str, ranged: bool = True) -> Gap:
        """A stub for the whole original; ``ranged=False`` leaves the range to in-place markers."""
        last = len(self.original) - 1 if ranged else -2
        return Gap(0, last, self.span_chars(0, len(self.original) - 1), what)


def piece_text(piece: Piece, key: str, shell: bool = False) -> str:
    """The text of one piece once the archive key is known (``shell``: the CLI recovery hint)."""
    if isinstance(piece, str):
        return piece
    if isinstance(piece, Mark):
        return piece.text()
    lines = (piece.first + 1, piece.last + 1) if piece.last >= piece.first else None
    return piece.before + stub(key, piece.chars, lines, piece.what, shell) + piece.after


def render(pieces: list[Piece], key: str, shell: bool = False) -> str:
    """The reduced output: pieces joined by newlines."""
    return "\n".join(piece_text(p, key, shell) for p in pieces)


MAX_SELECT_CHARS = 4_000_000
"""Above this, scoring every line costs seconds; such outputs go straight to head/tail truncation."""


def selectable(work: Work) -> bool:
    """True when line origins are known and the text is small enough to score line by line."""
    return work.origin is not None and sum(len(line) for line in work.lines) <= MAX_SELECT_CHARS


MARK_COST = 2 * (len(Mark(999_999, 999_999).text()) + 1)
"""What one in-place marker costs, in chars of output text: the per-region cost when selecting lines,
and the size up to which an elided run is shown instead of its marker. Why twice the marker's own
chars: a marker is digits and brackets, ~2.3 chars a token, where output text runs ~4
(``[lightmem2: lines 7:7 elided]`` is 13 tokens; the ``Stderr: Traceback (most recent call last):``
it stood for, 11). Priced by its chars, the log pass hid such single lines between two kept
tracebacks for a saving of no token, and the file view pass cut one-line bodies between kept
definitions for none either. Measured on the swe traces (token-priced replay), K charged: normal
-0.007%, aggressive -0.02%; aggressive's last prompts hold 15 -> 10 single-region markers."""


def masked(work: Work, keep: list[bool], what: str) -> list[Piece]:
    """Kept lines with elided regions marked: one stub if there is one region, else a stub on top
    for the whole output and a short line-range marker per region (a stub per region costs ~150
    chars, which a 1,200-char budget cannot afford several times). Either way the stub says ``what``
    the pass kept (``chars of output with a traceback (frames and exception shown)``): a lone
    region's stub said only ``chars``, like a head + tail cut's, so neither the model nor ``report``
    could tell which pass chose the lines. Nothing elided: the lines as :func:`unchanged` gives them
    (a log whose only cut was a cheap run, shown, said ``chars of log (... head and tail shown)``
    above every line of it)."""
    gaps = {first: last for first, last in truncate.regions(keep)}
    if not gaps:  # every line kept (cheap runs shown): label it by what the clean stage dropped
        return unchanged(work)
    single = len(gaps) == 1
    pieces: list[Piece] = [] if single else [work.whole(what, ranged=False)]
    i = 0
    while i < len(work.lines):
        if i in gaps:
            gap = work.gap(i, gaps[i])
            pieces.append(replace(gap, what=what) if single else Mark(gap.first, gap.last))
            i = gaps[i] + 1
        else:
            pieces.append(work.lines[i])
            i += 1
    return pieces


def cut(work: Work, head_chars: int, tail_chars: int) -> list[Piece] | None:
    """Head ``head_chars`` and tail ``tail_chars`` around one stub; None when it all fits."""
    lengths = [len(line) for line in work.lines]
    plan = truncate.head_tail(lengths, head_chars, tail_chars)
    if plan is None:
        return None
    n = len(work.lines)
    first = plan.head_lines
    last = n - 1 - plan.tail_lines
    pieces: list[Piece] = list(work.lines[:first])
    before = work.lines[first][: plan.head_part] if plan.head_part else ""
    after = work.lines[last][-plan.tail_part :] if plan.tail_part else ""
    pieces.append(replace(work.gap(first, last), before=before, after=after))
    pieces.extend(work.lines[n - plan.tail_lines :])
    return pieces


def size(pieces: list[Piece], stub_len: int) -> int:
    """Chars of the rendered pieces, with ``stub_len`` per stub."""
    return sum(
        len(p) + 1
        if isinstance(p, str)
        else (MARK_COST if isinstance(p, Mark) else stub_len + len(p.before) + len(p.after))
        for p in pieces
    )


def head_tail_mask(lines: list[str], head_chars: int, tail_chars: int) -> list[bool]:
    """Whole lines kept from the start up to ``head_chars`` and from the end up to ``tail_chars``."""
    keep = [False] * len(lines)
    used = 0
    for i, line in enumerate(lines):
        if used + len(line) + 1 > head_chars:
            break
        keep[i] = True
        used += len(line) + 1
    used = 0
    for i in range(len(lines) - 1, -1, -1):
        if keep[i] or used + len(lines[i]) + 1 > tail_chars:
            break
        keep[i] = True
        used += len(lines[i]) + 1
    return keep


def with_protected(work: Work, keep: list[bool], what: str, protect: bool) -> list[Piece]:
    """``masked`` after adding the protected lines (``protect``: the mode keeps error lines); a run
    left between them that is not worth its marker (:data:`MARK_COST`) is shown."""
    if protect:
        for i in work.protected():
            keep[i] = True
    truncate.show_cheap_runs([len(x) for x in work.lines], keep, MARK_COST)
    return masked(work, keep, what)


def unchanged(work: Work) -> list[Piece]:
    """The work text as it stands (a whole-output stub when a clean pass dropped lines)."""
    return list(work.lines) if work.lines == work.original else work.tidied()


def head_tail_plus(
    work: Work, head_chars: int, tail_chars: int, extra: set[int], what: str
) -> list[Piece] | None:
    """Head and tail plus the ``extra`` lines and the protected ones; None when nothing would go."""
    keep = head_tail_mask(work.lines, head_chars, tail_chars)
    for i in extra:
        keep[i] = True
    if all(keep):
        return None
    return with_protected(work, keep, what, True)
