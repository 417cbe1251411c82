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
  becomes ``completed`` and then ``evictable`` in the first batch after that goal came (two steps,
  never ``active -> evictable`` in one); then its whole work, tool outputs and assistant turns, is
  archived as one document and replaced by one assistant message that says what it did and how it
  ended (:mod:`.collapse`). This is where nearly all of the saving is: the break sits right after the
  task, so little follows it.
- **Outputs inside the running task** the estimator shows are no longer needed (in a chunk that
  became ``evictable``, or stale: a file read later rewritten or re-read, a command re-run), except
  the newest output of a command while it has error lines. Each is replaced in place by a one-line
  stub naming the batch's archive and its line range; the first stub carries the session record.
- **Long arguments of executed calls** inside the running task (an inline script that ran, a file
  write a later whole write replaced): the longest value keeps its first line and a stub.
  With ``eviction.argumentsOnArrival`` they go as they first come back instead (:meth:`on_arrival`).

Everything removed is archived (recoverable with the key in its stub), and everything decided is
re-applied identically on every later call (DESIGN I2) and persisted with the session state.

Past these, **compaction before the host's** (:mod:`.compacting`): when the context nears the host's
own compaction threshold, the batch pages out every output and long argument but the newest history,
whatever the cost rule says, so the host never summarises (and loses) the session.

The :class:`Evictor` runs a batch through one module per job, each reading and writing the one
record of decisions (:mod:`.state`): :mod:`.choosing` (what may go, with what it saves and for how
long; :mod:`.references` keeps what a staying output refers to), :mod:`.pricing` (whether the break
pays, and which), :mod:`.paging` (archive it, record the stubs; their text is :mod:`.stubs`) and
:mod:`.applying` (re-apply every decision to each request).
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import EstimatorConfig, EvictionConfig
from ..model import Message, Request
from ..tokens import TokenCounter
from . import compacting, deferred, pricing
from .applying import Applier
from .break_cost import PREFIX, BreakCost
from .choosing import Chooser, acted_on, finished_goals
from .deferred import Reducer
from .entries import entries
from .goals import GoalTask, goal_tasks
from .heuristic import HeuristicEstimator
from .lifecycle import TaskRegistry
from .llm_estimator import LLMEstimator
from .paging import Pager
from .pricing import SentSizes
from .state import Compaction, EvictionState


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
        self._applier = Applier()
        self._sizes = SentSizes(counter)
        self.last_evicted_tokens = 0
        self.spell: Callable[[str], str] = str  # as the host sent it
        """How the model reads a host call id in this request (short call ids: :mod:`~.prefix.call_ids`); the
        archived text of a batch or a task names each call so, as the context around its stub did."""
        self.remaining_hint: Callable[[int], tuple[float, float]] | None = None
        self.break_cost: BreakCost = PREFIX
        """The price of a break on the provider's cache (:mod:`.break_cost`), set per request."""
        self.host: str | None = None
        """The host the session serves (``claude-code``, ``openclaw``; None: unknown), for its
        compaction threshold (:func:`.compacting.threshold`)."""
        self.host_budget: int | None = None
        """The tokens the host told it allows before it compacts, for the request at hand (OpenClaw's
        ``tokenBudget``, from the model's window; None: not told), over the host's table."""
        self.gauge = compacting.Gauge()
        self.upcoming: Message | None = None
        """The user's message the host will send after this call's history, when it says so before
        the call (OpenClaw's ``prompt``: ``assemble()`` is handed the history without the turn's own
        prompt). A new goal there closes the running task at this very call: at a cold start after a
        pause, the call whose break is free (:meth:`_goals`)."""

    def _goals(self, original: Request) -> list[GoalTask]:
        """The goals of ``original``, and of :attr:`upcoming` after it (its goal has no work yet)."""
        if self.upcoming is None:
            return goal_tasks(original.messages)
        return goal_tasks([*original.messages, self.upcoming])

    @property
    def collapsed(self) -> list[tuple[int, int]]:
        """(first, last) message ranges of the last applied request that became one message each."""
        return self._applier.collapsed

    def apply(self, req: Request) -> Request:
        """``req`` with every eviction made so far applied (no change when none applies); the ranges
        of ``req.messages`` that were replaced by one summary message each are in :attr:`collapsed`."""
        return self._applier.apply(self.state, req)

    def describe_last(self) -> str:
        """What the last batch paged out, in words (:meth:`.state.EvictionState.describe_last`)."""
        return self.state.describe_last()

    def _pager(self) -> Pager:
        return Pager(
            self.config, self.archive, self.counter, self.estimator, self.tasks, self.state, self.spell
        )

    def on_arrival(self, req: Request, shell: bool = False) -> int:
        """Archive the long arguments of calls that just ran, as they first come back as input.

        Why on arrival: a call's arguments are new input in the request that carries its result
        (the model wrote them; no cache holds them yet), so replacing them there costs no cache break,
        unlike any later change. Kept: the first line (``cat > fix.py << 'EOF'``, the script's
        interpreter) and a stub with the key. A call first seen without its result keeps its
        arguments for good (changing them later would break the prefix). Returns how many archived."""
        return self._pager().on_arrival(req, shell)

    def usage(self, provider_input: int) -> None:
        """The provider counted ``provider_input`` input tokens for the last call (its usage)."""
        self.gauge.usage(provider_input)

    def maybe_evict(self, call_index: int, original: Request, reduced: Request, shell: bool = False) -> bool:
        """Run a batch if one is due and pays (or the context nears the host's compaction threshold);
        returns True when the prefix changed.

        ``reduced`` is the request as reduction left it (before past evictions); ``shell`` says the
        host has no recover tool, so stubs name the command line instead."""
        self.last_evicted_tokens = 0
        self.gauge.sent = 0
        due = call_index - self.state.last_batch_call >= self.config.batchTurns or self.break_cost.cold
        before = self._before_change(reduced) if due else None
        evicted = self._maybe_evict(call_index, original, reduced, shell)
        if evicted and before is not None:
            self._note_change(before, reduced)
        if self.config.compactBeforeHost and not self.gauge.sent:  # what this call sends, counted
            sent = self._applier.stub_parts(self.state, reduced)
            self.gauge.sent = sum(self._sizes.of(sent, self.state.collapses))
        return evicted

    def reduce_at_cold(self, call_index: int, original: Request, reduced: Request, again: Reducer) -> bool:
        """At a call whose cache is cold, reduce again (``again``) the outputs kept whole that are no
        longer needed (:mod:`.deferred`); returns True when the prefix changed. What it saved adds to
        :attr:`last_evicted_tokens` (a batch may have run at the same call)."""
        turns = entries(original)
        view, ids, owners = turns.turns, turns.ids, turns.owners
        self.estimator.sync(view)  # what went stale (its liveness); the task registry is not needed
        goals = self._goals(original)
        chosen = deferred.due(
            view, ids, owners, goals, self.estimator, self.state, self.config.keepRecentTurns
        )
        if not chosen:
            return False
        before = self._before_change(reduced)
        done = deferred.reduce_again(chosen, ids, owners, before[0], again, self.counter)
        if not done:
            return False
        self.last_evicted_tokens += deferred.record(self.state, call_index, done)
        self._note_change(before, reduced)
        return True

    def _before_change(self, reduced: Request) -> tuple[Request, int]:
        """What ``reduced`` looks like with the decisions so far (without collapses), and how many
        tasks had collapsed: compared after a batch by :meth:`_note_change`."""
        return self._applier.stub_parts(self.state, reduced), len(self.state.collapses)

    def _note_change(self, before: tuple[Request, int], reduced: Request) -> None:
        """Record where the change of the past just made starts (:attr:`.state.EvictionState.past_changes`):
        the first message that now reads differently, or the first message of a task that left."""
        sent, collapses = before
        after = self._applier.stub_parts(self.state, reduced)
        pairs = zip(sent.messages, after.messages, strict=False)
        first = next((i for i, (a, b) in enumerate(pairs) if a is not b and a != b), None)
        for c in self.state.collapses[collapses:]:
            start = c.goal if c.goal >= 0 else c.first
            first = start if first is None else min(first, start)
        if first is not None:
            self.state.past_changes.append((first, len(reduced.messages)))

    def _maybe_evict(self, call_index: int, original: Request, reduced: Request, shell: bool) -> bool:
        goals = self._goals(original) if self.config.finishedTasks else []
        while len(self.state.goal_calls) < len(goals):
            self.state.goal_calls.append(call_index)
        due = call_index - self.state.last_batch_call >= self.config.batchTurns
        if not (due or self.break_cost.cold):  # a cold call is a batch: its break is free
            return False
        self.state.last_batch_call = call_index
        if self.gauge.measured is not None:  # the batch decides with the latest measure, kept in the state
            self.state.measured = self.gauge.measured
        turns = entries(original)
        view, ids, owners = turns.turns, turns.ids, turns.owners
        self.estimator.sync(view)
        updates = self.proposer.estimate(view, self.tasks)
        self.tasks.apply(updates, max_turn=len(view) - 1)
        # choosing: what may go, and what each would save
        ready = finished_goals(self.goals, self.state.collapses, goals, original.messages)
        sent = self._applier.stub_parts(self.state, reduced)
        sizes = self._sizes.of(sent, self.state.collapses)
        if self.config.compactBeforeHost and self._compact(
            call_index, view, ids, owners, original, sent, sizes, shell
        ):
            return True
        hint, prior = self.remaining_hint, self.config.expectedRemainingCalls
        horizons = pricing.horizons(self.state.goal_calls, call_index, prior, hint)
        chooser = Chooser(self.config, self.estimator, self.tasks, self.state, self.counter, self.spell)
        items = chooser.candidates(view, ids, owners, original, sent, sizes, goals, ready, horizons, shell)
        if not items:
            return False
        # pricing: the break that pays best, if any
        plan = pricing.plan(items, sizes, pricing.head_end(sent), self.break_cost, self.config)
        if plan is None:
            return False
        # paging out: archive it and record what replaces it (apply() re-applies it on every call)
        pager = self._pager()
        self.last_evicted_tokens = pager.page_out(
            plan, view, ids, owners, original, sent, goals, call_index, shell
        )
        return True

    def _compact(
        self,
        call_index: int,
        view: list[Message],
        ids: list[str | None],
        owners: list[int],
        original: Request,
        sent: Request,
        sizes: list[int],
        shell: bool,
    ) -> bool:
        """Page out all but the newest history when the context is within the margin of the host's
        compaction threshold (:mod:`.compacting`); True when it did."""
        measured, total = self.state.measured, sum(sizes)
        alone = compacting.messages_only(self.config, self.host_budget)  # OpenClaw's budget: no head
        before = compacting.estimate(total, measured, alone)
        limit = compacting.threshold(self.config, self.host, self.host_budget)
        if before <= limit - compacting.margin(self.config, limit):
            return False
        head = pricing.head_end(sent)
        newest = max((owners[t] for t, cid in enumerate(ids) if cid is not None), default=None)
        keep_tokens, most = compacting.keep(self.config, limit), compacting.keep_cap(limit)
        end = compacting.kept_from(sizes, head, keep_tokens, newest, most)
        paged = (self.state.stubs, self.state.args, self.state.collapses)
        keep = acted_on(self.estimator, ids)  # error lines the agent acts on stay, even here
        items = compacting.candidates(
            ids, owners, original, sent, head, end, paged, self.counter, shell, keep
        )
        if not items or sum(it.saving for it in items) < compacting.MIN_SAVING_SHARE * total:
            return False
        # the record stands in for ~100k tokens of history: it gets the full level's budget (600 tokens)
        pager = self._pager()
        saved = pager.page_out(items, view, ids, owners, original, sent, [], call_index, shell, "full")
        if self.config.compactThinking:  # the answers it left behind go without their thinking
            self.state.thinking_before = max(self.state.thinking_before, end)
        self.last_evicted_tokens = saved
        self.gauge.sent = total - saved
        args = sum(it.ident.startswith("args:") for it in items)
        self.state.compactions.append(
            Compaction(
                call_index,
                before,
                compacting.estimate(total - saved, measured, alone),
                end,
                sum(sizes[end:]),
                len(items) - args,
                args,
                self.state.batches[-1].key,
                limit,
            )
        )
        return True
