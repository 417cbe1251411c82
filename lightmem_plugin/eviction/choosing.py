"""What a batch may page out: finished tasks, outputs no longer needed, long arguments that ran.

Why apart from the cost rule: which work is finished is a question of evidence (a new user goal, the
estimator's lifecycle, liveness signals, what the agent still acts on or refers to), while whether
paging it out pays is a question of price (:mod:`.pricing`). Each candidate carries what the cost
rule needs: where it sits (the break it makes), the tokens it saves as the model reads it now, and
how many calls that saving lasts. Three kinds (the module docstring of :mod:`.evictor` says why):

- a **finished task** (:func:`finished_goals`) leaves whole, for the rest of the session, unless an
  output after it refers into it (:func:`.references.referred_into`);
- an **output inside the running task** the estimator shows is no longer needed, unless it is the
  newest output of a command with error lines, or an output that stays refers to it
  (:func:`.references.stood_on`);
- the **long arguments of an executed call** inside the running task.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..config import EvictionConfig
from ..model import Message, Request
from ..reduction.error_lines import error_lines
from ..tokens import TokenCounter
from .collapse import Collapse, summary
from .entries import tool_call, tool_result
from .goals import GoalTask, goal_text, stated_goal
from .heuristic import HeuristicEstimator
from .lifecycle import TaskRegistry, TaskUpdate
from .references import references_in, referred_into, stood_on
from .signals import ToolEvent
from .state import EvictionState
from .stubs import request_stub, stub_arguments

STUB_TOKENS = 40
MIN_SAVING_TOKENS = 60
MESSAGES_PER_CALL = 2
PLACEHOLDER_KEY = "0" * 32
"""Stands for an archive's key while a stub is only weighed (a real key has the same length)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One thing a batch may page out: where it sits, what it is, what it saves and for how long."""

    index: int  # message index in the request
    ident: str  # a tool call id, "args:<id>" or "task:<n>"
    saving: int  # tokens
    horizon: float  # calls the saving is re-read for
    why: str = ""  # an output's: why it is no longer needed (the estimator's evidence)


def finished_goals(
    registry: TaskRegistry, collapses: list[Collapse], goals: list[GoalTask], messages: list[Message]
) -> dict[int, GoalTask]:
    """Close finished goals in the goal ``registry``; the ones that may leave now (``evictable``);
    ``collapses``: the tasks that already left.

    A goal closes in the first batch after the next goal came: ``completed`` and then, applied
    as a second step, ``evictable`` (the registry never takes ``active -> evictable`` in one
    step). Why both at once: unlike an estimator's guess, a new user goal is conclusive evidence,
    and waiting one more batch re-sent the whole finished task on 3-5 more calls (measured on
    the continuous benchmark: ~40% of what chaining tasks cost over running each alone)."""
    done = {c.number for c in collapses}
    closing = [(t, nxt) for t, nxt in itertools.pairwise(goals) if not t.empty and t.number not in done]
    completed: list[TaskUpdate] = []
    for t, nxt in closing:
        current = registry.get(f"g{t.number}")
        if current is None or current.lifecycle == "active":
            completed.append(
                TaskUpdate(
                    task_id=f"g{t.number}",
                    lifecycle="completed",
                    objective=_objective(stated_goal(goal_text(messages[t.goal]))),
                    turns=(t.goal, max(t.goal, t.last)),
                    evidence=(f"user set a new goal at message {nxt.goal}",),
                )
            )
    if completed:
        registry.apply(completed, max_turn=len(messages) - 1)
    evictable: list[TaskUpdate] = []
    for t, nxt in closing:
        current = registry.get(f"g{t.number}")
        if current is not None and current.lifecycle == "completed":
            evictable.append(
                TaskUpdate(
                    task_id=f"g{t.number}",
                    lifecycle="evictable",
                    evidence=(f"user set a new goal at message {nxt.goal}",),
                    evictable_reason="the user moved on to a new goal",
                )
            )
    if evictable:
        registry.apply(evictable, max_turn=len(messages) - 1)
    return {
        t.number: t
        for t in goals
        if t.number not in done
        and (chunk := registry.get(f"g{t.number}")) is not None
        and chunk.lifecycle == "evictable"
        and chunk.turns == (t.goal, max(t.goal, t.last))
    }


def _objective(text: str) -> str:
    """A goal's text as a task objective (one line, at most 400 chars, never empty)."""
    line = " ".join(text.split()) or "a goal"
    return line if len(line) <= 400 else line[:399] + "…"


def acted_on(estimator: HeuristicEstimator, ids: list[str | None]) -> set[str]:
    """Outputs whose error lines the agent acts on: the newest output of each command, when it has
    error lines (DESIGN 4: never cut; a stub would hide every one of them)."""
    log = estimator.log
    newest: dict[int, int] = {}
    for e in log.events:
        newest[e.norm] = e.seq
    out: set[str] = set()
    for seq in newest.values():
        e = log.events[seq]
        cid = ids[e.result_index] if e.result_index is not None and e.result_index < len(ids) else None
        if cid is not None and error_lines(log.outputs[seq]):
            out.add(cid)
    return out


def events_in(t: GoalTask, owners: list[int], estimator: HeuristicEstimator) -> list[ToolEvent]:
    """The tool events of task ``t`` (``owners``: the message each turn came from)."""
    return [e for e in estimator.log.events if t.first <= owners[e.call_index] <= t.last]


@dataclass(frozen=True)
class Chooser:
    """The candidates of one batch, read off the session's estimator, task registry and decisions
    (made per batch: a restored session or a new config replaces what it reads)."""

    config: EvictionConfig
    estimator: HeuristicEstimator
    tasks: TaskRegistry
    state: EvictionState
    counter: TokenCounter
    spell: Callable[[str], str]
    """How the model reads a host call id (:attr:`.evictor.Evictor.spell`)."""

    def candidates(
        self,
        view: list[Message],
        ids: list[str | None],
        owners: list[int],
        original: Request,
        sent: Request,
        sizes: list[int],
        goals: list[GoalTask],
        ready: Mapping[int, GoalTask],
        horizons: tuple[float, float],
        shell: bool,
    ) -> list[Candidate]:
        """Everything that may leave in this batch, with its saving (counted on ``sent``, what the
        model reads now) and horizon (``horizons``: the calls left in the task and in the session,
        :func:`.pricing.horizons`)."""
        in_task, in_session = horizons
        items: list[Candidate] = []
        created = frozenset(self.estimator.live.created)
        refs = references_in(sent, original)
        for t in ready.values():
            if referred_into(sent, refs, t, self.spell):
                continue
            span = original.messages[t.first : t.last + 1]
            events = events_in(t, owners, self.estimator)
            text = summary(t.number, PLACEHOLDER_KEY, span, events, created, shell)
            saving = sum(sizes[t.first : t.last + 1]) - self.counter.count(text)
            short = request_stub(t, original.messages, PLACEHOLDER_KEY, shell, self.config.goalKeepChars)
            if short is not None:  # the request leaves too: the prefix breaks at it, not after it
                saving += sizes[t.goal] - self.counter.count(short)
            if saving >= MIN_SAVING_TOKENS:
                items.append(Candidate(t.goal if short else t.first, f"task:{t.number}", saving, in_session))
        # outputs and arguments of the task still running (finished tasks leave whole)
        floor = max((t.last for t in goals[:-1] if not t.empty), default=-1)
        horizon = len(view) - self.config.keepRecentTurns * MESSAGES_PER_CALL
        index = {cid: i for i, cid in enumerate(ids) if cid is not None}
        outputs: dict[str, Candidate] = {}
        for cid, why in self._unneeded_outputs(view, ids).items():
            owner = owners[index[cid]]
            if owner <= floor:
                continue
            part = tool_result(sent.messages[owner], cid)  # what the model reads of it now
            n = self.counter.count(part.text()) if part is not None else 0
            if n - STUB_TOKENS >= MIN_SAVING_TOKENS:
                # the liveness signals that mark an output dead are weak inside a running task
                # (measured: with the session's own horizon they paged out outputs the agent used
                # later and the error lines it acted on), so outputs keep the cautious prior
                horizon_calls = min(in_task, float(self.config.expectedRemainingCalls))
                outputs[cid] = Candidate(owner, cid, n - STUB_TOKENS, horizon_calls, why)
        for cid in stood_on(refs, original, {cid: it.index for cid, it in outputs.items()}, self.spell):
            del outputs[cid]
        items.extend(outputs.values())
        for e in self._stale_arguments(horizon):
            ran = ids[e.result_index] if e.result_index is not None else None
            if ran is None or ran in self.state.args or owners[e.call_index] <= floor:
                continue
            call = tool_call(original.messages[owners[e.call_index]], ran)
            if call is None:
                continue
            stubbed = stub_arguments(call.arguments, PLACEHOLDER_KEY, shell)
            if stubbed is None:
                continue
            saving = self.counter.count(call.arguments) - self.counter.count(stubbed[0])
            if saving >= MIN_SAVING_TOKENS:
                items.append(Candidate(owners[e.call_index], f"args:{ran}", saving, in_task))
        return sorted(items, key=lambda it: (it.index, it.ident))

    def _unneeded_outputs(self, view: list[Message], ids: list[str | None]) -> dict[str, str]:
        """Tool call id -> why it is no longer needed, for outputs old enough to page out."""
        horizon = len(view) - self.config.keepRecentTurns * MESSAGES_PER_CALL
        reasons: dict[str, str] = {}
        for chunk in self.tasks.chunks:
            if chunk.lifecycle != "evictable":
                continue
            for i in range(chunk.turns[0], min(chunk.turns[1] + 1, horizon)):
                cid = ids[i] if i < len(ids) else None
                if cid is not None:
                    reasons[cid] = f"task {chunk.id} finished"
        log = self.estimator.log
        for seq, why in self.estimator.live.dead.items():
            idx = log.events[seq].result_index
            if idx is not None and idx < horizon and idx < len(ids):
                cid = ids[idx]
                if cid is not None:
                    reasons.setdefault(cid, why)
        keep = acted_on(self.estimator, ids)
        return {cid: why for cid, why in reasons.items() if cid not in self.state.stubs and cid not in keep}

    def _stale_arguments(self, horizon: int) -> list[ToolEvent]:
        """Executed calls whose long arguments the agent no longer reads: an inline script that ran
        (no file written), or a whole-file write that a later whole write of the same file replaced."""
        events = self.estimator.log.events
        later_whole: dict[str, int] = {}
        out: list[ToolEvent] = []
        for e in reversed(events):
            if (
                e.call_chars >= self.config.argumentMinChars
                and e.result_index is not None
                and e.result_index < horizon
                and (
                    (e.kind in ("run", "test") and not e.writes)  # a script that ran (its suite, too)
                    or (e.whole and all(later_whole.get(p, -1) > e.seq for p in e.whole))
                )
            ):
                out.append(e)
            for p in e.whole:
                later_whole.setdefault(p, e.seq)
        return out[::-1]
