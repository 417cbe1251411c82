"""Task chunks, their lifecycle, and the versioned registry that validates every change (DESIGN 5).

Why a registry that validates: estimators (a heuristic, or a model behind an HTTP endpoint) propose
deltas, and a wrong delta must never page out live work. So every rule lives here, in one place, and an
update that breaks one is rejected whole and logged: it is never half-applied.

Rules: ``completed`` needs evidence; ``evictable`` needs evidence, an evictable reason and no open
questions, and is reachable only from ``completed`` *as it stood before the batch* (so never
``active -> evictable`` in one step, not even through two updates in one batch); turn ranges are
``(first, last)`` message indices, inclusive, ``0 <= first <= last``, and never overlap another chunk.
Delta semantics: ``turns``, ``objective``, ``open_questions`` and ``evictable_reason`` replace when given;
``evidence`` is merged (kept in order, duplicates dropped), since evidence only accumulates.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from ..errors import EstimatorError

Lifecycle = Literal["active", "blocked", "completed", "evictable"]
LIFECYCLES: tuple[Lifecycle, ...] = ("active", "blocked", "completed", "evictable")
MAX_REJECTED = 200
_log = logging.getLogger(__name__)
_WIRE = ConfigDict(strict=True, extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)


class TaskUpdate(BaseModel):
    """One proposed change to one task chunk: what an estimator emits (camelCase in JSON)."""

    model_config = _WIRE

    task_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
    lifecycle: Lifecycle
    objective: str | None = Field(None, min_length=1, max_length=400)
    turns: tuple[int, int] | None = None
    evidence: tuple[str, ...] | None = Field(None, max_length=20)
    open_questions: tuple[str, ...] | None = Field(None, max_length=20)
    evictable_reason: str | None = Field(None, min_length=1, max_length=400)


class TaskUpdateBatch(BaseModel):
    """The JSON envelope ``{"taskUpdates": [...]}`` an LLM estimator must answer with."""

    model_config = _WIRE

    task_updates: tuple[TaskUpdate, ...] = Field(max_length=200)


@dataclass(frozen=True, slots=True)
class TaskChunk:
    """A run of messages serving one sub-goal; ``turns`` is the inclusive message-index range."""

    id: str
    objective: str
    lifecycle: Lifecycle
    turns: tuple[int, int]
    evidence: tuple[str, ...] = ()
    open_questions: tuple[str, ...] = ()
    evictable_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, the estimator wire format (camelCase) of an update that creates this chunk."""
        return {
            "taskId": self.id,
            "objective": self.objective,
            "lifecycle": self.lifecycle,
            "turns": list(self.turns),
            "evidence": list(self.evidence),
            "openQuestions": list(self.open_questions),
            **({"evictableReason": self.evictable_reason} if self.evictable_reason else {}),
        }


@dataclass(frozen=True, slots=True)
class Rejection:
    """An update the registry refused, with the one-line reason and the version it was checked at."""

    update: TaskUpdate
    reason: str
    version: int


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What one :meth:`TaskRegistry.apply` did: the new version, applied task ids, rejections."""

    version: int
    applied: tuple[str, ...]
    rejected: tuple[Rejection, ...]

    @property
    def changed(self) -> bool:
        """Whether any chunk changed (the version was bumped)."""
        return bool(self.applied)


def _merge(old: tuple[str, ...], new: tuple[str, ...] | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*old, *new))) if new else old


def _build(update: TaskUpdate, current: TaskChunk | None) -> TaskChunk | str:
    """The chunk after ``update`` (fields given replace, evidence merges), or why it cannot be built."""
    if current is None:
        if update.objective is None or update.turns is None:
            return f"task {update.task_id}: unknown task needs objective and turns; send both"
        current = TaskChunk(update.task_id, update.objective, update.lifecycle, update.turns)
    given = update.model_dump(
        include={"objective", "turns", "open_questions", "evictable_reason"}, exclude_none=True
    )
    return replace(
        current, **given, lifecycle=update.lifecycle, evidence=_merge(current.evidence, update.evidence)
    )


def _check_rules(new: TaskChunk, current: TaskChunk | None, before: Lifecycle | None) -> str | None:
    """The first lifecycle rule ``new`` breaks, or None."""
    tid = new.id
    if new.lifecycle in ("completed", "evictable") and not new.evidence:
        return f"task {tid}: {new.lifecycle} needs evidence; got none; send completion evidence"
    if new.lifecycle == "evictable":
        if new.open_questions:
            return (
                f"task {tid}: evictable needs no open questions; got {len(new.open_questions)} "
                f"({new.open_questions[0]!r}); resolve them or keep it completed"
            )
        if not new.evictable_reason:
            return f"task {tid}: evictable needs an evictableReason; got none; say why it can go"
        if before not in ("completed", "evictable"):
            return (
                f"task {tid}: {before or 'new'} -> evictable in one step is not allowed; "
                "mark it completed first, evictable in a later batch"
            )
        if before == "evictable" and current is not None and new.turns != current.turns:
            return f"task {tid}: turns of an evictable chunk cannot change; got {list(new.turns)}; reopen it"
    return None


def _check_turns(new: TaskChunk, others: Iterable[TaskChunk], max_turn: int | None) -> str | None:
    first, last = new.turns
    if first < 0 or last < first:
        return f"task {new.id}: turns {[first, last]} invalid; need 0 <= first <= last"
    if max_turn is not None and last > max_turn:
        return f"task {new.id}: turns {[first, last]} end past the last message {max_turn}; clip them"
    for other in others:
        if other.id != new.id and first <= other.turns[1] and other.turns[0] <= last:
            return (
                f"task {new.id}: turns {[first, last]} overlap task {other.id} "
                f"{list(other.turns)}; send disjoint ranges"
            )
    return None


class TaskRegistry:
    """The task chunks of one session, versioned: each batch that changes something bumps ``version``."""

    def __init__(self) -> None:
        self._chunks: dict[str, TaskChunk] = {}
        self.version = 0
        self.rejected: list[Rejection] = []

    @property
    def chunks(self) -> tuple[TaskChunk, ...]:
        """All chunks in message order."""
        return tuple(sorted(self._chunks.values(), key=lambda c: (c.turns[0], c.id)))

    def get(self, task_id: str) -> TaskChunk | None:
        """The chunk with ``task_id``, if any."""
        return self._chunks.get(task_id)

    def chunk_at(self, index: int) -> TaskChunk | None:
        """The chunk covering message ``index``, if any."""
        return next((c for c in self._chunks.values() if c.turns[0] <= index <= c.turns[1]), None)

    def covered_until(self, exclude_prefix: str | None = None) -> int:
        """Last message index any chunk covers (-1 if none), optionally ignoring ids with a prefix."""
        chunks = self._chunks.values()
        return max(
            (c.turns[1] for c in chunks if not (exclude_prefix and c.id.startswith(exclude_prefix))),
            default=-1,
        )

    def check(self, update: TaskUpdate, *, max_turn: int | None = None) -> str | None:
        """Why ``update`` would be rejected now (as a batch of one), or None if it is valid."""
        current = self._chunks.get(update.task_id)
        return self._validate(update, current.lifecycle if current else None, max_turn)[1]

    def _validate(
        self, update: TaskUpdate, before: Lifecycle | None, max_turn: int | None
    ) -> tuple[TaskChunk | None, str | None]:
        current = self._chunks.get(update.task_id)
        built = _build(update, current)
        if isinstance(built, str):
            return None, built
        reason = _check_rules(built, current, before) or _check_turns(built, self._chunks.values(), max_turn)
        return (None, reason) if reason else (built, None)

    def apply(self, updates: Iterable[TaskUpdate], *, max_turn: int | None = None) -> ApplyResult:
        """Apply a batch in order: each update is validated whole, then applied or rejected and logged."""
        before = {tid: chunk.lifecycle for tid, chunk in self._chunks.items()}
        applied: list[str] = []
        rejected: list[Rejection] = []
        for update in updates:
            new, reason = self._validate(update, before.get(update.task_id), max_turn)
            if new is None:
                rejection = Rejection(update, reason or "invalid", self.version)
                rejected.append(rejection)
                _log.debug("rejected task update for %s: %s", update.task_id, rejection.reason)
                continue
            if self._chunks.get(new.id) != new:
                self._chunks[new.id] = new
                if new.id not in applied:
                    applied.append(new.id)
        if applied:
            self.version += 1
        self.rejected.extend(rejected)
        del self.rejected[:-MAX_REJECTED]
        return ApplyResult(self.version, tuple(applied), tuple(rejected))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready state for persistence (chunks in message order, recent rejections)."""
        return {
            "version": self.version,
            "chunks": [c.to_dict() for c in self.chunks],
            "rejected": [
                {
                    "update": r.update.model_dump(by_alias=True, exclude_none=True, mode="json"),
                    "reason": r.reason,
                    "version": r.version,
                }
                for r in self.rejected
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskRegistry:
        """Rebuild from :meth:`to_dict` output; raises :class:`EstimatorError` on corrupt state."""
        registry = cls()
        try:
            state = _State.model_validate(data)
            chunks = [TaskUpdate.model_validate_json(json.dumps(c)) for c in state.chunks]
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "(root)"
            raise EstimatorError(
                f"task registry state invalid at {loc}: {first['msg']}; discard the saved state"
            ) from None
        registry.version = state.version
        for stored in chunks:
            chunk = _build(stored, None)
            reason = chunk if isinstance(chunk, str) else None
            if isinstance(chunk, TaskChunk):
                reason = _check_rules(chunk, chunk, chunk.lifecycle) or _check_turns(
                    chunk, registry._chunks.values(), None
                )
                reason = reason or (f"duplicate task {chunk.id}" if chunk.id in registry._chunks else None)
            if reason or not isinstance(chunk, TaskChunk):
                raise EstimatorError(f"task registry state invalid: {reason}; discard the saved state")
            registry._chunks[chunk.id] = chunk
        for r in state.rejected:
            try:
                update = TaskUpdate.model_validate_json(json.dumps(r.update))
            except ValidationError:
                continue  # an old rejection we cannot read back is only a log line; drop it
            registry.rejected.append(Rejection(update, r.reason, r.version))
        return registry


class _StoredRejection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    update: dict[str, Any]
    reason: str
    version: int = Field(ge=0)


class _State(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=0)
    chunks: list[dict[str, Any]]
    rejected: list[_StoredRejection] = Field(default_factory=list)
