"""Continuous sessions: several recorded sessions run back to back in one conversation.

Why: assistant agents (an OpenClaw chat, a long Claude Code session) run task after task in one
session, and that is where finished work piles up and where evicting it pays most (DESIGN 5). The
recorded sessions are single tasks; this module chains them the way such an agent would have seen
them: one system prompt (the first session's), then each session's turns in order (its own system
prompt dropped), every tool call answered as recorded. Call ``c`` of task ``k`` is sent with all of
tasks ``1..k-1`` (through their last reply) before its own prompt.

The result is a document in the swe trace format (``traces/README.md``), so ``lightmem2 replay``
reads it like any recorded session. Its recorded input usage is zero (no provider ever saw these
prompts); each answer keeps its recorded output tokens, so money counts output.
``tasks`` in the document lists, per task, the source id and the index of its first message.

Time: the recorded swe sessions carry no call times, so a chain of them would never pause and no
provider cache would ever expire on it. :class:`Pauses` is a declared model of when the calls were
made (a fixed step between calls within a task, a longer pause before each new task: the user
coming back); :func:`chain` writes each call's ``at`` from it and the model itself under ``pauses``,
so a replay of the file expires prefixes over the pauses with no option of its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ...errors import TraceError
from .base import ChatMessage, Trace

CALL_SECONDS = 10.0
"""Default seconds between two calls of a task: the pooled median gap between consecutive calls of
the three dev Claude Code sessions (../shared/traces/claude-code: 8.7 s over 431 gaps; per session
7.0, 7.9 and 11.9 s), rounded. Any step under the provider's TTL (Anthropic: 5 minutes) gives the
same cache figures; it only has to be a plausible pace."""

TASK_PAUSE_MINUTES = 30.0
"""Default pause before each new task, in minutes: the user coming back to the session (the
continuous-sessions issue's example; longer than Anthropic's five-minute cache, shorter than
DeepSeek's hours)."""

START_AT = 1_767_225_600.0
"""The first call's time (2026-01-01T00:00:00Z): fixed, so the same sessions give the same bytes."""


@dataclass(frozen=True)
class Pauses:
    """When the calls of a chain are made: ``call_seconds`` apart within a task, and
    ``task_pause_minutes`` between the last call of a task and the first of the next (0: no pause
    beyond the call step)."""

    call_seconds: float = CALL_SECONDS
    task_pause_minutes: float = TASK_PAUSE_MINUTES

    def __post_init__(self) -> None:
        for name, value in (
            ("call_seconds", self.call_seconds),
            ("task_pause_minutes", self.task_pause_minutes),
        ):
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise TraceError(
                    f"pause model: {name} is {value!r}, expected a non-negative number of "
                    f"{'seconds' if name == 'call_seconds' else 'minutes'} (0 for none)"
                )

    def times(self, calls_per_task: Sequence[int]) -> list[float]:
        """Each call's time in seconds since the epoch, for tasks of ``calls_per_task`` calls."""
        out: list[float] = []
        at = START_AT
        for n, count in enumerate(calls_per_task):
            if n:  # the next task starts after the pause (and at least one call step)
                at += max(self.call_seconds, self.task_pause_minutes * 60.0)
            for c in range(count):
                out.append(at + c * self.call_seconds)
            at = out[-1] if out else at
        return out


def chain(
    traces: Sequence[Trace], session_id: str | None = None, pauses: Pauses | None = None
) -> dict[str, Any]:
    """One swe-format document that runs ``traces`` back to back (at least one, each with calls);
    with ``pauses``, each call carries the time that model gives it (``at``, epoch seconds)."""
    if not traces:
        raise TraceError("no sessions to chain; pass two or more recorded sessions")
    empty = [t.id for t in traces if not t.calls]
    if empty:
        raise TraceError(f"session {empty[0]} has no model calls; leave it out of the chain")
    first = traces[0].calls[0].prompt
    messages: list[ChatMessage] = [first[0]] if first and first[0].get("role") == "system" else []
    calls: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    for trace in traces:
        last = trace.calls[-1]
        own_system = 1 if last.prompt and last.prompt[0].get("role") == "system" else 0
        base = len(messages) - own_system  # where this task's message i lands is base + i
        tasks.append({"id": trace.id, "first_message": len(messages)})
        messages.extend(last.prompt[own_system:])
        messages.append(last.output)
        for call in trace.calls:
            index = base + len(call.prompt)
            # the prompt's usage is of another conversation, so none; the answer is the recorded one
            entry: dict[str, Any] = {"message_index": index, "prompt_tokens": 0, "cached_tokens": 0}
            if call.completion_tokens is not None:
                entry["completion_tokens"] = call.completion_tokens
            calls.append(entry)
    name = session_id or "chain-" + "+".join(t.id for t in traces)[:180]
    doc: dict[str, Any] = {
        "id": name,
        "source": "lightmem2 continuous: " + ", ".join(t.source or t.id for t in traces)[:500],
        "provider": traces[0].provider,
        "model": traces[0].model,
        "exit_status": None,
        "messages": messages,
        "calls": calls,
        "tasks": tasks,
    }
    if pauses is not None:
        for entry, at in zip(calls, pauses.times([len(t.calls) for t in traces]), strict=True):
            entry["at"] = at
        doc["pauses"] = asdict(pauses)
    return doc
