"""Continuous sessions: several recorded sessions run back to back in one conversation.

Why: assistant agents (an OpenClaw chat, a long Claude Code session) run task after task in one
session, and that is where finished work piles up and where evicting it pays most (DESIGN 5). The
recorded sessions are single tasks; this module chains them the way such an agent would have seen
them: one system prompt (the first session's), then each session's turns in order (its own system
prompt dropped), every tool call answered as recorded. Call ``c`` of task ``k`` is sent with all of
tasks ``1..k-1`` (through their last reply) before its own prompt.

The result is a document in the swe trace format (``traces/README.md``), so ``lightmem2 replay``
reads it like any recorded session. Its recorded usage is zero: no provider ever saw these prompts.
``tasks`` in the document lists, per task, the source id and the index of its first message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import TraceError
from .base import ChatMessage, Trace


def chain(traces: Sequence[Trace], session_id: str | None = None) -> dict[str, Any]:
    """One swe-format document that runs ``traces`` back to back (at least one, each with calls)."""
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
            calls.append({"message_index": index, "prompt_tokens": 0, "cached_tokens": 0})
    name = session_id or "chain-" + "+".join(t.id for t in traces)[:180]
    return {
        "id": name,
        "source": "lightmem2 continuous: " + ", ".join(t.source or t.id for t in traces)[:500],
        "provider": traces[0].provider,
        "model": traces[0].model,
        "exit_status": None,
        "messages": messages,
        "calls": calls,
        "tasks": tasks,
    }
