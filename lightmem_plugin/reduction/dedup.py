"""Repeated tool outputs: the second and later copies become a one-line reference to the first.

Why session-level and keyed by position: whether an output is a repeat depends on what came before it
in the history, so the decision is a function of the history order, not of a clock or of the order in
which hooks happened to run. The reference names the artifact key too, so it is recoverable on its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import xxhash

from ..model import alnum_id
from .base import shell_hint
from .linedup import MARKER_RE, LineIndex, marker_calls
from .search_terms import search_patterns
from .spec import PassSpec

if TYPE_CHECKING:
    from .base import PassContext

MIN_CHARS = 300


def call_key(call_id: str) -> str:
    """The spelling-independent form of a tool call id (a ``#N`` part suffix is kept apart)."""
    base, sep, part = call_id.partition("#")
    return alnum_id(base) + sep + part


def same_call(a: str, b: str) -> bool:
    """Whether two call ids, in any spelling and part, name one host call."""
    return call_base(call_key(a)) == call_base(call_key(b))


def call_base(call_id: str) -> str:
    """The host's call id of a part id ``CALL#N`` (the id the model knows; a reference names it)."""
    return call_id.partition("#")[0]


_UNNAMED_REFERENCE = "[lightmem2: identical to an earlier tool output in this conversation ("


def reference(first_call_id: str | None, key: str, chars: int, shell: bool = False) -> str:
    """The byte-stable text that replaces a repeated output.

    ``first_call_id`` None: the host may respell call ids after we see them (OpenClaw strips all but
    letters and digits for some providers, just before each request), so no id is named rather than
    one the model never sees."""
    if first_call_id is None:
        same = f"{_UNNAMED_REFERENCE}{chars:,} chars)"
    else:
        same = f"[lightmem2: identical to the output of tool call {first_call_id} ({chars:,} chars)"
    if shell:
        return f"{same}; run: lightmem2 recover {key}]"
    return f"{same}, archived as {key}; recover with lightmem2_recover(key)]"


_REFERENCE_RE = re.compile(r"\[lightmem2: identical to the output of tool call (\S+) \(")


def names_no_call(text: str) -> bool:
    """Whether ``text`` stands on an earlier output it does not name: a :func:`reference` or a repeat
    marker written while the host might still respell call ids (OpenClaw, within a turn). Which
    output it stands on is then known only by content (the same text, the same lines)."""
    if "[lightmem2" not in text:
        return False
    return _UNNAMED_REFERENCE in text or any(not marker_calls(m) for m in MARKER_RE.finditer(text))


def calls_named(text: str) -> set[str]:
    """The tool calls (as the model reads their ids) whose outputs ``text`` stands on: the call a
    :func:`reference` names and the calls its repeat markers name. Those outputs must stay in view
    as long as ``text`` does: without them its references point at nothing the model can read."""
    if "[lightmem2" not in text:
        return set()
    named = set(_REFERENCE_RE.findall(text))
    for found in MARKER_RE.finditer(text):
        named.update(marker_calls(found))
    return named


def _log_order(key: str) -> tuple[int, str]:
    """Sort key of a spellings log entry: ``SEQ-HASH`` (or a plain ``SEQ`` of an older store)."""
    seq, _, rest = key.partition("-")
    return (int(seq) if seq.isdigit() else 0, rest)


@dataclass
class DedupIndex:
    """Remembers the first tool call that produced each output (by xxh3-128 of its text)."""

    max_repeats: int = 5
    scope: int = 0  # outputs are repeats only within one scope (see Repeats.scope)
    first: dict[str, str] = field(default_factory=dict)  # digest -> call_key of its first call
    repeats: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # call_key -> the id as last spelled
    spellings: dict[str, str] = field(default_factory=dict)
    """Append-only log (sequence number -> ``key NUL spelling``) of every change of ``names``, and
    ``key SOH`` when a key is first seen in a request (:meth:`confirm`), so the session state can
    persist it insert-only and rebuild ``names`` and ``confirmed`` in order (:meth:`replay`)."""
    confirmed: set[str] = field(default_factory=set)
    """Call keys seen in a request the model received, so spelled as the model reads them."""

    def seen(self, call_id: str) -> None:
        """Note the spelling of a call id the host used (the reference names the latest one)."""
        key = call_key(call_id)
        if self.names.get(key) != call_id:
            self.names[key] = call_id
            self._log(f"{key}\x00{call_id}")

    def _log(self, entry: str) -> None:
        """Append ``entry`` to :attr:`spellings` under ``SEQ-HASH``: two processes that append to one
        session's log at once (Claude Code runs a hook process per parallel tool call) write two keys,
        not one key twice (the second would replace the first in the store)."""
        digest = xxhash.xxh3_64_hexdigest(entry.encode("utf-8", "surrogatepass"))
        self.spellings[f"{len(self.spellings)}-{digest}"] = entry

    def confirm(self, call_id: str) -> None:
        """Note that ``call_id`` was seen in a request (in the spelling the model reads)."""
        self.seen(call_id)
        key = call_key(call_id)
        if key not in self.confirmed:
            self.confirmed.add(key)
            self._log(f"{key}\x01")

    def named(self, call_id: str) -> bool:
        """True when ``call_id``'s spelling was seen in a request (see :meth:`confirm`)."""
        return call_key(call_id) in self.confirmed

    def replay(self, spellings: dict[str, str]) -> None:
        """Adopt a saved spellings log and rebuild ``names`` and ``confirmed`` from it."""
        self.spellings = dict(spellings)
        self.names = {}
        self.confirmed = set()
        for _, entry in sorted(self.spellings.items(), key=lambda item: _log_order(item[0])):
            if entry.endswith("\x01") and "\x00" not in entry:
                self.confirmed.add(entry[:-1])
                continue
            key, _, spelled = entry.partition("\x00")
            self.names[key] = spelled

    def check(self, call_id: str, text: str) -> str | None:
        """The first call id that produced ``text`` when this is a repeat worth replacing, else None.

        The first ``max_repeats`` repeats are replaced; after that the output is common enough that a
        reference no longer helps the agent and the full text is kept. Never the call itself, in
        whatever spelling of its id, nor another part of its output. The id returned is the host's
        call id, a part's ``#N`` dropped: the model knows ``call_1``, not ``call_1#1`` (Codex code mode
        measured: the repeat of a listing named ``call_1_0#1``).
        """
        if len(text) < MIN_CHARS:
            return None
        self.seen(call_id)
        key = call_key(call_id)
        digest = xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"), seed=self.scope)
        first = self.first.setdefault(digest, key)
        if call_base(first) == call_base(key):  # the call itself, or another part of its output
            return None
        slot = f"{digest}:{key}"
        seen = self.repeats.get(slot)
        if seen is None:
            seen = self.counts.get(digest, 0) + 1
            self.counts[digest] = seen
            self.repeats[slot] = seen
        return call_base(self.names.get(first, first)) if seen <= self.max_repeats else None


def scope_of(dropped_to: str, goal: int = 0) -> int:
    """The repeat scope of a request whose host dropped the history before tool call ``dropped_to``
    ("" when it still sends the session from its first tool call), within user goal ``goal`` (0
    unless finished tasks leave the context).

    Why: a repeat marker or reference says "shown in an earlier output", and that is only true while
    the host still sends that output. A host that compacts or trims its history (Claude Code's
    auto-compact, a sliding window) drops its oldest outputs, and then a reference into them points at
    nothing: measured on the dev Claude Code sessions, 49 later uses of one file's lines were behind
    "[lightmem2 repeat: lines 1:69 as shown in an earlier output]" whose earlier output had been
    compacted away. A request whose oldest tool result is not the session's first opens the scope of
    that result, so later outputs are compared only with what came since. Derived from the request
    and the session's first call: the same history gives the same scope in any process, after any
    restart."""
    if not dropped_to:
        return goal
    return int(xxhash.xxh3_64_intdigest(f"{call_key(dropped_to)}\x00{goal}".encode("utf-8", "surrogatepass")))


@dataclass
class Repeats:
    """What this session's model was already shown: whole outputs (by hash) and substantial lines."""

    outputs: DedupIndex = field(default_factory=DedupIndex)
    lines: LineIndex = field(default_factory=LineIndex)

    @property
    def scope(self) -> int:
        """Which part of the session a repeat may refer back into (0: all of it).

        A reference to an earlier output is only useful while that output is in the context. Where
        finished tasks leave the context (aggressive mode), each user goal opens a new scope, so a
        repeat in task 3 never points at an output of task 2 that was archived with its task."""
        return self.outputs.scope

    @scope.setter
    def scope(self, value: int) -> None:
        self.outputs.scope = self.lines.scope = value

    @property
    def gone(self) -> Callable[[str], bool]:
        """Whether a call's output has left the context (eviction replaced it with a stub).

        A reference or a marker names the earlier output that shows its text; once that output is
        paged out, the model can read neither (measured on the Claude Code sessions, aggressive: 2
        markers stood for lines 1:135 and 1:10 of outputs a batch had archived before they were
        written). So a repeat of a paged-out output is shown as it is. Set by the session, from its
        eviction state (persisted): the same decision in any process."""
        return self.lines.gone

    @gone.setter
    def gone(self, value: Callable[[str], bool]) -> None:
        self.lines.gone = value

    def shown_id(self, call_id: str, ctx: PassContext) -> str | None:
        """The id a reference names for the host call ``call_id``: the host's id as last spelled, a
        part's ``#N`` dropped, as the model reads it; None when that is not known."""
        key = call_key(call_id)
        shown = call_base(self.outputs.names.get(key, call_id))
        # a host that respells ids (OpenClaw): name the call only as a request spelled it
        if not (ctx.ids_as_sent or self.outputs.named(shown)):
            return None
        return shown if ctx.respell is None else ctx.respell(shown)  # short call ids: as the model reads


def apply(repeats: Repeats, call_id: str, text: str, ctx: PassContext, inner: Callable[..., str]) -> str:
    """A repeated output becomes a reference to its first call; runs of lines already shown become
    markers (each naming the call that showed its lines) before ``inner`` (the text passes) reduces
    the rest. Both archive the original."""
    first = repeats.outputs.check(call_id, text)
    if first is not None and not repeats.gone(first) and _shows_its_lines(repeats, first, text):
        key = ctx.archive(text.encode("utf-8", "surrogatepass"))
        return reference(repeats.shown_id(first, ctx), key, len(text), shell_hint(ctx))

    def name(source: str) -> str | None:
        # never the output's own call: a part of it that repeats an earlier part names no call
        return None if same_call(source, call_id) else repeats.shown_id(source, ctx)

    matches = partial(search_patterns, ctx.call)
    elided = repeats.lines.reduce(text, ctx.archive, shell_hint(ctx), ctx.table.keepErrorLines, matches, name)
    if elided is None:
        return inner(text)
    derived, stub_line, base = elided
    if base is None:
        return _with_stub(inner(derived), stub_line)
    reduced = inner(derived, base)  # its stubs name the original's key and line numbers
    return _with_stub(derived, stub_line) if reduced == derived else reduced


def _shows_its_lines(repeats: Repeats, first: str, text: str) -> bool:
    """Whether the output of ``first`` (of which ``text`` is a copy) shows lines of its own, or may.

    Why: when that output reached the model only as repeat markers naming other calls, a reference to
    it made the agent follow two hops with two numberings ("identical to the output of xe4j0st3s",
    which said "lines 1:44 as shown in the output of 7fobvpl25"; seen in a review of the swe dumps).
    Then the copy gets the line markers itself, naming the calls that show the lines."""
    sources = repeats.lines.sources(text)
    if not sources or None in sources:
        return True
    return any(same_call(s, first) for s in sources if s is not None)


def _with_stub(text: str, stub_line: str) -> str:
    """``text`` and the stub as its last line, before the final line break if it has one (the
    break belongs to what follows: an envelope's closing tag would otherwise sit under a blank line
    the original never had)."""
    return f"{text[:-1]}\n{stub_line}\n" if text.endswith("\n") else f"{text}\n{stub_line}"


PASS = PassSpec("dedup", "repeat", True, "repeated outputs and runs of lines already shown", apply)
