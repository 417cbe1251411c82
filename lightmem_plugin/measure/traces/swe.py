"""Reader for the swe traces: one JSON per mini-swe-agent session with the real DeepSeek usage.

The format (``traces/README.md``): ``messages`` is the whole conversation in chat form and each entry
of ``calls`` names the ``message_index`` of the assistant message it produced; the agent only appends,
so call ``c``'s prompt is ``messages[:c.message_index]``. The prompts are slices of one list: they
share the message dicts, so 190 calls cost 190 lists of references, not 190 copies.

A call may carry ``at``, when it was made in seconds since the epoch (optional: the recorded
mini-swe-agent sessions have none; ``lightmem2 continuous`` writes them from its declared pause
model). Times must be finite, non-negative and never go back: a cache model with time reads the
pauses between calls from them, and a wrong time would expire (or keep) prefixes silently.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, TypeGuard

from ...errors import TraceError
from .base import ChatMessage, Trace, TraceCall, as_int

_ROLES = frozenset({"system", "user", "assistant", "tool"})


def looks_like_swe(doc: object) -> TypeGuard[dict[str, Any]]:
    """True for a parsed document shaped like a swe session (an object with messages and calls)."""
    return isinstance(doc, dict) and "messages" in doc and "calls" in doc


def _messages(doc: dict[str, Any], path: Path) -> list[ChatMessage]:
    messages = doc["messages"]
    if not isinstance(messages, list):
        raise TraceError(f"trace {path}: 'messages' is {type(messages).__name__}, expected a list")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            got = message.get("role") if isinstance(message, dict) else type(message).__name__
            raise TraceError(
                f"trace {path}: messages[{i}] has role {got!r}, expected one of system/user/assistant/tool"
            )
    return messages


def parse_swe(doc: dict[str, Any], path: Path) -> Trace:
    """The neutral trace of a parsed swe session; ``path`` only names the file in errors."""
    messages = _messages(doc, path)
    raw_calls = doc["calls"]
    if not isinstance(raw_calls, list):
        raise TraceError(f"trace {path}: 'calls' is {type(raw_calls).__name__}, expected a list")
    calls: list[TraceCall] = []
    before: float | None = None
    for i, call in enumerate(raw_calls):
        if not isinstance(call, dict):
            raise TraceError(f"trace {path}: calls[{i}] is {type(call).__name__}, expected an object")
        index = as_int(call.get("message_index"), path, f"calls[{i}].message_index")
        if index >= len(messages) or messages[index].get("role") != "assistant":
            raise TraceError(
                f"trace {path}: calls[{i}].message_index {index} does not name an assistant message "
                f"(there are {len(messages)} messages)"
            )
        completion = call.get("completion_tokens")
        at = _at(call.get("at"), before, path, i)
        before = at if at is not None else before
        calls.append(
            TraceCall(
                prompt=messages[:index],
                output=messages[index],
                prompt_tokens=as_int(call.get("prompt_tokens"), path, f"calls[{i}].prompt_tokens"),
                cached_tokens=as_int(call.get("cached_tokens"), path, f"calls[{i}].cached_tokens"),
                completion_tokens=None
                if completion is None
                else as_int(completion, path, f"calls[{i}].completion_tokens"),
                at=at,
            )
        )
    ident = doc.get("id")
    meta = {k: doc[k] for k in ("exit_status",) if doc.get(k) is not None}
    return Trace(
        id=str(ident) if ident else path.name.split(".")[0],
        source=str(doc.get("source") or "swe"),
        provider=str(doc.get("provider") or "deepseek"),
        calls=calls,
        kind="swe",
        model=str(doc["model"]) if doc.get("model") else None,
        meta=meta,
    )


def _at(value: object, before: float | None, path: Path, i: int) -> float | None:
    """``calls[i].at`` as epoch seconds (None when absent), or a TraceError naming the value."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise TraceError(
            f"trace {path}: calls[{i}].at is {value!r}, expected seconds since the epoch (a non-negative "
            "number); fix the time or leave 'at' out"
        )
    if before is not None and value < before:
        raise TraceError(
            f"trace {path}: calls[{i}].at {value!r} is before the previous call's {before!r}; "
            "calls are listed in the order they were made, so their times must not go back"
        )
    return float(value)
