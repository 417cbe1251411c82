"""What eviction decided so far: the batches, their stubs, the archived arguments and collapsed tasks.

Why one record of decisions apart from the code that makes them: every decision is re-applied
identically on every later call (DESIGN I2) and survives a restart (DESIGN "Restarts change nothing"),
so choosing (:mod:`.choosing`), pricing (:mod:`.pricing`), writing (:mod:`.paging`) and re-applying
(:mod:`.applying`) all read the same state, and the session store persists it as it is
(:mod:`..pipeline.session_snapshot`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .collapse import Collapse


@dataclass
class Batch:
    """One eviction batch: when, what (tool call ids; ``args:<id>`` for arguments, ``task:<n>`` for a
    finished task, ``reduced:<id>`` for an output reduced again at a cold start, :mod:`.deferred`),
    the artifact that holds the outputs and arguments, and the tokens it saved."""

    call_index: int
    key: str
    call_ids: list[str]
    tokens_saved: int


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


@dataclass(frozen=True, slots=True)
class Compaction:
    """One compaction lightmem2 made before the host's (:mod:`.compacting`): at call ``call``, the context (in the host's count) before and
    after (the messages alone under a budget the host told for them), where the history it kept whole
    starts (message index), its tokens, and what left."""

    call: int
    before: int
    after: int
    kept_from: int
    kept_tokens: int
    outputs: int
    arguments: int
    key: str
    limit: int = 0
    """The host's threshold it compacted under (:func:`.compacting.threshold`; 0: a state written
    before it was kept)."""

    def to_list(self) -> list[object]:
        """JSON-ready form for the persisted session state."""
        return [
            self.call,
            self.before,
            self.after,
            self.kept_from,
            self.kept_tokens,
            self.outputs,
            self.arguments,
            self.key,
            self.limit,
        ]

    @classmethod
    def from_list(cls, data: list[object]) -> Compaction:
        """The inverse of :meth:`to_list`; raises ``ValueError``/``TypeError`` on a malformed entry."""
        call, before, after, kept_from, kept_tokens, outputs, arguments, key, *rest = data
        if len(rest) > 1:
            raise ValueError(f"a compaction of {len(data)} fields, expected 8 or 9")
        n = [int(str(v)) for v in (call, before, after, kept_from, kept_tokens, outputs, arguments)]
        limit = int(str(rest[0])) if rest else 0
        return cls(n[0], n[1], n[2], n[3], n[4], n[5], n[6], str(key), limit)

    def describe(self) -> str:
        """In words, for the ledger row and ``report``: the figures, what stayed, where the rest went."""
        return (
            f"compaction before the host's limit: context ~{self.before:,} -> ~{self.after:,} tokens"
            + (f" (the host's limit {self.limit:,})" if self.limit else "")
            + f"; kept the newest {self.kept_tokens:,} tokens (from message {self.kept_from}), what the "
            f"user wrote and the session record; {_count(self.outputs, 'output')} and "
            f"{_count(self.arguments, 'argument')} "
            f"archived as {self.key}"
        )


@dataclass
class EvictionState:
    """Everything needed to re-apply past evictions byte for byte."""

    stubs: dict[str, str] = field(default_factory=dict)
    batches: list[Batch] = field(default_factory=list)
    last_batch_call: int = 0
    args: dict[str, str] = field(default_factory=dict)  # tool call id -> its arguments as now sent
    collapses: list[Collapse] = field(default_factory=list)
    goal_calls: list[int] = field(default_factory=list)  # the call at which goal n + 1 was first seen
    sent_whole: list[str] = field(default_factory=list)  # calls first sent before their result came
    compactions: list[Compaction] = field(default_factory=list)  # made before the host's limit
    measured: tuple[int, int] | None = None
    """(the provider's input tokens, lightmem2's count of the messages) of the last call whose usage
    came, as the last batch read it: the context estimate starts from it (:func:`.compacting.estimate`).
    A state written before it was kept has only the ratio of the two, no longer read: its next usage
    measures again."""
    thinking_before: int = 0
    """Answers before this message index go without their thinking (:mod:`.thinking`; a compaction
    sets it to where the history it kept whole starts)."""
    past_changes: list[tuple[int, int]] = field(default_factory=list)
    """Per change of the past (a batch, a deferred reduction, a compaction): the first message index
    it changed and how many messages the request held then. The answers in between were produced
    over a prefix that is gone: a model that binds its thinking to the prefix rejects them with it
    (:func:`.thinking.stale_ranges`)."""

    @property
    def version(self) -> tuple[int, ...]:
        """Changes whenever a decision was added (the session state is saved then)."""
        return (
            self.last_batch_call,
            len(self.batches),
            len(self.args),
            len(self.sent_whole),
            len(self.goal_calls),
            self.thinking_before,
            len(self.past_changes),
        )

    def describe_last(self) -> str:
        """What the last batch paged out, in words: ``task 1 finished (archived as KEY); 3 outputs``
        (a compaction: :meth:`Compaction.describe`)."""
        if not self.batches:
            return ""
        b = self.batches[-1]
        if self.compactions and self.compactions[-1].call == b.call_index:
            return self.compactions[-1].describe()
        keys = {c.number: c.key for c in self.collapses if c.call_index == b.call_index}
        tasks = [int(i[5:]) for i in b.call_ids if i.startswith("task:")]
        args = sum(i.startswith("args:") for i in b.call_ids)
        reduced = sum(i.startswith("reduced:") for i in b.call_ids)
        outputs = len(b.call_ids) - len(tasks) - args - reduced
        if reduced:  # deferred reductions (:mod:`.deferred`): each names its own original's key
            return (
                f"{_count(reduced, 'output')} kept whole reduced again at a cold start (originals "
                f"archived, first as {b.key})"
            )
        parts = [f"task {n} finished (archived as {keys.get(n, '?')})" for n in tasks]
        if outputs:
            parts.append(f"{_count(outputs, 'output')} (archived as {b.key})")
        if args:
            parts.append(f"{_count(args, 'argument')} (archived as {b.key})")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the persisted session state."""
        return {
            "stubs": self.stubs,
            "batches": [[b.call_index, b.key, b.call_ids, b.tokens_saved] for b in self.batches],
            "last": self.last_batch_call,
            "args": self.args,
            "collapses": [c.to_list() for c in self.collapses],
            "goal_calls": self.goal_calls,
            "sent_whole": self.sent_whole,
            "compactions": [c.to_list() for c in self.compactions],
            "measured": None if self.measured is None else list(self.measured),
            "thinking_before": self.thinking_before,
            "past_changes": [list(c) for c in self.past_changes],
        }

    @classmethod
    def from_dict(cls, ev: Mapping[str, Any]) -> EvictionState:
        """The inverse of :meth:`to_dict` (older states lack the newer keys); raises on malformed data."""
        return cls(
            {str(k): str(v) for k, v in ev.get("stubs", {}).items()},
            [Batch(int(b[0]), str(b[1]), [str(c) for c in b[2]], int(b[3])) for b in ev.get("batches", [])],
            int(ev.get("last", 0)),
            {str(k): str(v) for k, v in ev.get("args", {}).items()},
            [Collapse.from_list(c) for c in ev.get("collapses", [])],
            [int(c) for c in ev.get("goal_calls", [])],
            [str(c) for c in ev.get("sent_whole", [])],
            [Compaction.from_list(c) for c in ev.get("compactions", [])],
            None if ev.get("measured") is None else (int(ev["measured"][0]), int(ev["measured"][1])),
            int(ev.get("thinking_before", 0)),
            [(int(c[0]), int(c[1])) for c in ev.get("past_changes", [])],
        )
