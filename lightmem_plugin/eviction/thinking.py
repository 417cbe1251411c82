"""The model's thinking leaves with the history a compaction paged out.

Why (DESIGN 1b, "Host compaction"): Claude Code sends each earlier answer's thinking back whole, signed,
and the provider counts it as input: on the dev sessions 15-27% of the recorded input, on a long single
task close to half of the context once ~60 calls went by. A compaction that pages out every old tool
output but keeps that thinking frees too little: replayed on 8463c716, the context came back to the
threshold within 24 calls and three compactions cost 1.12x vanilla. A host's own compaction drops all
of it (its summary replaces the history), and the API requires the thinking of the last answer only
(the one whose tool calls the newest results answer); earlier blocks may be left out. So the answers
before the history a compaction kept whole (:attr:`.state.EvictionState.thinking_before`) go without
their thinking blocks (Anthropic ``thinking`` / ``redacted_thinking`` parts) and without the chat
form's reasoning fields; the answers the compaction kept, the last one among them, keep theirs. On a
model that binds thinking to its prefix, the blocks after the change are dropped by the API too
(:mod:`..wire.anthropic.binding`), as they would be after any change of the past.
"""

from __future__ import annotations

from ..model import Message, OpaquePart
from .state import EvictionState

THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
"""Anthropic content blocks that carry the model's thinking."""
REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Chat-form fields of an answer's thinking (DeepSeek and OpenAI-compatible APIs)."""


def _thinking(part: object) -> bool:
    return (
        isinstance(part, OpaquePart)
        and isinstance(part.raw, dict)
        and part.raw.get("type") in THINKING_BLOCKS
    )


def without_thinking(msg: Message) -> Message:
    """``msg`` without its thinking (``msg`` itself when it is not an answer or has none)."""
    if msg.role != "assistant":
        return msg
    parts = [p for p in msg.parts if not _thinking(p)]
    fields = [k for k in REASONING_FIELDS if k in msg.extra]
    if len(parts) == len(msg.parts) and not fields:
        return msg
    extra = {k: v for k, v in msg.extra.items() if k not in REASONING_FIELDS}
    return Message(msg.role, parts, extra, dict(msg.hints))


def stale_ranges(state: EvictionState, binds: bool) -> list[tuple[int, int]]:
    """The message ranges ``[start, end)`` whose answers must go without their thinking, merged and
    ascending: the answers a compaction left behind (:attr:`~.state.EvictionState.thinking_before`),
    and, on a model that binds each thinking block to its prefix (``binds``,
    :mod:`..wire.anthropic.binding`), every answer produced before a change of the past and after
    the first message it changed (:attr:`~.state.EvictionState.past_changes`).

    Why a host needs this from us: OpenClaw's provider calls do not pass the proxy, which elsewhere
    lets the API drop such blocks itself; OpenClaw sends back every earlier answer's thinking, and one
    whose prefix changed fails the whole request with a 400. A block that was dropped stays dropped
    on every later call (the ranges only grow), so the prefix after the change stays byte-stable."""
    spans = [(0, state.thinking_before)] if state.thinking_before > 0 else []
    if binds:
        spans += [(first, end) for first, end in state.past_changes if end > first]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
