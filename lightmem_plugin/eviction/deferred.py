"""Deferred reductions: at a call whose cache is cold, reduce the old outputs that were kept whole.

Why (DESIGN 1b, "A cold cache is a free break"): every mode keeps a file view, a listing or a script's
prints whole up to ``fileViewChars`` when it arrives, because the agent acts on lines from all over
what it just asked to see, and because changing it later would break the provider's cache. Neither
holds for long: once the task that read it finished, or a later edit or re-read made it stale, the
agent rarely reads it again; and after a pause past the cache's TTL the whole prompt is written again
anyway, so changing the past there costs nothing extra. So at a cold call the mode's own reducer runs
again over those outputs, this time with their whole-view allowance cut to ``deferredViewChars``:
what stays is their outline, head, tail and error lines, each cut marked by a stub naming the archived
original and its lines (recoverable byte-exact, as every reduction).

Which outputs (:func:`due`): those of finished tasks (a later user goal closed them) and those the
estimator shows stale (a file view an edit or re-read superseded, a command run again), older than
the last ``keepRecentTurns`` calls; never the newest output of a command while it has error lines
(the agent acts on them), never an output already reduced or paged out, and only a tool result that is
one text (a reduction cannot carry an image). Normal mode does this; aggressive pages out instead
(:mod:`.choosing`, priced free at a cold call).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ..config import ModeTable
from ..model import Message, Request, TextPart
from ..reduction.base import stub_keys
from ..tokens import TokenCounter
from .choosing import MESSAGES_PER_CALL, MIN_SAVING_TOKENS, acted_on
from .collapse import collapsed_at
from .entries import tool_result
from .goals import GoalTask
from .heuristic import HeuristicEstimator
from .state import Batch, EvictionState

REDUCED = "reduced:"
"""How a batch's list of call ids names an output reduced again (``reduced:<call id>``)."""

Reducer = Callable[[str, str], str]
"""(call id, the text the model reads of its output) -> the text reduced again (the same text when
the reducer leaves it)."""


def deferred_table(table: ModeTable) -> ModeTable:
    """The mode's reduction table for an output reduced again: what arrives above
    ``deferredViewChars`` keeps about that many chars, file views and listings included (the head and
    tail in the mode's proportions)."""
    room = table.deferredViewChars
    cap = min(table.capChars, max(200, room))
    share = cap / table.capChars
    return table.model_copy(
        update={
            "fileViewChars": room,
            "triggerChars": min(table.triggerChars, room),
            "capChars": cap,
            "headChars": round(table.headChars * share),
            "tailChars": round(table.tailChars * share),
        }
    )


def due(
    view: list[Message],
    ids: list[str | None],
    owners: list[int],
    goals: list[GoalTask],
    estimator: HeuristicEstimator,
    state: EvictionState,
    keep_recent_turns: int,
) -> list[str]:
    """The call ids of the outputs that may be reduced again, in the order of the history (:mod:`this
    module <.deferred>` says which); ``state``: what was paged out already (its outputs, and the
    finished tasks that left whole, are not sent as they were)."""
    floor = max((t.last for t in goals[:-1] if not t.empty), default=-1)
    horizon = min(len(view) - keep_recent_turns * MESSAGES_PER_CALL, len(ids))
    due = {i for i in range(horizon) if owners[i] <= floor}  # a finished task's
    log = estimator.log
    due.update(  # stale: a later edit, re-read or re-run superseded it
        idx
        for seq in estimator.live.dead
        if (idx := log.events[seq].result_index) is not None and idx < horizon
    )
    keep = acted_on(estimator, ids)
    return [
        cid
        for i in sorted(due)
        if (cid := ids[i]) is not None
        and cid not in state.stubs
        and cid not in keep
        and not collapsed_at(state.collapses, owners[i])
    ]


def reduce_again(
    chosen: Iterable[str],
    ids: list[str | None],
    owners: list[int],
    sent: Request,
    reducer: Reducer,
    counter: TokenCounter,
) -> dict[str, tuple[str, int]]:
    """Call id -> (what the model reads of it from now on, tokens saved), for each output in
    ``chosen`` that the reducer makes at least :data:`.choosing.MIN_SAVING_TOKENS` shorter; ``sent``:
    the request as the model reads it now (past decisions applied)."""
    index = {cid: i for i, cid in enumerate(ids) if cid is not None}
    out: dict[str, tuple[str, int]] = {}
    for cid in chosen:
        part = tool_result(sent.messages[owners[index[cid]]], cid)
        if part is None or len(part.content) != 1 or not isinstance(part.content[0], TextPart):
            continue
        text = part.content[0].text
        new = reducer(cid, text)
        if new == text or not stub_keys(new):
            continue
        saving = counter.count(text) - counter.count(new)
        if saving >= MIN_SAVING_TOKENS:
            out[cid] = (new, saving)
    return out


def record(state: EvictionState, call_index: int, reduced: Mapping[str, tuple[str, int]]) -> int:
    """Write the reductions into ``state`` as one batch (re-applied on every later call like any
    stub, :mod:`.applying`); the tokens they save."""
    for cid, (text, _) in reduced.items():
        state.stubs[cid] = text
    saved = sum(s for _, s in reduced.values())
    first = next(iter(reduced.values()))[0]
    state.batches.append(Batch(call_index, stub_keys(first)[0], [REDUCED + cid for cid in reduced], saved))
    state.last_batch_call = call_index
    return saved
