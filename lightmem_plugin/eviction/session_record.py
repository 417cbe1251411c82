"""The typed session record: goals, decisions, task status, files touched, open errors.

Why a record beside eviction: once finished work is paged out, the model still needs what it learned
and decided. The record is extracted deterministically from the messages (tool calls say which files
were read or written and what failed; texts say what was decided) and rendered as a small block inside
the eviction stub, so it changes only at eviction batches. :meth:`SessionRecord.at_turn` answers "what
was believed at turn n" (decisions valid then, files and errors as of then; task lifecycles are only
known as they stand now).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ..model import Message
from .decisions import Decision, extract_decisions
from .entries import tool_calls
from .goals import after_interruption, continues, goal_words
from .heuristic import HeuristicEstimator
from .lifecycle import Lifecycle, TaskRegistry
from .signals import Said, ToolEvent, run_key

_LAST_INT = re.compile(r"(\d+)\D*$")
_REPEATS = ("same error again", "same output again", "re-run")
FileState = Literal["read", "created", "modified", "deleted"]
Action = Literal["read", "create", "modify", "delete"]


@dataclass(frozen=True, slots=True)
class Goal:
    """A user message, the goal it set."""

    turn: int
    text: str


@dataclass(frozen=True, slots=True)
class TaskStatus:
    """A task chunk's lifecycle as the registry holds it."""

    id: str
    objective: str
    lifecycle: Lifecycle
    turns: tuple[int, int]


@dataclass(frozen=True, slots=True)
class FileTouch:
    """One file and what the agent did to it, in order: ``(turn, action)``."""

    path: str
    history: tuple[tuple[int, Action], ...]

    @property
    def state(self) -> FileState:
        """read / created / modified / deleted, from the history."""
        actions = [a for _, a in self.history]
        if actions[-1] == "delete":
            return "deleted"
        writes = [a for a in actions if a in ("create", "modify")]
        if not writes:
            return "read"
        first_write = actions.index(writes[0])
        created = writes[0] == "create" and "read" not in actions[:first_write]
        return "created" if created else "modified"

    def as_of(self, turn: int) -> FileTouch | None:
        """This file as known at ``turn`` (None if not touched yet)."""
        history = tuple(h for h in self.history if h[0] <= turn)
        return replace(self, history=history) if history else None


@dataclass(frozen=True, slots=True)
class ErrorEntry:
    """A failed tool call; ``closed_at`` is when a later call fixed it or the same error recurred."""

    turn: int
    command: str
    error: str
    closed_at: int | None = None
    how: Literal["fixed", "repeated"] | None = None

    def open_at(self, turn: int) -> bool:
        """Whether this error was still open at ``turn``."""
        return self.turn <= turn and (self.closed_at is None or self.closed_at > turn)


@dataclass(frozen=True, slots=True)
class TaskFacts:
    """What a task did and how it ended, from its tool calls (checkable against them)."""

    calls: int = 0
    modified: tuple[str, ...] = ()
    created: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()  # files that were there before the task and are gone after it
    tests: int = 0
    last_test: str = ""  # the last test command
    last_test_failed: str | None = None  # its error line when it failed, None when it passed
    failing: tuple[tuple[str, str], ...] = ()  # (command, error line) of commands that ended failing


@dataclass(frozen=True, slots=True)
class FinishedTask:
    """A task a later user goal closed: its goal (message index and text) and its facts."""

    number: int
    turn: int
    goal: str
    facts: TaskFacts


def _newest_runs(events: Sequence[ToolEvent]) -> list[ToolEvent]:
    """The runs no later run supersedes, in order: the newest of each command (:func:`run_key`) and
    of each label, since that is all a reader of the summary can tell runs apart by.

    Why the label: a test script fixed by its next version (``settings.configure`` with the dummy
    database, then with sqlite) is another command with the same label, ``python -c "suite =
    unittest.TestLoader()....Case(ShellCommandTestCase)``; a summary said it passed last on its Tests
    line and ``Ended failing`` below. A run that another supersedes passes that on to the earlier
    runs it matches, by key or by label."""
    seen_keys: set[int] = set()
    seen_labels: set[str] = set()
    newest: list[ToolEvent] = []
    for e in reversed(events):
        key = run_key(e.command)
        if key not in seen_keys and e.label not in seen_labels:
            newest.append(e)
        seen_keys.add(key)
        seen_labels.add(e.label)
    return newest[::-1]


def task_facts(events: Sequence[ToolEvent], created: Collection[str]) -> TaskFacts:
    """The facts of the tool calls ``events`` (one task's, in order); ``created`` are the files the
    session created (so a write to one is a creation, not an edit).

    A file whose last touch in the task deleted it is no file the task modified or created: one that
    was there before is ``deleted``, one the session made and removed (a scratch script) is left out.
    Why: ``rm old_module.py`` was listed under "Files modified", and a created-then-removed script
    under "Files created", so the next task could look for a file that is not there."""
    gone: dict[str, bool] = {}
    for e in events:
        for p in e.writes:
            gone[p] = False
        for p in e.deletes:
            gone[p] = True
    changed = [p for p, removed in gone.items() if not removed]
    made_here = {p for e in events for p in e.writes if p in e.whole and p in created}
    tests = [e for e in events if e.kind == "test"]
    failing = tuple((e.label, e.error_line) for e in _newest_runs(events) if e.failed)
    return TaskFacts(
        calls=len(events),
        modified=tuple(p for p in changed if p not in created),
        created=tuple(p for p in changed if p in created),
        deleted=tuple(p for p, removed in gone.items() if removed and p not in made_here),
        tests=len(tests),
        last_test=tests[-1].label if tests else "",
        last_test_failed=(tests[-1].error_line or "failed") if tests and tests[-1].failed else None,
        failing=failing[-2:],
    )


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """Everything the record knows, as of message index ``turn``."""

    turn: int
    goals: tuple[Goal, ...] = ()
    decisions: tuple[Decision, ...] = ()
    tasks: tuple[TaskStatus, ...] = ()
    files: tuple[FileTouch, ...] = ()
    errors: tuple[ErrorEntry, ...] = ()
    finished: tuple[FinishedTask, ...] = ()
    workdir: str | None = None
    """The directory the session's relative paths are relative to (the first ``cd`` to an absolute
    directory; None: unknown, the paths are as the commands named them)."""

    @property
    def open_errors(self) -> tuple[ErrorEntry, ...]:
        """Failures not fixed (nor repeated later) as of :attr:`turn`."""
        return tuple(e for e in self.errors if e.open_at(self.turn))

    @property
    def active_decisions(self) -> tuple[Decision, ...]:
        """Decisions still in force."""
        return tuple(d for d in self.decisions if d.status == "active")

    def files_in(self, *states: FileState) -> tuple[str, ...]:
        """Paths whose state is one of ``states``, in first-touch order."""
        return tuple(f.path for f in self.files if f.state in states)

    def at_turn(self, turn: int) -> SessionRecord:
        """What was believed at message index ``turn``."""
        files = tuple(f for f in (x.as_of(turn) for x in self.files) if f is not None)
        return SessionRecord(
            turn=turn,
            goals=tuple(g for g in self.goals if g.turn <= turn),
            decisions=tuple(d.as_of(turn) for d in self.decisions if d.valid_from <= turn),
            tasks=tuple(t for t in self.tasks if t.turns[0] <= turn),
            files=files,
            errors=tuple(e for e in self.errors if e.turn <= turn),
            finished=tuple(f for f in self.finished if self._closed_by(f, turn)),
            workdir=self.workdir,
        )

    def _closed_by(self, task: FinishedTask, turn: int) -> bool:
        """Whether the goal after ``task`` had been set by ``turn``."""
        later = [g.turn for g in self.goals if g.turn > task.turn]
        return bool(later) and later[0] <= turn


def _files(source: HeuristicEstimator) -> tuple[FileTouch, ...]:
    history: dict[str, list[tuple[int, Action]]] = {}
    for e in source.log.events:
        t = e.call_index
        for path in e.reads:
            if path not in e.writes:
                history.setdefault(path, []).append((t, "read"))
        for path in e.writes:
            known = path in history
            action: Action = "create" if path in e.whole and not known else "modify"
            history.setdefault(path, []).append((t, action))
        for path in e.deletes:
            history.setdefault(path, []).append((t, "delete"))
    return tuple(FileTouch(p, tuple(h)) for p, h in history.items())


def _errors(source: HeuristicEstimator) -> tuple[ErrorEntry, ...]:
    events, live = source.log.events, source.live
    out: list[ErrorEntry] = []
    for e in events:
        if not e.failed:
            continue
        fixer = live.fixed.get(e.seq)
        reason = live.dead.get(e.seq)
        entry = ErrorEntry(e.call_index, e.label, e.error_line)
        if fixer is not None:
            entry = replace(entry, closed_at=events[fixer].call_index, how="fixed")
        elif reason is not None and (turn := _LAST_INT.search(reason)):
            how: Literal["fixed", "repeated"] = "repeated" if reason.startswith(_REPEATS) else "fixed"
            entry = replace(entry, closed_at=int(turn.group(1)), how=how)
        out.append(entry)
    return tuple(out)


def _answers(messages: Sequence[Message], said: Sequence[Said], n: int) -> bool:
    """Whether user text ``said[n]`` answers a question the agent ended its turn with, or only tells
    it to go on (it then continues that task; see :func:`.goals.goal_tasks`)."""
    if after_interruption(messages, said[n].index) or continues(said[n].text):
        return True
    prev = said[n - 1] if n else None
    if prev is None or prev.role != "assistant" or not prev.text.rstrip().endswith("?"):
        return False
    between = messages[prev.index : said[n].index]
    return not tool_calls(between[0]) and all(m.role in ("assistant", "user") for m in between)


def extract(
    messages: Sequence[Message],
    registry: TaskRegistry | None = None,
    *,
    source: HeuristicEstimator | None = None,
) -> SessionRecord:
    """The record of ``messages``; pass the session's estimator as ``source`` to reuse its parse."""
    source = source or HeuristicEstimator()
    source.sync(messages)
    said = source.log.said
    goals = [
        s
        for n, s in enumerate(said)
        if s.role == "user" and goal_words(s.text) and not _answers(messages, said, n)
    ]
    created = frozenset(source.live.created)
    finished = tuple(
        FinishedTask(
            n + 1,
            g.index,
            goal_words(g.text),
            task_facts([e for e in source.log.events if g.index < e.call_index < nxt.index], created),
        )
        for n, (g, nxt) in enumerate(itertools.pairwise(goals))
    )
    return SessionRecord(
        turn=len(messages) - 1,
        goals=tuple(
            Goal(s.index, s.text)
            for s in said
            if s.role == "user" and goal_words(s.text) and not continues(s.text)
        ),
        decisions=extract_decisions(said),
        tasks=tuple(
            TaskStatus(c.id, c.objective, c.lifecycle, c.turns) for c in (registry.chunks if registry else ())
        ),
        files=_files(source),
        errors=_errors(source),
        finished=finished,
        workdir=source.log.tracker.workdir,
    )


def standalone(messages: Sequence[Message]) -> SessionRecord:
    """The record of a history read on its own, outside any session (a recorded session for
    ``lightmem2 resume --trace``, the history a host is about to compact): the heuristic estimator's
    tasks and parse, no LLM."""
    estimator, tasks = HeuristicEstimator(), TaskRegistry()
    tasks.apply(estimator.estimate(messages, tasks), max_turn=len(messages) - 1)
    return extract(messages, tasks, source=estimator)
