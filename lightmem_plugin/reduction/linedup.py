"""Repeated lines across tool outputs: runs of lines the model can already read earlier become markers.

Why: agents re-read what they already have. On the swe traces 29% of tool-output characters (24% of
what is re-read, weighted by how often) are lines that an earlier tool output of the same session
already showed verbatim: the same file viewed twice, a grep over a region just printed, a test re-run
with the same traceback. Replacing such runs loses nothing the model can see (the lines stay verbatim in
the earlier output), and the original is archived byte-exact behind one stub.

Never folded into a marker: a line that says how the command ended (``<returncode>1</returncode>``,
``Process exited with code 1``: the model must see whether it failed); where the mode keeps error
lines, the error lines and frame code lines (:mod:`~.reduction.error_lines`) of the output; and the match
lines of a search (:mod:`.search_terms`: the answer the agent asked for). So a re-run that fails
the same way keeps its traceback in place. Measured on the swe traces in normal mode with
``benchmarks/frame_audit.py`` before this: 88 of the 426 outputs with error lines reached the model
with some of them behind "as shown in an earlier output", which says neither which output nor that
the error is still there.

A marker names the tool calls whose outputs show its lines (``as shown in the output of tool call
ID``; ``the outputs of tool calls ID, ID`` for a run that two or three calls showed first, the ids as
the model reads them), so the model can find them. Its line numbers are said to be ``of this output``
(the archived original the output's stub names): a review of the swe dumps found that
``lines 40:79 as shown in the output of tool call X`` reads as X's lines 40 to 79, where X may have
printed them as its lines 1 to 40. It names no call where the model may read an id in
another spelling than ours (:func:`~.dedup.Repeats.shown_id`), nor the output's own call (a part of an
output repeating an earlier part), nor lines remembered by a session state saved before sources were
kept. Measured on the swe sessions, normal mode, against the unnamed markers: naming up to three
calls costs 0.0036 of vanilla K; cutting runs at each new source instead (one call per marker) cost
0.0065, by the extra markers.

Session-level and order-dependent by nature: the index holds the lines of what the model was shown, in
history order, with the first call that showed each, so the result is a pure function of the history
(restarts replay it the same way).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field

import xxhash

from . import error_lines
from .base import Elided, stub

MIN_LINE_CHARS = 8
MIN_RUN_CHARS = 120
MIN_RUN_LINES = 2
MIN_SAVING_CHARS = 100
WHAT = "chars (repeated lines elided)"
"""The label of the stub an output with repeat markers carries (the whole original is archived)."""
STUB_CHARS = 160
MAX_SOURCES = 3
"""Calls one marker may name: a run of lines that more calls showed first is cut where the next begins."""


def protected_lines(lines: list[str], errors: bool, matches: Sequence[re.Pattern[str]] = ()) -> set[int]:
    """Indexes of the lines no marker may stand for: status lines, with ``errors`` the error lines
    with the code line under each frame, and the lines a search's ``matches`` patterns find."""
    out = {i for i, line in enumerate(lines) if error_lines.is_status_line(line)}
    marks = error_lines.error_indexes(lines) if errors else set()
    if marks:
        out |= marks | error_lines.frame_code_lines(lines)
    if matches:
        out |= {i for i, line in enumerate(lines) if any(p.search(line) for p in matches)}
    return out


def _h(line: str, scope: int = 0) -> int:
    return int(xxhash.xxh3_64_intdigest(line.encode("utf-8", "surrogatepass"), seed=scope))


def _keys(lines: Sequence[str], scope: int) -> list[int]:
    """The index key of each line: a substantial line by its own bytes; a short one (``)``, a blank
    line, ``my_id,``) by its bytes after the line before it, so it counts as shown only where it
    was shown in that place.

    Why: a short line says little alone, and it is ubiquitous, so runs took short lines in without
    checking them. A marker then stood for lines that no earlier output showed: on a swe session
    (sqlfluff-1733) the agent re-printed a file to see whether its fix changed the indentation of
    ``        my_id,``; the marker said "as shown in the output of tool call 8ios5cltb", which
    showed the old ``         my_id,``: the one line the agent printed the file for."""
    out: list[int] = []
    before = ""
    for line in lines:
        out.append(_h(line, scope) if len(line.strip()) >= MIN_LINE_CHARS else _h(f"{before}\n{line}", scope))
        before = line
    return out


def marker(first: int, last: int, sources: Sequence[str] = ()) -> str:
    """The short line that stands for a repeated run (1-based, inclusive lines of the original);
    ``sources``: the ids of the tool calls whose outputs show them, as the model reads them (none:
    "an earlier output").

    Not a stub (no "[lightmem2: " prefix): the text around it may still be reduced further.
    """
    if not sources:
        where = "an earlier output"
    elif len(sources) == 1:
        where = f"the output of tool call {sources[0]}"
    else:
        where = f"the outputs of tool calls {', '.join(sources)}"
    return f"[lightmem2 repeat: lines {first}:{last} of this output, as shown in {where}]"


MARKER_RE = re.compile(
    r"\[lightmem2 repeat: lines (\d+):(\d+) of this output, as shown in "
    r"(?:an earlier output|the outputs? of tool calls? ([^\]]+))\]"
)
"""A :func:`marker` in text: groups first line, last line and the calls named (see :func:`marker_calls`)."""


def marker_calls(found: re.Match[str]) -> list[str]:
    """The call ids a :data:`MARKER_RE` match names, in order (none for "an earlier output")."""
    return found.group(3).split(", ") if found.group(3) else []


def _named_marker(a: int, b: int, sources: tuple[str | None, ...], name: Callable[[str], str | None]) -> str:
    """The marker of run ``a:b`` (0-based, end exclusive): it names its sources only when it can name
    every one."""
    names = [None if s is None else name(s) for s in sources]
    known = [n for n in names if n is not None]
    return marker(a + 1, b, known if len(known) == len(names) else ())


@dataclass
class LineIndex:
    """Keys of the lines the model has been shown in tool outputs so far (:func:`_keys`), each with the
    host's id of the tool call whose output first showed it.

    ``seen`` is insertion-ordered and a line keeps its first source, so the session state saves only
    new hashes. A source of None: not known (a state saved before sources were kept).
    """

    seen: dict[int, str | None] = field(default_factory=dict)
    scope: int = 0  # lines are repeats only within one scope (see Repeats.scope)
    gone: Callable[[str], bool] = field(default=lambda source: False, repr=False, compare=False)
    """Whether the output of a source call has left the context (see Repeats.gone): its lines count as
    not shown, so a marker never stands for lines the model can no longer read."""

    def add(self, text: str, source: str | None = None) -> None:
        """Remember the lines of an output as the model sees it, shown by the call ``source``."""
        for key in _keys(text.split("\n"), self.scope):
            self.seen.setdefault(key, source)

    def sources(self, text: str) -> set[str | None]:
        """The calls that first showed the substantial lines of ``text`` the model was shown (None for
        a line remembered without its source)."""
        lines = text.split("\n")
        keys = _keys(lines, self.scope)
        return {
            self.seen[k]
            for line, k in zip(lines, keys, strict=True)
            if len(line.strip()) >= MIN_LINE_CHARS and k in self.seen
        }

    def _shown(self, key: int) -> bool:
        """Whether the line with ``key`` is in an output the model still reads."""
        if key not in self.seen:
            return False
        source = self.seen[key]
        return source is None or not self.gone(source)

    def _runs(
        self, lines: list[str], keys: list[int], keep: Container[int] = ()
    ) -> list[tuple[int, int, tuple[str | None, ...]]]:
        """Maximal runs (start, end exclusive, the sources of their lines in order) of repeated lines
        worth a marker, of lines first shown by at most :data:`MAX_SOURCES` calls; a line in ``keep``
        is never inside one. ``keys``: :func:`_keys` of ``lines``."""
        runs: list[tuple[int, int, tuple[str | None, ...]]] = []
        i, n = 0, len(lines)
        while i < n:
            if i in keep or len(lines[i].strip()) < MIN_LINE_CHARS or not self._shown(keys[i]):
                i += 1
                continue
            sources: dict[str | None, None] = {}
            j, last_real = i, i
            while j < n and j not in keep and self._shown(keys[j]):
                source = self.seen[keys[j]]
                if source not in sources:
                    if len(sources) == MAX_SOURCES:
                        break
                    sources[source] = None
                if len(lines[j].strip()) >= MIN_LINE_CHARS:
                    last_real = j
                j += 1
            end = last_real + 1
            substantial = sum(1 for k in range(i, end) if len(lines[k].strip()) >= MIN_LINE_CHARS)
            if substantial >= MIN_RUN_LINES and sum(len(x) + 1 for x in lines[i:end]) >= MIN_RUN_CHARS:
                runs.append((i, end, tuple(sources)))
            i = end
        return runs

    def reduce(
        self,
        text: str,
        archive: Callable[[bytes], str],
        shell: bool = False,
        errors: bool = True,
        matches: Callable[[], Sequence[re.Pattern[str]]] = tuple,
        name: Callable[[str], str | None] = lambda source: None,
    ) -> tuple[str, str, Elided | None] | None:
        """(``text`` with repeated runs replaced by markers, the stub naming the archived original, and
        the line map from the first to the original for the text passes that reduce it further).

        None when there is nothing worth replacing. The map is None when ``text`` holds line breaks
        other than ``\\n`` (the registry numbers lines with ``str.splitlines``; then they differ).
        ``errors``: the mode keeps error lines; ``matches`` gives the patterns of the search that
        printed ``text`` (:func:`protected_lines`). Both are looked at only when a run was found
        (most outputs repeat nothing). ``name`` gives the id a marker names for a source (None: it
        names none).
        """
        lines = text.split("\n")
        keys = _keys(lines, self.scope)
        runs = self._runs(lines, keys)
        if runs:
            keep = protected_lines(lines, errors, matches())
            runs = self._runs(lines, keys, keep) if keep else runs
        marks = [_named_marker(a, b, sources, name) for a, b, sources in runs]
        saved = sum(
            sum(len(x) + 1 for x in lines[a:b]) - len(m) - 1 for (a, b, _), m in zip(runs, marks, strict=True)
        )
        if not runs or saved - STUB_CHARS < MIN_SAVING_CHARS:
            return None
        key = archive(text.encode("utf-8", "surrogatepass"))
        out: list[str] = []
        first: list[int] = []
        last: list[int] = []
        pos = 0
        for (a, b, _), mark in zip(runs, marks, strict=True):
            out.extend(lines[pos:a])
            first.extend(range(pos, a))
            last.extend(range(pos, a))
            out.append(mark)
            first.append(a)
            last.append(b - 1)
            pos = b
        out.extend(lines[pos:])
        first.extend(range(pos, len(lines)))
        last.extend(range(pos, len(lines)))
        numbered = text.splitlines() == (lines[:-1] if text.endswith("\n") else lines)
        base = Elided(text, first, last) if numbered else None
        return "\n".join(out), stub(key, len(text), None, WHAT, shell), base
