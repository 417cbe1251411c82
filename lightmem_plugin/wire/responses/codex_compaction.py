"""Codex CLI's own compaction as it crosses the Responses wire: telling its summarising request and
the summary message after it, and reading the history it summarises. Pure: payload in, facts out.

Why on the wire: Codex has no hook around its compaction, but it compacts through the provider it is
configured with (for a provider that is not OpenAI's own, it summarises locally, by a normal ``POST
/v1/responses``; ``codex-rs/core/src/compact.rs``), so the proxy sees both edges:

- the **summarising request**: the whole history, then one user message whose text is Codex's
  template ``templates/compact/prompt.md`` (or ``compact_prompt`` from config.toml), sent with no
  tools. Seen on Codex 0.169.0 and 0.171.0 (auto-compaction past ``model_auto_compact_token_limit``):
  the message has no ``id`` and its text is the template byte for byte, :data:`PROMPT_HEAD` first;
- the **summary message**: Codex rebuilds the history as the initial context, the user's recent
  messages, and one user message ``SUMMARY_PREFIX + "\\n" + summary`` (``summary_prefix.md``); every
  later request carries it, unchanged, until the next compaction replaces it. Codex tells its own
  summaries by that prefix (``is_summary_message``), so lightmem2 appends its note after the summary
  and never touches the start.

Both texts are Codex's, read out of the 0.169.0 and 0.171.0 binaries (the same bytes in both).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

JSON = dict[str, Any]

PROMPT_HEAD = "You are performing a CONTEXT CHECKPOINT COMPACTION."
"""How Codex's summarisation prompt starts (``templates/compact/prompt.md``, 0.169.0 and 0.171.0)."""
SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking "
    "process. You also have access to the state of the tools that were used by that language model. "
    "Use this to build on the work that has already been done and avoid duplicating work. Here is the "
    "summary produced by the other language model, use the information in this summary to assist with "
    "your own analysis:"
)
"""The start of Codex's summary message (``templates/compact/summary_prefix.md``); a line break and
the summary follow it."""
NOTE_SEPARATOR = "\n\n"
"""Between the summary and lightmem2's note."""
SESSION_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")
"""User messages Codex writes itself at a session's start (its ``collect_user_messages`` leaves them
out of what it keeps): context, not something the user asked."""
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
_CALLS = {"function_call": "arguments", "custom_tool_call": "input"}


def _items(payload: Mapping[str, Any]) -> list[Any]:
    items = payload.get("input")
    return items if isinstance(items, list) else []


def content_text(content: object) -> str:
    """The text of a Responses message or output content: a string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        str(p.get("text", "")) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def user_text(item: object) -> str | None:
    """The text of a user message item, None for any other item."""
    if not isinstance(item, dict) or item.get("role") != "user" or item.get("type", "message") != "message":
        return None
    return content_text(item.get("content"))


def is_compaction_request(payload: Mapping[str, Any]) -> bool:
    """True for Codex's summarising request: its last input item is a user message that starts with
    Codex's summarisation prompt."""
    items = _items(payload)
    text = user_text(items[-1]) if items else None
    return text is not None and text.lstrip().startswith(PROMPT_HEAD)


def is_summary(text: str) -> bool:
    """True for the text of Codex's summary message (as Codex itself tells it: the prefix, a newline)."""
    return text.startswith(SUMMARY_PREFIX + "\n")


def summaries(payload: Mapping[str, Any]) -> list[int]:
    """Indices of the input items that are Codex's summary messages (one after each compaction)."""
    found = []
    for n, item in enumerate(_items(payload)):
        text = user_text(item)
        if text is not None and is_summary(text):
            found.append(n)
    return found


def summary_of(item: object) -> str:
    """The summary message's text as Codex sent it ("" for another item)."""
    return user_text(item) or ""


def with_note(item: JSON, note: str) -> JSON:
    """The summary message ``item`` with ``note`` after its text (in its last text part); the other
    fields as they were. A string content stays a string."""
    content = item.get("content")
    if isinstance(content, str):
        return {**item, "content": content + NOTE_SEPARATOR + note}
    parts = list(content) if isinstance(content, list) else []
    for n in range(len(parts) - 1, -1, -1):
        part = parts[n]
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            parts[n] = {**part, "text": part["text"] + NOTE_SEPARATOR + note}
            return {**item, "content": parts}
    return {**item, "content": [*parts, {"type": "input_text", "text": note}]}


def _call(item: JSON) -> JSON:
    name = str(item.get("name", "?"))
    arguments = item.get(_CALLS[str(item.get("type"))])
    return {
        "id": str(item.get("call_id", "")),
        "type": "function",
        "function": {"name": name, "arguments": str(arguments or "")},
    }


def history(items: Sequence[Any]) -> list[JSON]:
    """The conversation ``items`` hold, in chat form (``role``, ``content``, ``tool_calls``,
    ``tool_call_id``), for :func:`~lightmem_plugin.eviction.compaction_archive.archive_history`.

    Left out: developer and system messages (Codex's instructions, the same in every session), the
    user messages Codex writes itself (:data:`SESSION_PREFIXES`), the summarisation prompt, and items
    that carry no text (reasoning, tool lists). Tool outputs are kept as Codex sent them: whole,
    since lightmem2 reduces them on the wire only."""
    out: list[JSON] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind in _CALLS:
            out.append({"role": "assistant", "content": "", "tool_calls": [_call(item)]})
        elif kind in _OUTPUTS:
            output = item.get("output")
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": str(item.get("call_id", "")),
                    "content": content_text(output),
                }
            )
        elif kind == "message" and item.get("role") in ("user", "assistant"):
            text = content_text(item.get("content"))
            if item["role"] == "user" and text.lstrip().startswith((PROMPT_HEAD, *SESSION_PREFIXES)):
                continue
            if text:
                out.append({"role": item["role"], "content": text})
    return out
