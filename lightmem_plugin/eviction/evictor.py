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

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..codecs.memo import PerObject
from ..config import EstimatorConfig, EvictionConfig
from ..model import Message, Request, TextPart, ToolCallPart, ToolResultPart
from ..tokens import TokenCounter
from . import pricing
from .break_cost import PREFIX, BreakCost
from .choosing import PLACEHOLDER_KEY, Candidate, Chooser, events_in, finished_goals
from .collapse import Collapse, archive_document, fingerprint, request_text, summary
from .entries import entries, tool_call, tool_result, turn_text
from .goals import GoalTask, goal_tasks
from .heuristic import HeuristicEstimator
from .lifecycle import TaskRegistry
from .llm_estimator import LLMEstimator
from .pricing import SentSizes
from .record_render import render
from .session_record import extract
from .state import Batch, EvictionState
from .stubs import largest_leaf, output_stub, request_stub, stub_arguments


def _view(req: Request) -> tuple[list[Message], list[str | None], list[int]]:
    turns = entries(req)
    return turns.turns, turns.ids, turns.owners


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
        self._sizes = SentSizes(counter)
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
        ready = finished_goals(self.goals, self.state.collapses, goals, original.messages)
        sent = self._stub_parts(reduced)
        sizes = self._sizes.of(sent, self.state.collapses)
        hint, prior = self.remaining_hint, self.config.expectedRemainingCalls
        horizons = pricing.horizons(self.state.goal_calls, call_index, prior, hint)
        chooser = Chooser(self.config, self.estimator, self.tasks, self.state, self.counter, self.spell)
        items = chooser.candidates(view, ids, owners, original, sent, sizes, goals, ready, horizons, shell)
        if not items:
            return False
        plan = pricing.plan(items, sizes, pricing.head_end(sent), self.break_cost, self.config)
        if plan is None:
            return False
        self._evict(plan, view, ids, owners, original, sent, goals, call_index, shell)
        return True

    def _evict(
        self,
        chosen: list[Candidate],
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
                request_stub(t, original.messages, PLACEHOLDER_KEY, shell, self.config.goalKeepChars)
                is not None
            )
            request = request_text(original.messages[t.goal]) if leaves else None
            doc = archive_document(t.number, t.first, t.last, span, request, self.spell)
            key = self.archive(doc.encode("utf-8", "surrogatepass"))
            text = summary(t.number, key, span, events_in(t, owners, self.estimator), created, shell)
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
        chosen: list[Candidate],
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
