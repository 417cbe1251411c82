"""Cost-aware eviction: page out the tool outputs of finished work, in batches, only when it pays.

Why a cost rule: in append-only sessions the provider cache already hits ~97%, so every change in the
middle of the history re-misses everything after it once. Paging out ``X`` tokens that sit before
``T`` tokens saves about ``0.1 * X`` per remaining call and costs about ``0.9 * T`` once (DESIGN 1). A
batch runs at most every ``eviction.batchTurns`` calls; it picks the earliest break position whose
saving over the expected remaining calls beats its one-time re-miss, and evicts every candidate from
there on, so one break pays for as much as possible.

What is evicted: tool outputs that the estimator shows are no longer needed (in a task chunk that
became ``evictable``, or made stale by later work: a file read later rewritten or re-read, a command
re-run, exploration consumed). The structure of the conversation stays valid for every API: each
output is replaced in place by a one-line stub naming the batch's artifact and its line range. The
batch's outputs are archived together (byte-exact, recoverable), and the first stub of a batch carries
the session record, so the record changes only at eviction batches and stays cached in between.
Evictions already made are re-applied identically on every later call (DESIGN I2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import EstimatorConfig, EvictionConfig
from ..model import Message, Request, TextPart, ToolCallPart, ToolResultPart
from ..tokens import TokenCounter
from .heuristic import HeuristicEstimator
from .lifecycle import TaskRegistry
from .llm_estimator import LLMEstimator
from .record_render import render
from .session_record import extract

STUB_TOKENS = 40
MIN_SAVING_TOKENS = 60
MESSAGES_PER_CALL = 2


def chat_view(req: Request) -> tuple[list[dict[str, Any]], list[str | None]]:
    """The request as simple chat-form dicts for the estimator, and the tool call id of each entry."""
    view: list[dict[str, Any]] = []
    ids: list[str | None] = []
    for msg in req.messages:
        calls = [p for p in msg.parts if isinstance(p, ToolCallPart)]
        results = [p for p in msg.parts if isinstance(p, ToolResultPart)]
        text = msg.text()
        if msg.role != "tool" and (text or calls or not results):
            entry: dict[str, Any] = {
                "role": msg.role if msg.role != "developer" else "system",
                "content": text,
            }
            if calls:
                entry["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in calls
                ]
            view.append(entry)
            ids.append(None)
        for r in results:
            view.append({"role": "tool", "tool_call_id": r.tool_call_id, "content": r.text()})
            ids.append(r.tool_call_id)
    return view, ids


@dataclass
class Batch:
    """One eviction batch: when, what, and the artifact that holds it."""

    call_index: int
    key: str
    call_ids: list[str]
    tokens_saved: int


@dataclass
class EvictionState:
    """Everything needed to re-apply past evictions byte for byte."""

    stubs: dict[str, str] = field(default_factory=dict)
    batches: list[Batch] = field(default_factory=list)
    last_batch_call: int = 0


class Evictor:
    """Per-session eviction: an estimator, its task registry, and the evictions made so far."""

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
        # the LLM estimator (opt-in) proposes task updates; the heuristic still tracks staleness and is
        # its fallback on any failure
        self.proposer: HeuristicEstimator | LLMEstimator = (
            LLMEstimator(estimator, fallback=self.estimator)
            if estimator is not None and estimator.kind == "llm"
            else self.estimator
        )
        self.tasks = TaskRegistry()
        self.state = EvictionState()
        self._applied: dict[int, tuple[Message, Message]] = {}
        self.last_evicted_tokens = 0

    # -- applying --------------------------------------------------------------------------------
    def apply(self, req: Request) -> Request:
        """``req`` with every evicted tool output replaced by its stub (no change when none applies)."""
        if not self.state.stubs:
            return req
        out: list[Message] = []
        changed = False
        done: dict[int, tuple[Message, Message]] = {}
        for msg in req.messages:
            hit = self._applied.get(id(msg))
            if hit is not None and hit[0] is msg:
                new = hit[1]  # the same stubbed object as last call: later caches see no change
            elif any(isinstance(p, ToolResultPart) and p.tool_call_id in self.state.stubs for p in msg.parts):
                parts = [self._stubbed(p) if isinstance(p, ToolResultPart) else p for p in msg.parts]
                new = Message(msg.role, parts, dict(msg.extra), dict(msg.hints))
            else:
                new = msg
            if new is not msg:
                done[id(msg)] = (msg, new)
                changed = True
            out.append(new)
        self._applied = done
        return Request(out, req.tools, req.extra, req.hints) if changed else req

    def _stubbed(self, part: ToolResultPart) -> ToolResultPart:
        stub = self.state.stubs.get(part.tool_call_id)
        if stub is None:
            return part
        return ToolResultPart(part.tool_call_id, [TextPart(stub)], part.is_error, dict(part.extra))

    # -- deciding ----------------------------------------------------------------------------------
    def maybe_evict(self, call_index: int, original: Request, sent: Request) -> bool:
        """Run a batch if one is due and pays; returns True when the prefix changed."""
        self.last_evicted_tokens = 0
        if call_index - self.state.last_batch_call < self.config.batchTurns:
            return False
        self.state.last_batch_call = call_index
        view, ids = chat_view(original)
        self.estimator.sync(view)
        updates = self.proposer.estimate(view, self.tasks)
        self.tasks.apply(updates, max_turn=len(view) - 1)
        candidates = self._candidates(view, ids)
        if not candidates:
            return False
        plan = self._plan(candidates, sent, call_index)
        if plan is None:
            return False
        self._evict(plan, view, ids, call_index)
        return True

    def _candidates(self, view: list[dict[str, Any]], ids: list[str | None]) -> dict[str, str]:
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
        return {cid: why for cid, why in reasons.items() if cid not in self.state.stubs}

    def _plan(self, candidates: Mapping[str, str], sent: Request, call_index: int) -> list[str] | None:
        """The candidates to evict now: from the break position that pays best, or None."""
        positions: list[tuple[int, str, int]] = []  # (message index, call id, tokens saved)
        sizes: list[int] = []
        for i, msg in enumerate(sent.messages):
            size = 0
            for p in msg.parts:
                if isinstance(p, ToolResultPart):
                    n = self.counter.count(p.text())
                    size += n
                    if p.tool_call_id in candidates and n - STUB_TOKENS >= MIN_SAVING_TOKENS:
                        positions.append((i, p.tool_call_id, n - STUB_TOKENS))
                elif isinstance(p, TextPart):
                    size += self.counter.count(p.text)
                elif isinstance(p, ToolCallPart):
                    size += self.counter.count(p.arguments)
            sizes.append(size)
        if not positions:
            return None
        remaining = self.config.expectedRemainingCalls
        record_tokens = {"critical": 100, "standard": 300, "full": 600}[self.config.recordLevel]
        best: tuple[float, int] | None = None
        saved_after = 0
        for j in range(len(positions) - 1, -1, -1):
            saved_after += positions[j][2]
            start = positions[j][0]
            after = sum(sizes[start:]) - saved_after + record_tokens
            gain = 0.1 * (saved_after - record_tokens) * remaining
            cost = 0.9 * after * self.config.minSavingRatio
            if gain > cost and (best is None or gain - cost > best[0]):
                best = (gain - cost, j)
        if best is None:
            return None
        return [cid for _, cid, _ in positions[best[1] :]]

    def _evict(
        self, chosen: list[str], view: list[dict[str, Any]], ids: list[str | None], call_index: int
    ) -> None:
        """Archive the chosen outputs together and write their stubs (the first carries the record)."""
        index = {cid: i for i, cid in enumerate(ids) if cid is not None}
        lines: list[str] = []
        ranges: dict[str, tuple[int, int]] = {}
        for cid in chosen:
            text = str(view[index[cid]].get("content") or "")
            lines.append(f"=== lightmem2: output of tool call {cid} ===")
            start = len(lines) + 1
            lines.extend(text.split("\n"))
            ranges[cid] = (start, len(lines))
        key = self.archive(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
        record = render(extract(view, self.tasks, source=self.estimator), self.config.recordLevel)
        saved = 0
        for n, cid in enumerate(chosen):
            a, b = ranges[cid]
            stub = (
                f"[lightmem2: output of finished work archived as {key}; "
                f'recover with lightmem2_recover(key, lines="{a}:{b}")]'
            )
            if n == 0 and record:
                stub += f"\n[lightmem2 session record]\n{record}"
            self.state.stubs[cid] = stub
            saved += self.counter.count(str(view[index[cid]].get("content") or "")) - self.counter.count(stub)
        self.state.batches.append(Batch(call_index, key, list(chosen), saved))
        self.last_evicted_tokens = saved
