"""Render a :class:`SessionRecord` as a token-budgeted text block (critical <= 100, standard <= 300,
full <= 600 tokens, counted with o200k_base).

Why greedy in priority order: what the model most needs after an eviction comes first (the current
goal, open errors, decisions in force, files modified), and the rest fills what budget is left, so a
smaller level is a prefix-ordered subset of a larger one. Rendering is a pure function of the record:
the block sits in the cached eviction stub and must be byte-identical for the same record.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator
from typing import Literal

from ..tokens import count_tokens
from .goals import stated_goal
from .session_record import FinishedTask, SessionRecord

RecordLevel = Literal["critical", "standard", "full"]
BUDGETS: dict[RecordLevel, int] = {"critical": 100, "standard": 300, "full": 600}
_GOAL_CHARS: dict[RecordLevel, int] = {"critical": 160, "standard": 400, "full": 1000}
_DECISION_CHARS: dict[RecordLevel, int] = {"critical": 90, "standard": 220, "full": 300}
_TAG = re.compile(r"</?[A-Za-z_][\w-]*>")


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _goal(text: str, limit: int) -> str:
    text = _TAG.sub(" ", stated_goal(text))
    text = re.sub(r"^\s*Consider the following (?:PR|issue) description:\s*", "", text, flags=re.I)
    return _clip(text, limit)


def _paths(label: str, paths: tuple[str, ...]) -> Iterator[str]:
    """The line naming ``paths``, then shorter variants (fewer names, "+N more") to fit a budget."""
    for shown in range(len(paths), 0, -1):
        more = f" (+{len(paths) - shown} more)" if shown < len(paths) else ""
        yield f"{label}: {', '.join(paths[:shown])}{more}"


_STATE_WORDS = {"evictable": "done (may leave the context)"}


def _tasks(record: SessionRecord) -> str | None:
    """``Tasks: 2 active, 2 completed, 4 done (may leave the context); current: ...``: how many of the
    registry's tasks are in each state, then the current one's objective.

    Why counts, not ids: the line named the registry's ids (``h5, h9 active; h6, h7 completed; h1-h4
    evictable``), which nothing else the model reads defines (a review of the Claude Code traces)."""
    if not record.tasks:
        return None
    counts: dict[str, int] = {}
    for task in record.tasks:
        counts[task.lifecycle] = counts.get(task.lifecycle, 0) + 1
    order = ("active", "blocked", "completed", "evictable")
    states = sorted(counts, key=lambda s: (order.index(s) if s in order else len(order), s))
    parts = [f"{counts[state]} {_STATE_WORDS.get(state, state)}" for state in states]
    current = record.tasks[-1]
    return f"Tasks: {', '.join(parts)}; current: {_clip(current.objective, 80)}"


_MIN_BASE_CHARS = 20
"""A directory shared by the record's absolute paths is named once when it is at least this long."""


def located(record: SessionRecord, path: str) -> str:
    """``path`` made absolute where the record knows what it is relative to (its work directory).

    Why: the tracker names a file relative to the session's work directory, the first absolute
    directory a command ``cd``-ed to, while the base directory the record names its paths relative
    to comes from the absolute ones: on 8463c716 the work directory was ``.../spotter-fum/assets``
    and the base ``.../spotter-fum``, so ``assets/js/app.js`` was listed as ``js/app.js``."""
    if path.startswith("/") or not record.workdir:
        return path
    return posixpath.normpath(posixpath.join(record.workdir, path))


def _base_dir(record: SessionRecord) -> str | None:
    """The directory whose naming once saves the most characters over the absolute paths in
    ``record`` that lie under it (two at least; ``/home/u/projects/app``), else None. Paths elsewhere
    (a ``/tmp`` file) stay absolute.

    Why: Claude Code names files by absolute path, so the record said
    ``/home/USER/projects/spotter-worktrees/spotter-gqc/`` before each of the dozen files it listed,
    a third of a standard record's budget, and fewer files and tasks fitted."""
    named = [f.path for f in record.files] + [p for t in record.finished for p in t.facts.modified]
    paths = {p for p in (located(record, p) for p in named) if p.startswith("/")}
    under: dict[str, int] = {}
    for path in paths:
        parent = posixpath.dirname(path)
        while len(parent) >= _MIN_BASE_CHARS:
            under[parent] = under.get(parent, 0) + 1
            parent = posixpath.dirname(parent)
    saving = {d: n * (len(d) + 1) - len(d) - 30 for d, n in under.items() if n >= 2}
    best = max(saving, key=lambda d: (saving[d], d), default=None)
    return best if best is not None and saving[best] > 0 else None


def _finished(task: FinishedTask, level: RecordLevel, rel: Callable[[str], str] = str) -> Iterator[str]:
    """The line for a finished task, then shorter variants: its goal, the files it edited, how it
    ended (files it created are only counted: mostly the agent's scratch scripts)."""
    f = task.facts
    ended = "" if not f.tests else "; tests passed" if f.last_test_failed is None else "; tests failed"
    ended += f"; ended failing: {_clip(f.failing[-1][1], 60)}" if f.failing else ""
    ended += f"; created {len(f.created)} files" if f.created else ""
    ended += f"; deleted {', '.join(map(rel, f.deleted[:3]))}" if f.deleted else ""
    head = f"- task {task.number} (turn {task.turn}): {_goal(task.goal, 80)}"
    if f.modified:
        for line in _paths(f"{head} -> edited", tuple(map(rel, f.modified[:6]))):
            yield line + ended
    yield head + ended


def _candidates(
    record: SessionRecord, level: RecordLevel, shown: list[str]
) -> Iterator[tuple[str, list[str]]]:
    """(section header, line variants best-first) in priority order; header "" means none.

    ``shown`` is the lines rendered so far: paths are written relative to the record's base directory
    only once the line naming it is among them (a budget too small for it keeps them absolute)."""
    if record.goals:
        goal = record.goals[-1]
        yield "", [f"Goal (turn {goal.turn}): {_goal(goal.text, _GOAL_CHARS[level])}"]
    base = _base_dir(record)
    named = f"Paths below are relative to {base}/" if base else ""
    if named:
        yield "", [named]

    prefix = f"{base}/" if base else None

    def rel(path: str) -> str:
        if prefix is None:  # no base named: each path as the session's commands named it
            return path
        path = located(record, path)
        if named in shown and path.startswith(prefix):
            return path[len(prefix) :]
        return path

    # A finished task's failures are told on its own line below ("ended failing"): listed as open, a
    # continuous chain's record had the current task chase a `sed` syntax error of a task three goals
    # back, above the tasks themselves. Decisions stay: a follow-up task works on the same code.
    since = record.goals[-1].turn if record.finished and record.goals else 0
    for err in reversed([e for e in record.open_errors if e.turn >= since][-3:]):
        yield "Open errors:", [f"- turn {err.turn}: `{_clip(err.command, 60)}` -> {_clip(err.error, 100)}"]
    for d in reversed(record.active_decisions):
        text = f"- {d.choice}"
        text += f" (instead of {d.replaces})" if d.replaces else ""
        text += f" because {d.reason}" if d.reason else ""
        yield "Decisions in force:", [_clip(f"{text} [turn {d.valid_from}]", _DECISION_CHARS[level])]
    for task in reversed(record.finished):  # newest first: the likeliest to be asked about
        yield "Finished tasks:", list(_finished(task, level, rel))
    modified = record.files_in("modified")
    if modified:
        yield "", list(_paths("Files modified", tuple(map(rel, modified))))
    created = record.files_in("created")
    if created:
        yield "", list(_paths("Files created", tuple(map(rel, created))))
    tasks = _tasks(record)
    if tasks:
        yield "", [tasks]
    for d in reversed([d for d in record.decisions if d.status != "active"]):
        end = f"{d.status} at turn {d.valid_until}" + (f" by {d.superseded_by}" if d.superseded_by else "")
        yield "Dropped decisions:", [_clip(f"- {d.id} {d.choice} ({end})", 160)]
    deleted = record.files_in("deleted")
    if deleted:
        yield "", list(_paths("Files deleted", tuple(map(rel, deleted))))
    read = record.files_in("read")
    if read:
        yield "", list(_paths("Files read", tuple(map(rel, read))))
    for goal in reversed(record.goals[:-1]):
        yield "Earlier goals:", [f"- turn {goal.turn}: {_goal(goal.text, 120)}"]


def render(record: SessionRecord, level: RecordLevel = "standard") -> str:
    """The record as text within the level's token budget; most important lines first."""
    budget = BUDGETS[level]
    lines = [f"Session record (turn {record.turn}):"]
    used = count_tokens(lines[0]) + 1
    headers: set[str] = set()
    for header, variants in _candidates(record, level, lines):
        extra = count_tokens(header) + 1 if header and header not in headers else 0
        for line in variants:
            cost = count_tokens(line) + 1 + extra
            if used + cost <= budget:
                if extra:
                    lines.append(header)
                    headers.add(header)
                lines.append(line)
                used += cost
                break
    text = "\n".join(lines)
    while count_tokens(text) > budget and len(lines) > 1:
        lines.pop()
        text = "\n".join(lines)
    return text
