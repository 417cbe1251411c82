"""Reader for the swe traces: one JSON per mini-swe-agent session with the real DeepSeek usage.

The format (``traces/README.md``): ``messages`` is the whole conversation in chat form and each entry
of ``calls`` names the ``message_index`` of the assistant message it produced; the agent only appends,
so call ``c``'s prompt is ``messages[:c.message_index]``. The prompts are slices of one list: they
share the message dicts, so 190 calls cost 190 lists of references, not 190 copies.
"""

from __future__ import annotations

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
        calls.append(
            TraceCall(
                prompt=messages[:index],
                output=messages[index],
                prompt_tokens=as_int(call.get("prompt_tokens"), path, f"calls[{i}].prompt_tokens"),
                cached_tokens=as_int(call.get("cached_tokens"), path, f"calls[{i}].cached_tokens"),
                completion_tokens=None
                if completion is None
                else as_int(completion, path, f"calls[{i}].completion_tokens"),
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
