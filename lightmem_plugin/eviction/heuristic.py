"""The default estimator: segments a session into task chunks and decides their lifecycle, no model.

Why these chunks: a chunk is a run of tool calls and outputs serving one sub-goal, which in coding
sessions reads as a cycle *investigate -> change -> check*. So a chunk closes when a new user message
arrives (a new goal), or when the agent goes back to investigating after it changed or ran something;
long runs are cut so no chunk grows without bound. Boundaries depend only on earlier events, so they
never move once drawn, and chunk ids (``h1``, ``h2`` ...) are stable across calls and restarts.

Lifecycle comes from :mod:`liveness`: a closed chunk with evidence is ``completed``; a chunk that was
``completed`` before this batch and has no output still current (no open question) becomes
``evictable``. ``probes`` picks how eagerly investigation outputs go stale (see :mod:`liveness` for the
measured trade-off). The estimator is incremental: each call parses only new messages and touches only
new events, and emits only the delta against the registry. It never emits ``blocked``; chunks that
start inside ranges another estimator's chunks cover are left alone.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..model import Message
from .lifecycle import Lifecycle, TaskChunk, TaskRegistry, TaskUpdate
from .liveness import Liveness, Probes
from .signals import EventLog, ToolEvent

_RANK = {"explore": 0, "read": 0, "vcs": 0, "install": 0, "other": 0, "write": 1, "run": 2, "test": 2}
_INLINE = re.compile(r"\bpython[\d.]*\s+-c\b")
_ORDER: dict[Lifecycle, int] = {"active": 0, "blocked": 0, "completed": 1, "evictable": 2}
_MAX_EVIDENCE = 8
_MAX_QUESTIONS = 6


@dataclass(slots=True)
class _Chunk:
    number: int
    start: int
    events: list[int] = field(default_factory=list)
    max_rank: int = 0
    last_rank: int = 0


def _rank(e: ToolEvent) -> int:
    if e.kind == "run" and _INLINE.search(e.command) and not e.writes:
        return 0
    return _RANK[e.kind]


def _names(paths: list[str], limit: int = 3) -> str:
    shown = ", ".join(posixpath.basename(p) for p in paths[:limit])
    return shown + (f" +{len(paths) - limit}" if len(paths) > limit else "")


class HeuristicEstimator:
    """Proposes :class:`TaskUpdate` deltas from tool-call signals; deterministic and incremental."""

    def __init__(
        self,
        *,
        max_chunk_events: int = 12,
        weighty_chars: int = 300,
        id_prefix: str = "h",
        probes: Probes = "runs",
    ) -> None:
        self.probes = probes
        self.max_chunk_events = max_chunk_events
        self.weighty_chars = weighty_chars
        self.id_prefix = id_prefix
        self.log = EventLog()
        self._reset()

    def _reset(self) -> None:
        self.live = Liveness(probes=self.probes)
        self._chunks: list[_Chunk] = []
        self._next = 0
        self._users: list[int] = []
        self._gen = self.log.generation

    def estimate(self, messages: Sequence[Message], registry: TaskRegistry) -> list[TaskUpdate]:
        """The updates that bring ``registry`` in line with what the messages show."""
        self.sync(messages)
        floor = registry.covered_until(exclude_prefix=self.id_prefix)
        updates: list[TaskUpdate] = []
        for pos, chunk in enumerate(self._chunks):
            if chunk.start <= floor:
                continue
            update = self._update(chunk, pos, registry, len(messages))
            if update is not None:
                updates.append(update)
        return updates

    def sync(self, messages: Sequence[Message]) -> None:
        """Read new messages and events (starting over if the log had to re-parse)."""
        self.log.update(messages)
        if self.log.generation != self._gen:
            self._reset()
        self._users = [s.index for s in self.log.said if s.role == "user"]
        events, outputs = self.log.events, self.log.outputs
        for e in events[self._next :]:
            self.live.add(e, outputs[e.seq], outputs)
            self._segment(e)
        self._next = len(events)

    def _segment(self, e: ToolEvent) -> None:
        rank = _rank(e)
        cur = self._chunks[-1] if self._chunks else None
        if cur is not None:
            prev = self.log.events[cur.events[-1]]
            if prev.call_index == e.call_index:
                cur.events.append(e.seq)
                return
            size = len(cur.events)
            after = bisect.bisect_right(self._users, prev.call_index)
            user_between = after < len(self._users) and self._users[after] < e.call_index
            if not (
                user_between
                or (rank == 0 and cur.max_rank >= 1)
                or (size >= self.max_chunk_events and rank < cur.last_rank)
                or size >= 2 * self.max_chunk_events
            ):
                cur.events.append(e.seq)
                cur.max_rank = max(cur.max_rank, rank)
                cur.last_rank = rank
                return
        self._chunks.append(_Chunk(len(self._chunks) + 1, e.call_index, [e.seq], rank, rank))

    def _end(self, pos: int, n_messages: int) -> tuple[int, int | None]:
        """Last message index of chunk ``pos`` and the user message that closed it, if one did."""
        chunk = self._chunks[pos]
        nxt = self._chunks[pos + 1].start if pos + 1 < len(self._chunks) else n_messages
        user = next((u for u in self._users if chunk.start < u < nxt), None)
        return (user if user is not None else nxt) - 1, user

    def objective(self, chunk_events: list[int]) -> str:
        """What the chunk did, from its calls (deterministic, under 120 chars)."""
        events = [self.log.events[s] for s in chunk_events]
        created = self.live.created
        edits = list(dict.fromkeys(p for e in events for p in e.writes if p not in created))
        made = list(dict.fromkeys(p for e in events for p in e.writes if p in created))
        reads = list(dict.fromkeys(p for e in events for p in e.reads if p not in edits and p not in made))
        parts = [f"edit {_names(edits)}"] if edits else []
        parts += [f"create {_names(made)}"] if made else []
        parts += [f"inspect {_names(reads)}"] if reads else []
        parts += ["run tests"] if any(e.kind == "test" for e in events) else []
        if not parts:
            parts = ["run " + events[0].label] if events[0].kind == "run" else ["explore the workspace"]
        text = "; ".join(parts)
        return text if len(text) <= 120 else text[:117] + "..."

    def status(
        self, chunk_events: list[int], closed_by: int | None, closed: bool
    ) -> tuple[list[str], list[str]]:
        """Evidence (dead outputs and why) and open questions (outputs still current) of a chunk."""
        evidence: list[str] = []
        questions: list[str] = []
        for seq in chunk_events:
            e = self.log.events[seq]
            reason = self.live.dead.get(seq)
            if reason is not None:
                line = f"turn {e.call_index}: {reason}"
                if len(evidence) < _MAX_EVIDENCE and line not in evidence:
                    evidence.append(line)
            elif e.failed and seq not in self.live.fixed:
                questions.append(f"turn {e.call_index}: `{e.label}` failed: {e.error_line}")
            elif e.output_chars + e.call_chars >= self.weighty_chars:
                questions.append(f"turn {e.call_index}: `{e.label}` output still current")
        if closed_by is not None:
            evidence.append(f"user set a new goal at turn {closed_by}")
        if closed and not evidence and not questions:
            first, last = self.log.events[chunk_events[0]], self.log.events[chunk_events[-1]]
            evidence.append(
                f"turns {first.call_index}-{last.result_index}: no output over {self.weighty_chars} chars"
            )
        return evidence, questions[:_MAX_QUESTIONS]

    def _update(self, chunk: _Chunk, pos: int, registry: TaskRegistry, n: int) -> TaskUpdate | None:
        end, user = self._end(pos, n)
        closed = pos + 1 < len(self._chunks) or user is not None
        tid = f"{self.id_prefix}{chunk.number}"
        current = registry.get(tid)
        evidence, questions = self.status(chunk.events, user, closed)
        lifecycle: Lifecycle = "active"
        if not closed:
            evidence = []
        elif evidence:
            lifecycle = "completed"
            if current is not None and current.lifecycle == "completed" and not questions:
                lifecycle = "evictable"
        if current is not None and _ORDER[current.lifecycle] > _ORDER[lifecycle]:
            return None
        if current is not None and current.lifecycle == "evictable":
            return None
        wanted = TaskChunk(
            id=tid,
            objective=self.objective(chunk.events),
            lifecycle=lifecycle,
            turns=(chunk.start, max(chunk.start, end)),
            evidence=tuple(dict.fromkeys((*(current.evidence if current else ()), *evidence))),
            open_questions=tuple(questions),
            evictable_reason=(
                "every output was superseded, repeated, fixed or consumed later"
                if lifecycle == "evictable"
                else None
            ),
        )
        if current == wanted:
            return None
        return TaskUpdate(
            task_id=tid,
            lifecycle=lifecycle,
            objective=wanted.objective,
            turns=wanted.turns,
            evidence=tuple(evidence) if evidence else None,
            open_questions=tuple(questions),
            evictable_reason=wanted.evictable_reason,
        )
