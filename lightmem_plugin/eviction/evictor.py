"""Cost-aware eviction: page out finished work, in batches, only when it pays.

Why a cost rule: in append-only sessions the provider cache already hits ~97%, so every change in the
middle of the history re-misses everything after it once. Paging out ``X`` tokens that sit before
``T`` tokens saves about ``0.1 * X`` per remaining call and costs about ``0.9 * T`` once (DESIGN 1). A
batch runs at most every ``eviction.batchTurns`` calls; it picks the earliest break position whose
saving over the expected remaining calls (:mod:`.horizon`, from the session's own tasks) beats its
one-time re-miss, and pages out everything that may go from there on, so one break pays for as much
as possible.

What may go, three kinds:

- **Finished tasks** (:mod:`.goals`): a new user goal closes the task before it. Its goal chunk
  becomes ``completed`` at the next batch and ``evictable`` at the one after (never in one step);
  then its whole work, tool outputs and assistant turns, is archived as one document and replaced by
  one assistant message that says what it did and how it ended (:mod:`.collapse`). This is where
  nearly all of the saving is: the break sits right after the task, so little follows it.
- **Outputs inside the running task** the estimator shows are no longer needed (in a chunk that
  became ``evictable``, or stale: a file read later rewritten or re-read, a command re-run), except
  the newest output of a command while it has error lines. Each is replaced in place by a one-line
  stub naming the batch's archive and its line range; the first stub carries the session record.
- **Long arguments of executed calls** inside the running task (an inline script that ran, a file
  write a later whole write replaced): the longest value keeps its first line and a stub.
  With ``eviction.argumentsOnArrival`` they go as they first come back instead (:meth:`on_arrival`).

Everything removed is archived (recoverable with the key in its stub), and everything decided is
re-applied identically on every later call (DESIGN I2) and persisted with the session state.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..codecs.memo import PerObject
from ..config import EstimatorConfig, EvictionConfig
from ..model import Message, Request, TextPart, ToolCallPart, ToolResultPart
from ..reduction.dedup import call_base, calls_named, names_no_call
from ..reduction.error_lines import error_lines
from ..reduction.linedup import MIN_LINE_CHARS
from ..tokens import TokenCounter
from .break_cost import PREFIX, BreakCost
from .collapse import Collapse, archive_document, fingerprint, request_text, summary
from .entries import entries, tool_call, tool_result, turn_text
from .goals import GoalTask, goal_tasks, goal_text, stated_goal
from .heuristic import HeuristicEstimator
from .horizon import remaining_in_session, remaining_in_task
from .lifecycle import TaskRegistry, TaskUpdate
from .llm_estimator import LLMEstimator
from .record_render import render
from .session_record import extract
from .signals import ToolEvent
from .state import Batch, EvictionState
from .stubs import largest_leaf, output_stub, request_stub, stub_arguments

STUB_TOKENS = 40
MIN_SAVING_TOKENS = 60
MESSAGES_PER_CALL = 2


def _view(req: Request) -> tuple[list[Message], list[str | None], list[int]]:
    turns = entries(req)
    return turns.turns, turns.ids, turns.owners


@dataclass(frozen=True, slots=True)
class _Item:
    """One thing a batch may page out: where it sits, what it is, what it saves and for how long."""

    index: int  # message index in the request
    ident: str  # a tool call id, "args:<id>" or "task:<n>"
    saving: int  # tokens
    horizon: float  # calls the saving is re-read for
    why: str = ""  # an output's: why it is no longer needed (the estimator's evidence)


class Evictor:
    """Per-session eviction: an estimator, its task registry, and the evictions made so far."""

    _estimator_config: EstimatorConfig | None

    def _proposer(self, estimator: EstimatorConfig | None) -> HeuristicEstimator | LLMEstimator:
        """The LLM estimator (opt-in) proposes task updates; the heuristic still tracks staleness and is
        its fallback on any failure."""
        if estimator is not None and estimator.kind == "llm":
            return LLMEstimator(estimator, fallback=self.estimator)
        return self.estimator

    def reconfigure(self, config: EvictionConfig, estimator: EstimatorConfig | None) -> None:
        """Follow the config in force from the next call on (its batches, budgets and horizons are read
        at each use; the estimator is rebuilt when its settings changed, the tasks it tracked kept)."""
        self.config = config
        if estimator != self._estimator_config:
            self._estimator_config = estimator
            self.proposer = self._proposer(estimator)

    def __init__(
        self,
        config: EvictionConfig,
        archive: Callable[[bytes], str],
        counter: TokenCounter,
        estimator: EstimatorConfig | None = None,
    ) -> None:
        self.config = config
        self.archive = archive
        self.counter = counter
        self.estimator = HeuristicEstimator()
        self._estimator_config = estimator
        self.proposer = self._proposer(estimator)
        self.tasks = TaskRegistry()
        self.goals = TaskRegistry()  # one chunk per user goal (ids g1, g2, ...), message indices
        self.state = EvictionState()
        self._applied: PerObject[Message, Message] = PerObject(self._stub_message)
        self._applied_for: tuple[int, ...] = ()  # the eviction decisions _applied was made for
        self._verified: dict[int, tuple[Message, Message]] = {}
        self._collapsed: dict[int, Message] = {}
        self._requests: dict[int, tuple[Message, Message]] = {}  # task -> (its request, what is sent)
        self._sizes: PerObject[Message, int] = PerObject(self._size_of)
        self.last_evicted_tokens = 0
        self.spell: Callable[[str], str] = str  # as the host sent it
        """How the model reads a host call id in this request (short call ids: :mod:`~.prefix.call_ids`); the
        archived text of a batch or a task names each call so, as the context around its stub did."""
        self.remaining_hint: Callable[[int], tuple[float, float]] | None = None
        self.break_cost: BreakCost = PREFIX
        """The price of a break on the provider's cache (:mod:`.break_cost`), set per request."""
        # (first, last) message ranges of the last applied request that became one message each
        self.collapsed: list[tuple[int, int]] = []

    # -- applying --------------------------------------------------------------------------------
    def apply(self, req: Request) -> Request:
        """``req`` with every eviction made so far applied (no change when none applies); the ranges
        of ``req.messages`` that were replaced by one summary message each are in :attr:`collapsed`."""
        self.collapsed = []
        if not (self.state.stubs or self.state.args or self.state.collapses):
            return req
        return self._collapse(req, self._stub_parts(req))

    def _stub_parts(self, req: Request) -> Request:
        """``req`` with evicted tool outputs and arguments replaced by their stubs (same messages)."""
        if not (self.state.stubs or self.state.args):
            return req
        made_for = (*self.state.version, len(self.state.stubs))
        if made_for != self._applied_for:  # new decisions: every message is looked at again
            self._applied.forget()
            self._applied_for = made_for
        out = self._applied.map(req.messages)  # a stubbed message is the same object call after call
        if all(a is b for a, b in zip(out, req.messages, strict=True)):
            return req
        return Request(out, req.tools, req.extra, req.hints)

    def _stub_message(self, msg: Message) -> Message:
        """``msg`` with its evicted outputs and arguments as their stubs (``msg`` itself if none)."""
        stubs, args = self.state.stubs, self.state.args
        if not any(
            (isinstance(p, ToolResultPart) and p.tool_call_id in stubs)
            or (isinstance(p, ToolCallPart) and p.id in args)
            for p in msg.parts
        ):
            return msg
        return Message(msg.role, [self._stubbed(p) for p in msg.parts], dict(msg.extra), dict(msg.hints))

    def _stubbed(self, part: Any) -> Any:
        if isinstance(part, ToolResultPart):
            stub = self.state.stubs.get(part.tool_call_id)
            if stub is not None:
                return ToolResultPart(part.tool_call_id, [TextPart(stub)], part.is_error, dict(part.extra))
        elif isinstance(part, ToolCallPart):
            args = self.state.args.get(part.id)
            if args is not None:
                return ToolCallPart(part.id, part.name, args, dict(part.extra))
        return part

    def _collapse(self, original: Request, req: Request) -> Request:
        """``req`` with each collapsed task's messages replaced by its one summary message.

        A collapse applies only where the same messages are found again (checked on ``original``, by
        fingerprint); a host that rewrote its history gets its own messages back, never a wrong one."""
        if not self.state.collapses:
            return req
        src, msgs = original.messages, req.messages
        keep: list[tuple[int, int, Message]] = []
        requests: dict[int, Message] = {}  # a finished task's request that left with it
        verified: dict[int, tuple[Message, Message]] = {}
        for c in self.state.collapses:
            if c.last >= len(src):
                continue
            seen = self._verified.get(c.number)
            ok = seen is not None and seen[0] is src[c.first] and seen[1] is src[c.last]
            if not ok and fingerprint(src[c.first : c.last + 1]) != c.fingerprint:
                continue
            verified[c.number] = (src[c.first], src[c.last])
            msg = self._collapsed.get(c.number)
            if msg is None:
                msg = self._collapsed[c.number] = Message("assistant", [TextPart(c.text)])
            keep.append((c.first, c.last, msg))
            short = self._short_request(c, src)
            if short is not None:
                requests[c.goal] = short
        self._verified = verified
        if not keep:
            return req
        if requests:
            msgs = [requests.get(i, m) for i, m in enumerate(msgs)]
        out: list[Message] = []
        pos = 0
        for first, last, msg in sorted(keep, key=lambda k: k[0]):
            if first < pos:
                continue  # overlapping ranges cannot come from one history; keep the first
            out.extend(msgs[pos:first])
            out.append(msg)
            self.collapsed.append((first, last))
            pos = last + 1
        out.extend(msgs[pos:])
        return Request(out, req.tools, req.extra, req.hints)

    def _short_request(self, c: Collapse, src: list[Message]) -> Message | None:
        """What is sent for the request of collapsed task ``c`` when it left with the task (the same
        object call after call), or None: it stays whole, or the host's request there is another."""
        if c.goal < 0 or c.goal >= len(src):
            return None
        original = src[c.goal]
        hit = self._requests.get(c.number)
        if hit is not None and hit[0] is original:
            return hit[1]
        if fingerprint([original]) != c.goal_fingerprint:
            return None
        first = original.parts[0] if original.parts else None
        extra = dict(first.extra) if isinstance(first, TextPart) else {}
        short = Message(
            original.role, [TextPart(c.goal_text, extra)], dict(original.extra), dict(original.hints)
        )
        self._requests[c.number] = (original, short)
        return short

    def describe_last(self) -> str:
        """What the last batch paged out, in words (:meth:`.state.EvictionState.describe_last`)."""
        return self.state.describe_last()

    # -- deciding ----------------------------------------------------------------------------------
    def on_arrival(self, req: Request, shell: bool = False) -> int:
        """Archive the long arguments of calls that just ran, as they first come back as input.

        Why on arrival: a call's arguments are new input in the request that carries its result
        (the model wrote them; no cache holds them yet), so replacing them there costs no cache break,
        unlike any later change. Kept: the first line (``cat > fix.py << 'EOF'``, the script's
        interpreter) and a stub with the key. A call first seen without its result keeps its
        arguments for good (changing them later would break the prefix). Returns how many archived."""
        results = {p.tool_call_id for m in req.messages for p in m.parts if isinstance(p, ToolResultPart)}
        done = 0
        known = set(self.state.sent_whole)
        for msg in req.messages:
            if msg.role != "assistant":
                continue
            for p in msg.parts:
                if not isinstance(p, ToolCallPart) or p.id in self.state.args or p.id in known:
                    continue
                if p.id not in results:
                    self.state.sent_whole.append(p.id)
                    known.add(p.id)
                    continue
                leaf = largest_leaf(p.arguments)
                if leaf is None or len(leaf[1]) < self.config.argumentMinChars:
                    continue
                key = self.archive((leaf[1] + "\n").encode("utf-8", "surrogatepass"))
                stubbed = stub_arguments(p.arguments, key, shell, None)
                if stubbed is not None:
                    self.state.args[p.id] = stubbed[0]
                    done += 1
        return done

    def maybe_evict(self, call_index: int, original: Request, reduced: Request, shell: bool = False) -> bool:
        """Run a batch if one is due and pays; returns True when the prefix changed.

        ``reduced`` is the request as reduction left it (before past evictions); ``shell`` says the
        host has no recover tool, so stubs name the command line instead."""
        self.last_evicted_tokens = 0
        goals = goal_tasks(original.messages) if self.config.finishedTasks else []
        while len(self.state.goal_calls) < len(goals):
            self.state.goal_calls.append(call_index)
        if call_index - self.state.last_batch_call < self.config.batchTurns:
            return False
        self.state.last_batch_call = call_index
        view, ids, owners = _view(original)
        self.estimator.sync(view)
        updates = self.proposer.estimate(view, self.tasks)
        self.tasks.apply(updates, max_turn=len(view) - 1)
        ready = self._finished_goals(goals, original.messages)
        sent = self._stub_parts(reduced)
        sizes = self._sizes_of(sent)
        items = self._items(view, ids, owners, original, sent, sizes, goals, ready, call_index, shell)
        if not items:
            return False
        head = next((i for i, m in enumerate(sent.messages) if m.role != "system"), len(sent.messages))
        plan = self._plan(items, sizes, head)
        if plan is None:
            return False
        self._evict(plan, view, ids, owners, original, sent, goals, call_index, shell)
        return True

    def _finished_goals(self, goals: list[GoalTask], messages: list[Message]) -> dict[int, GoalTask]:
        """Close finished goals in the goal registry; the ones that may leave now (``evictable``).

        A goal closes in the first batch after the next goal came: ``completed`` and then, applied
        as a second step, ``evictable`` (the registry never takes ``active -> evictable`` in one
        step). Why both at once: unlike an estimator's guess, a new user goal is conclusive evidence,
        and waiting one more batch re-sent the whole finished task on 3-5 more calls (measured on
        the continuous benchmark: ~40% of what chaining tasks cost over running each alone)."""
        done = {c.number for c in self.state.collapses}
        closing = [(t, nxt) for t, nxt in itertools.pairwise(goals) if not t.empty and t.number not in done]
        completed: list[TaskUpdate] = []
        for t, nxt in closing:
            current = self.goals.get(f"g{t.number}")
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
            self.goals.apply(completed, max_turn=len(messages) - 1)
        evictable: list[TaskUpdate] = []
        for t, nxt in closing:
            current = self.goals.get(f"g{t.number}")
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
            self.goals.apply(evictable, max_turn=len(messages) - 1)
        return {
            t.number: t
            for t in goals
            if t.number not in done
            and (chunk := self.goals.get(f"g{t.number}")) is not None
            and chunk.lifecycle == "evictable"
            and chunk.turns == (t.goal, max(t.goal, t.last))
        }

    def _size_of(self, msg: Message) -> int:
        """Tokens of one message's texts, tool outputs and call arguments."""
        n = 0
        for p in msg.parts:
            if isinstance(p, ToolResultPart):
                n += self.counter.count(p.text())
            elif isinstance(p, TextPart):
                n += self.counter.count(p.text)
            elif isinstance(p, ToolCallPart):
                n += self.counter.count(p.arguments)
        return n

    def _sizes_of(self, req: Request) -> list[int]:
        """Tokens of each message as it is sent now (before collapses), memoised per message object."""
        sizes = self._sizes.map(req.messages)
        for c in self.state.collapses:  # what a collapsed task weighs now
            if c.last < len(sizes):
                sizes[c.first] = self.counter.count(c.text)
                for i in range(c.first + 1, c.last + 1):
                    sizes[i] = 0
                if 0 <= c.goal < len(sizes):
                    sizes[c.goal] = self.counter.count(c.goal_text)
        return sizes

    def _horizons(self, goals: list[GoalTask], call_index: int) -> tuple[float, float]:
        """Expected remaining calls: within the current task, and for the rest of the session
        (``remaining_hint``, when set, answers instead: the benchmark's oracle knows them)."""
        if self.remaining_hint is not None:
            return self.remaining_hint(call_index)
        calls = self.state.goal_calls
        lengths = [b - a for a, b in itertools.pairwise(calls) if b > a]
        in_task = call_index - calls[-1] if calls else call_index
        prior = self.config.expectedRemainingCalls
        return remaining_in_task(in_task, lengths, prior), remaining_in_session(in_task, lengths, prior)

    def _items(
        self,
        view: list[Message],
        ids: list[str | None],
        owners: list[int],
        original: Request,
        sent: Request,
        sizes: list[int],
        goals: list[GoalTask],
        ready: Mapping[int, GoalTask],
        call_index: int,
        shell: bool,
    ) -> list[_Item]:
        """Everything that may leave in this batch, with its saving (counted on ``sent``, what the
        model reads now) and horizon."""
        in_task, in_session = self._horizons(goals, call_index)
        items: list[_Item] = []
        created = frozenset(self.estimator.live.created)
        refs = _references(sent, original)
        for t in ready.values():
            if self._referred_into(sent, refs, t):
                continue
            span = original.messages[t.first : t.last + 1]
            events = self._events_in(t, owners)
            text = summary(t.number, "0" * 32, span, events, created, shell)
            saving = sum(sizes[t.first : t.last + 1]) - self.counter.count(text)
            short = request_stub(t, original.messages, "0" * 32, shell, self.config.goalKeepChars)
            if short is not None:  # the request leaves too: the prefix breaks at it, not after it
                saving += sizes[t.goal] - self.counter.count(short)
            if saving >= MIN_SAVING_TOKENS:
                items.append(_Item(t.goal if short else t.first, f"task:{t.number}", saving, in_session))
        # outputs and arguments of the task still running (finished tasks leave whole)
        floor = max((t.last for t in goals[:-1] if not t.empty), default=-1)
        horizon = len(view) - self.config.keepRecentTurns * MESSAGES_PER_CALL
        index = {cid: i for i, cid in enumerate(ids) if cid is not None}
        outputs: dict[str, _Item] = {}
        for cid, why in self._candidates(view, ids).items():
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
                outputs[cid] = _Item(owner, cid, n - STUB_TOKENS, horizon_calls, why)
        for cid in self._stood_on(refs, original, outputs):
            del outputs[cid]
        items.extend(outputs.values())
        for e in self._stale_arguments(horizon):
            ran = ids[e.result_index] if e.result_index is not None else None
            if ran is None or ran in self.state.args or owners[e.call_index] <= floor:
                continue
            call = tool_call(original.messages[owners[e.call_index]], ran)
            if call is None:
                continue
            stubbed = stub_arguments(call.arguments, "0" * 32, shell)
            if stubbed is None:
                continue
            saving = self.counter.count(call.arguments) - self.counter.count(stubbed[0])
            if saving >= MIN_SAVING_TOKENS:
                items.append(_Item(owners[e.call_index], f"args:{ran}", saving, in_task))
        return sorted(items, key=lambda it: (it.index, it.ident))

    def _stood_on(self, refs: _Refs, original: Request, leaving: Mapping[str, _Item]) -> set[str]:
        """The outputs in ``leaving`` that an output staying in view stands on: a later repeat of the
        whole output or of its lines is sent as a reference to it (:func:`..reduction.dedup.calls_named`),
        so paging it out would leave the model neither copy. Seen: a file read twice, the second read
        sent as "identical to the output of tool call X", and X paged out as stale for the re-read.
        A reference that names no call (:func:`..reduction.dedup.names_no_call`) holds, by content,
        every leaving output that has one of the substantial lines it stands for (the lines of its
        original that its sent text lacks: a frame that stays, such as ``<returncode>0</returncode>``,
        holds nothing)."""
        if not refs.named and not refs.unnamed:
            return set()
        as_read = {self.spell(call_base(cid)): cid for cid in leaving}
        known: dict[str, frozenset[str]] = {}

        def lines_of(cid: str) -> frozenset[str]:
            if cid not in known:
                known[cid] = _lines_of(original, leaving[cid].index, cid)
            return known[cid]

        stay: set[str] = set()
        grew = True
        while grew:  # an output kept because it is stood on keeps what it stands on in turn
            grew = False
            for rid in (*refs.named, *refs.unnamed):
                if rid in leaving and rid not in stay:
                    continue  # leaves too (it comes later, so the same break takes it)
                held = {as_read.get(name) for name in refs.named.get(rid, (0, set()))[1]}
                if refs.unnamed.get(rid):
                    lines = refs.unnamed[rid]
                    held.update(c for c in leaving if c != rid and c not in stay and lines_of(c) & lines)
                for cid in held:
                    if cid is not None and cid not in stay:
                        stay.add(cid)
                        grew = True
        return stay

    def _referred_into(self, sent: Request, refs: _Refs, t: GoalTask) -> bool:
        """Whether an output after finished task ``t`` refers to one of its outputs by name. Repeats
        are scoped to their task where tasks leave (aggressive mode), so this happens only for outputs
        reduced before the session switched to such a mode; collapsing ``t`` would then leave those
        references pointing at nothing the model can read, so ``t`` stays."""
        later = [names for at, names in refs.named.values() if at > t.last]
        if not later:
            return False
        inside = {
            self.spell(call_base(p.tool_call_id))
            for m in sent.messages[t.first : t.last + 1]
            for p in m.parts
            if isinstance(p, ToolResultPart)
        }
        return any(names & inside for names in later)

    def _events_in(self, t: GoalTask, owners: list[int]) -> list[ToolEvent]:
        return [e for e in self.estimator.log.events if t.first <= owners[e.call_index] <= t.last]

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

    def _candidates(self, view: list[Message], ids: list[str | None]) -> dict[str, str]:
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
        acted_on = self._acted_on(ids)
        return {
            cid: why for cid, why in reasons.items() if cid not in self.state.stubs and cid not in acted_on
        }

    def _acted_on(self, ids: list[str | None]) -> set[str]:
        """Outputs whose error lines the agent acts on: the newest output of each command, when it
        has error lines (DESIGN 4: never cut; a stub would hide every one of them)."""
        log = self.estimator.log
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

    def _plan(self, items: list[_Item], sizes: list[int], head: int) -> list[_Item] | None:
        """The items to page out now: every one from the break position that pays best, or None.

        Paging out ``X`` tokens saves ``0.1 * X`` on each of the ``horizon`` calls that re-read it,
        and re-sends once what the break invalidates (DESIGN 1), at :attr:`break_cost`'s price (from
        the break on a prefix cache; on Anthropic's, every message after the ``head`` system
        messages); ``minSavingRatio`` keeps a margin for a session that ends sooner than expected."""
        price = self.break_cost
        record_tokens = {"critical": 100, "standard": 300, "full": 600}[self.config.recordLevel]
        best: tuple[float, int] | None = None
        saved_after = 0
        gain_after = 0.0
        parts_after = False  # a batch with outputs or arguments carries the session record
        for j in range(len(items) - 1, -1, -1):
            it = items[j]
            saved_after += it.saving
            gain_after += 0.1 * it.saving * it.horizon
            parts_after = parts_after or not it.ident.startswith("task:")
            record = record_tokens if parts_after else 0
            after = price.tokens(sizes, head, it.index) - saved_after + record
            gain = gain_after - 0.1 * record * it.horizon
            cost = price.per_token * after * self.config.minSavingRatio
            if gain > cost and (best is None or gain - cost > best[0]):
                best = (gain - cost, j)
        if best is None:
            return None
        return items[best[1] :]

    def _evict(
        self,
        chosen: list[_Item],
        view: list[Message],
        ids: list[str | None],
        owners: list[int],
        original: Request,
        sent: Request,
        goals: list[GoalTask],
        call_index: int,
        shell: bool,
    ) -> None:
        """Archive what was chosen and write its stubs: finished tasks one archive each, outputs and
        arguments together in one (whose first stub carries the session record)."""
        by_number = {t.number: t for t in goals}
        created = frozenset(self.estimator.live.created)
        saved = 0
        keys: list[str] = []
        for it in chosen:
            if not it.ident.startswith("task:"):
                continue
            t = by_number[int(it.ident[5:])]
            span = original.messages[t.first : t.last + 1]
            leaves = (
                request_stub(t, original.messages, "0" * 32, shell, self.config.goalKeepChars) is not None
            )
            request = request_text(original.messages[t.goal]) if leaves else None
            doc = archive_document(t.number, t.first, t.last, span, request, self.spell)
            key = self.archive(doc.encode("utf-8", "surrogatepass"))
            text = summary(t.number, key, span, self._events_in(t, owners), created, shell)
            collapse = Collapse(
                t.number, t.first, t.last, fingerprint(span), text, key, call_index, it.saving
            )
            short = (
                request_stub(t, original.messages, key, shell, self.config.goalKeepChars) if leaves else None
            )
            if short is not None:
                goal = original.messages[t.goal]
                collapse = replace(
                    collapse, goal=t.goal, goal_fingerprint=fingerprint([goal]), goal_text=short
                )
            self.state.collapses.append(collapse)
            saved += it.saving
            keys.append(key)
        parts = [it for it in chosen if not it.ident.startswith("task:")]
        if parts:
            part_saved, part_key = self._evict_parts(parts, view, ids, original, sent, shell)
            saved += part_saved
            keys.insert(0, part_key)
        self.state.batches.append(Batch(call_index, keys[0], [it.ident for it in chosen], saved))
        self.last_evicted_tokens = saved

    def _evict_parts(
        self,
        chosen: list[_Item],
        view: list[Message],
        ids: list[str | None],
        original: Request,
        sent: Request,
        shell: bool,
    ) -> tuple[int, str]:
        """Archive the chosen outputs and arguments together and write their stubs; (tokens saved,
        the archive's key)."""
        index = {cid: i for i, cid in enumerate(ids) if cid is not None}
        lines: list[str] = []
        ranges: dict[str, tuple[int, int]] = {}
        for it in chosen:
            if it.ident.startswith("args:"):
                cid = it.ident[5:]
                call = tool_call(original.messages[it.index], cid)
                value = largest_leaf(call.arguments) if call is not None else None
                lines.append(f"=== lightmem2: arguments of tool call {self.spell(cid)} ===")
                text = value[1] if value is not None else ""
            else:
                cid = it.ident
                lines.append(f"=== lightmem2: output of tool call {self.spell(cid)} ===")
                text = turn_text(view[index[cid]])
            start = len(lines) + 1
            lines.extend(text.split("\n"))
            ranges[it.ident] = (start, len(lines))
        doc = "\n".join(lines) + "\n"
        # the registry numbers lines with str.splitlines, which also breaks at \r and the like: where
        # those occur, ranges counted by "\n" would point at other lines, so the stubs name none
        numbered = doc.splitlines() == lines
        key = self.archive(doc.encode("utf-8", "surrogatepass"))
        record = render(extract(view, self.tasks, source=self.estimator), self.config.recordLevel)
        saved = 0
        first_output = True
        for it in chosen:
            a, b = ranges[it.ident]
            if it.ident.startswith("args:"):
                cid = it.ident[5:]
                call = tool_call(original.messages[it.index], cid)
                stubbed = (
                    stub_arguments(call.arguments, key, shell, (a, b) if numbered else None)
                    if call is not None
                    else None
                )
                if call is None or stubbed is None:
                    continue
                self.state.args[cid] = stubbed[0]
                saved += self.counter.count(call.arguments) - self.counter.count(stubbed[0])
                continue
            cid = it.ident
            stub = output_stub(key, it.why, (a, b) if numbered else None, shell)
            if first_output and record:
                stub += f"\n[lightmem2 session record]\n{record}"
                first_output = False
            self.state.stubs[cid] = stub
            now = tool_result(sent.messages[it.index], cid)
            saved += self.counter.count(now.text() if now is not None else "") - self.counter.count(stub)
        return saved, key


def _objective(text: str) -> str:
    """A goal's text as a task objective (one line, at most 400 chars, never empty)."""
    line = " ".join(text.split()) or "a goal"
    return line if len(line) <= 400 else line[:399] + "…"


@dataclass
class _Refs:
    """The references the tool outputs of a request make to earlier outputs, as sent: by result id,
    (its message, the calls it names), and the lines its references that name no call stand for."""

    named: dict[str, tuple[int, set[str]]]
    unnamed: dict[str, frozenset[str]]


def _references(sent: Request, original: Request) -> _Refs:
    """One scan of ``sent`` for the repeat references and markers (:mod:`..reduction.dedup`)."""
    refs = _Refs({}, {})
    for i, msg in enumerate(sent.messages):
        for p in msg.parts:
            if not isinstance(p, ToolResultPart):
                continue
            text = p.text()
            if calls := calls_named(text):
                refs.named[p.tool_call_id] = (i, calls)
            if names_no_call(text):
                refs.unnamed[p.tool_call_id] = _lines_of(original, i, p.tool_call_id) - set(text.split("\n"))
    return refs


def _lines_of(req: Request, index: int, cid: str) -> frozenset[str]:
    """The substantial lines (as a repeat marker counts them) of the host's output of ``cid``."""
    part = tool_result(req.messages[index], cid) if index < len(req.messages) else None
    if part is None:
        return frozenset()
    return frozenset(line for line in part.text().split("\n") if len(line.strip()) >= MIN_LINE_CHARS)
