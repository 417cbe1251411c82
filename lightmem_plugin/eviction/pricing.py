"""Whether a page-out pays for its cache break: the cost rule, the tokens it weighs, the calls it counts.

Why one place for the price: paging out ``X`` tokens saves ``0.1 * X`` on each call that re-reads
them, and re-sends once what the break invalidates (DESIGN 1); a batch that ignores either side
loses money. The three inputs live here beside the rule that weighs them: the tokens of each message
as the model reads it now (:class:`SentSizes`), the calls a saving lasts (:func:`horizons`, from the
session's own tasks, :mod:`.horizon`) and the price per invalidated token on the provider's cache
(:mod:`.break_cost`). :func:`plan` picks the break that pays best and takes everything after it, so
one break pays for as much as possible.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from ..codecs.memo import PerObject
from ..config import EvictionConfig
from ..model import Message, Request, TextPart, ToolCallPart, ToolResultPart
from ..tokens import TokenCounter
from .break_cost import BreakCost
from .choosing import Candidate
from .collapse import Collapse
from .horizon import remaining_in_session, remaining_in_task

RECORD_TOKENS = {"critical": 100, "standard": 300, "full": 600}
"""What the session record a batch of outputs or arguments carries weighs, by ``eviction.recordLevel``."""


class SentSizes:
    """Tokens of each message as it is sent now, memoised per message object (the same messages come
    back call after call, and a batch weighs them all)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._sizes: PerObject[Message, int] = PerObject(self._size_of)

    def of(self, req: Request, collapses: list[Collapse]) -> list[int]:
        """Tokens of each message of ``req`` (before collapses), each collapsed task weighed as the
        one message that replaces it."""
        sizes = self._sizes.map(req.messages)
        for c in collapses:  # what a collapsed task weighs now
            if c.last < len(sizes):
                sizes[c.first] = self.counter.count(c.text)
                for i in range(c.first + 1, c.last + 1):
                    sizes[i] = 0
                if 0 <= c.goal < len(sizes):
                    sizes[c.goal] = self.counter.count(c.goal_text)
        return sizes

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


def horizons(
    goal_calls: list[int],
    call_index: int,
    prior: int,
    hint: Callable[[int], tuple[float, float]] | None,
) -> tuple[float, float]:
    """Expected remaining calls: within the current task, and for the rest of the session, from the
    calls at which each goal was first seen and ``prior`` (``eviction.expectedRemainingCalls``);
    ``hint``, when set, answers instead (the benchmark's oracle knows them)."""
    if hint is not None:
        return hint(call_index)
    calls = goal_calls
    lengths = [b - a for a, b in itertools.pairwise(calls) if b > a]
    in_task = call_index - calls[-1] if calls else call_index
    return remaining_in_task(in_task, lengths, prior), remaining_in_session(in_task, lengths, prior)


def head_end(req: Request) -> int:
    """Where the request's head (its leading system messages) ends."""
    return next((i for i, m in enumerate(req.messages) if m.role != "system"), len(req.messages))


def plan(
    items: list[Candidate], sizes: list[int], head: int, price: BreakCost, config: EvictionConfig
) -> list[Candidate] | None:
    """The items to page out now: every one from the break position that pays best, or None.

    Paging out ``X`` tokens saves ``0.1 * X`` on each of the ``horizon`` calls that re-read it,
    and re-sends once what the break invalidates (DESIGN 1), at ``price`` (from the break on a
    prefix cache; on Anthropic's, every message after the ``head`` system messages);
    ``minSavingRatio`` keeps a margin for a session that ends sooner than expected."""
    record_tokens = RECORD_TOKENS[config.recordLevel]
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
        cost = price.per_token * after * config.minSavingRatio
        if gain > cost and (best is None or gain - cost > best[0]):
            best = (gain - cost, j)
    if best is None:
        return None
    return items[best[1] :]
