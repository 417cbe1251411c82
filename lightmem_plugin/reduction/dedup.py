"""Repeated tool outputs: the second and later copies become a one-line reference to the first.

Why session-level and keyed by position: whether an output is a repeat depends on what came before it
in the history, so the decision is a function of the history order, not of a clock or of the order in
which hooks happened to run. The reference names the artifact key too, so it is recoverable on its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import xxhash

from .base import shell_hint
from .linedup import LineIndex
from .spec import PassSpec

if TYPE_CHECKING:
    from .base import PassContext

MIN_CHARS = 300
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


def call_key(call_id: str) -> str:
    """The spelling-independent form of a tool call id (a ``#N`` part suffix is kept apart)."""
    base, sep, part = call_id.partition("#")
    return _NOT_ALNUM.sub("", base) + sep + part


def reference(first_call_id: str, key: str, chars: int, shell: bool = False) -> str:
    """The byte-stable text that replaces a repeated output."""
    same = f"[lightmem2: identical to the output of tool call {first_call_id} ({chars:,} chars)"
    if shell:
        return f"{same}; run: lightmem2 recover {key}]"
    return f"{same}, archived as {key}; recover with lightmem2_recover(key)]"


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
    """Append-only log (sequence number -> ``key NUL spelling``) of every change of ``names``, so the
    session state can persist it insert-only and rebuild ``names`` in order (:meth:`replay`)."""

    def seen(self, call_id: str) -> None:
        """Note the spelling of a call id the host used (the reference names the latest one)."""
        key = call_key(call_id)
        if self.names.get(key) != call_id:
            self.names[key] = call_id
            self.spellings[str(len(self.spellings))] = f"{key}\x00{call_id}"

    def replay(self, spellings: dict[str, str]) -> None:
        """Adopt a saved spellings log and rebuild ``names`` from it."""
        self.spellings = dict(spellings)
        self.names = {}
        for entry in self.spellings.values():
            key, _, spelled = entry.partition("\x00")
            self.names[key] = spelled

    def check(self, call_id: str, text: str) -> str | None:
        """The first call id that produced ``text`` when this is a repeat worth replacing, else None.

        The first ``max_repeats`` repeats are replaced; after that the output is common enough that a
        reference no longer helps the agent and the full text is kept. Never the call itself, in
        whatever spelling of its id.
        """
        if len(text) < MIN_CHARS:
            return None
        self.seen(call_id)
        key = call_key(call_id)
        digest = xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"), seed=self.scope)
        first = self.first.setdefault(digest, key)
        if first == key:
            return None
        slot = f"{digest}:{key}"
        seen = self.repeats.get(slot)
        if seen is None:
            seen = self.counts.get(digest, 0) + 1
            self.counts[digest] = seen
            self.repeats[slot] = seen
        return self.names.get(first, first) if seen <= self.max_repeats else None


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


def apply(repeats: Repeats, call_id: str, text: str, ctx: PassContext, inner: Callable[[str], str]) -> str:
    """A repeated output becomes a reference to its first call; runs of lines already shown become
    markers before ``inner`` (the text passes) reduces the rest. Both archive the original."""
    first = repeats.outputs.check(call_id, text)
    if first is not None:
        key = ctx.archive(text.encode("utf-8", "surrogatepass"))
        return reference(first, key, len(text), shell_hint(ctx))
    elided = repeats.lines.reduce(text, ctx.archive, shell_hint(ctx))
    return inner(text) if elided is None else inner(elided[0]) + "\n" + elided[1]


PASS = PassSpec("dedup", "repeat", True, "repeated outputs and runs of lines already shown", apply)
