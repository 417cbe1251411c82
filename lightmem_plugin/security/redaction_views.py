"""Views of a tool's output with what the tool wrapped around each line taken off, for the redactor.

Why: a tool shows a file as it shows it, not as the file is. ``cat -n``, ``nl`` and Claude Code's
``Read`` put a line number before every line, ``grep -n`` a ``path:12:``, a unified diff a ``+``, and a
JSON result carries the whole text as one string with ``\\n`` and ``\\"`` escapes. The credential rules
that read a line's start or a block of lines (a Kubernetes Secret's ``data:`` block, ``KEY = value``
lines, a pgpass line, a PEM or PuTTY block, a ``Set-Cookie:`` header) then found nothing: of the
samples of ``tests/reliability/rel_secrets.py``, 5 to 7 kinds per line form and 19 in a JSON string.
``search.sqlite3`` keeps every archived line as the redactor left it (the archive itself is sealed):
planted through the OpenClaw sidecar and the CLI's Claude Code hook in a ``cat -n``, ``Read``,
``grep -rn`` or JSON form, 11 kinds were readable there, the base64 Kubernetes secret of issue #39
among them.

A :class:`View` is the text with that decoration removed, and knows, for each of its spans, the span
of the original text it shows: the redactor runs its rules on each view too and replaces, in the
original, exactly the characters a match's secret came from (each line of it apart, so the line
numbers between them stay). A view is made only when the text has the form: most of its first lines
decorated, more escaped than real line breaks, or a diff hunk header; plain text costs a few counts.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass

_LINE_MARK = re.compile(
    r"(?m)^(?:[ \t]*+\d++(?:\t|\u2192)|[^\s:][^:\n]{0,300}?(?<!\d)[:-]\d++[:-]|\d++[:-](?!\d\d[-:.]\d))"
)
"""What a tool puts before each line it shows: ``cat -n``/``nl`` (``    12\\t``), Claude Code's ``Read``
(``    12→``), ``grep -n`` (``path:12:``, ``path-12-`` for a context line, ``12:`` on one file). A path
does not end in a digit and a bare number does not start a clock, so ``2026-01-01T12:00:00`` and
``12:00:01`` are no marks."""
_SAMPLE_CHARS = 16_384
"""How much of a text's start tells whether its lines are decorated (most of them must be)."""
_HUNK = re.compile(r"(?m)^@@ -\d")
_DIFF_MARK = re.compile(r"(?m)^[+\- ]")
_JSON_TOKEN = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})|"')
_JSON_CHARS = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(m: re.Match[str]) -> str:
    """A JSON escape decoded; a bare quote (where a string starts or ends) a line break, so a string's
    first line starts a line as it did before the text was put in JSON."""
    c = m.group(1)
    if c is None:
        return "\n"
    return chr(int(c[1:], 16)) if c[0] == "u" else _JSON_CHARS.get(c, c)


def _drop(m: re.Match[str]) -> str:
    return ""


@dataclass(frozen=True)
class View:
    """``text``, made from ``base`` (the original, or another view) by replacing tokens: each token is
    ``(view start, view end, base start, base end)``, in order, and the text between tokens is the same
    in both."""

    text: str
    tokens: tuple[tuple[int, int, int, int], ...]
    starts: tuple[int, ...]
    parent: View | None = None

    @classmethod
    def of(
        cls, base: str, pattern: re.Pattern[str], repl: Callable[[re.Match[str]], str], parent: View | None
    ) -> View:
        parts: list[str] = []
        tokens: list[tuple[int, int, int, int]] = []
        last = at = 0
        for m in pattern.finditer(base):
            start, end = m.span()
            parts.append(base[last:start])
            at += start - last
            new = repl(m)
            parts.append(new)
            tokens.append((at, at + len(new), start, end))
            at += len(new)
            last = end
        parts.append(base[last:])
        return cls("".join(parts), tuple(tokens), tuple(t[0] for t in tokens), parent)

    def _base(self, pos: int, end: bool) -> int:
        """Where view offset ``pos`` lies in the base: a start inside a token maps to its start, an end
        inside one to its end (a removed line mark right at ``pos`` is before a start, after an end)."""
        i = (bisect_left(self.starts, pos) if end else bisect_right(self.starts, pos)) - 1
        if i < 0:
            return pos
        vs, ve, bs, be = self.tokens[i]
        if pos < ve or (end and pos == ve and ve > vs):
            return be if end else bs
        return be + (pos - ve)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that this view's ``[start, end)`` shows."""
        s, e = self._base(start, False), self._base(end, True)
        return self.parent.span(s, e) if self.parent is not None else (s, e)


def _decorated(text: str) -> bool:
    """Whether most lines at the start of ``text`` carry a line mark."""
    sample = text[:_SAMPLE_CHARS]
    lines = sum(1 for line in sample.split("\n") if line.strip())
    return lines > 0 and 2 * len(_LINE_MARK.findall(sample)) >= lines


def _escaped(text: str) -> bool:
    """Whether ``text`` is mostly a JSON string: more escaped line breaks, tabs and quotes than real
    line breaks (source code with a few ``"\\n"`` literals is not)."""
    escapes = text.count("\\n") + text.count("\\t") + text.count('\\"')
    return escapes > 0 and escapes > text.count("\n")


def views(text: str) -> list[View]:
    """The views of ``text`` worth a look: its JSON string decoded, then (of the text and of that) the
    line marks or a diff's markers removed; none for plain text."""
    found: list[View] = []
    if _escaped(text):
        found.append(View.of(text, _JSON_TOKEN, _unescape, None))
    for base in [None, *found]:
        body = text if base is None else base.text
        if _decorated(body):
            found.append(View.of(body, _LINE_MARK, _drop, base))
        if _HUNK.search(body) is not None:
            found.append(View.of(body, _DIFF_MARK, _drop, base))
    return found


def line_pieces(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``[start, end)`` of ``text`` cut at line breaks, each piece without its surrounding blanks."""
    pieces: list[tuple[int, int]] = []
    while start < end:
        stop = text.find("\n", start, end)
        stop = end if stop < 0 else stop
        s, e = start, stop
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if s < e:
            pieces.append((s, e))
        start = stop + 1
    return pieces


def joined(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans of one secret's lines in ``text``, those on one line of ``text`` made one (the lines
    of a JSON string are one line of the text: one tag, as for the same secret shown plainly; lines
    that are lines of the text keep theirs, and their marks and numbers between them stay)."""
    out: list[tuple[int, int]] = []
    for start, end in spans:
        if out and "\n" not in text[out[-1][1] : start]:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def replace_spans(text: str, spans: list[tuple[int, int, str]]) -> str:
    """``text`` with each ``(start, end, tag)`` span replaced by its tag (overlapping spans merged,
    the first one's tag kept)."""
    out: list[str] = []
    at = 0
    cur: tuple[int, int, str] | None = None
    for start, end, tag in sorted(spans):
        if cur is not None and start < cur[1]:
            cur = (cur[0], max(cur[1], end), cur[2])
            continue
        if cur is not None:
            out += [text[at : cur[0]], cur[2]]
            at = cur[1]
        cur = (start, end, tag)
    if cur is not None:
        out += [text[at : cur[0]], cur[2]]
        at = cur[1]
    out.append(text[at:])
    return "".join(out)
