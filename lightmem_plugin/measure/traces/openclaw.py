"""Reader for OpenClaw session files: JSON lines, a ``session`` header first, then a tree of entries.

Where such a file comes from: OpenClaw releases before its SQLite store wrote one per session to
``~/.openclaw/agents/<agent>/sessions/<id>.jsonl``. 2026.9.x keeps the very same entries as rows of
``transcript_events`` in ``~/.openclaw/agents/<agent>/agent/openclaw-agent.sqlite``: the session's
``event_json`` in ``seq`` order is this file, line for line (:mod:`.openclaw_store` reads them).

The format (header ``version`` 1 to 4; checked on OpenClaw 2026.9.6, which writes 4):

- Header: ``{"type": "session", "version", "id", "timestamp", "cwd"}``.
- Entries carry ``id``, ``parentId`` and an ISO ``timestamp``. Version 1 has no ids: its entries form
  one chain in file order, and a compaction names the entry it keeps by ``firstKeptEntryIndex`` (its
  line among the file's entries, header included). Version 2 and 3 differ only in the role name of
  hook messages (``hookMessage``, later ``custom``).
- ``message`` entries hold ``message`` with ``role`` ``user`` / ``assistant`` / ``toolResult`` /
  ``custom`` / ``bashExecution``. An assistant message has ``content`` blocks (``text``,
  ``thinking``, ``toolCall`` with ``id``, ``name`` and ``arguments`` as an object), ``api``,
  ``provider``, ``model``, ``stopReason``, ``timestamp`` (epoch ms, taken as the request starts) and
  ``usage`` ``{input, output, cacheRead, cacheWrite, totalTokens}`` where ``input`` is the uncached
  rest, for Chat Completions as for Anthropic: all input is ``input + cacheRead + cacheWrite``.
  A ``toolResult`` has ``toolCallId``, ``toolName``, ``content`` blocks and ``isError``.
- ``custom_message``, ``branch_summary`` and ``compaction`` entries enter the model's context too (as
  user messages); ``reset`` and ``compaction`` open a new window (each call also gets its history as
  if OpenClaw had not compacted, ``TraceCall.whole``, for a replay that models the compaction); ``model_change``,
  ``thinking_level_change``, ``custom``, ``label``, ``session_info`` and ``leaf`` do not.

The prompt of a call is rebuilt the way OpenClaw builds its context: the ``parentId`` chain from the
call's assistant entry back to the root (so a call on a branch sees that branch only), cut at the
last ``compaction`` or ``reset`` on it: a compaction's summary comes first, then the entries it
keeps (from ``firstKeptEntryId``), then those after it. A reset keeps the message entries from its
``firstKeptEntryId`` on (OpenClaw also drops tool results whose call it did not keep; this reader
keeps them, a small over-count after a rare event).

A call is an assistant message with ``usage``, except those OpenClaw writes itself (provider
``openclaw``: delivery mirrors, injected notes) and failed requests with no usage counted
(``stopReason`` ``error``, all zeros): those are not answers a provider billed. A failed or aborted
reply is left out of later prompts, as OpenClaw leaves it out of later requests (one with text it
replaces by a short marker: not counted here).

Not in the file, so not in the prompts: the system prompt and tool definitions, the envelope OpenClaw
puts around a user's text on the wire (a ``[date]`` prefix, a ``Runtime:`` line) and the transient
internal-context message it appends to each request. Tool call ids are the transcript's; a Chat
Completions provider may receive them with punctuation stripped (``call_1_0`` as ``call10``).
Tool-call arguments are compact JSON, as OpenClaw sends them on Chat Completions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import TraceError
from .base import (
    ChatMessage,
    RecordedCompaction,
    Trace,
    TraceCall,
    as_int,
    assistant_message,
    chat_content,
    epoch_seconds,
    typed_lines,
)

Entry = dict[str, Any]

# the text OpenClaw puts around summaries when they enter the context (what the model reads)
COMPACTION_BEFORE = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
COMPACTION_AFTER = "\n</summary>"
BRANCH_BEFORE = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
BRANCH_AFTER = "</summary>"

_WINDOW = frozenset({"compaction", "reset"})
_FAILED = frozenset({"error", "aborted"})


def looks_like_openclaw(doc: object) -> bool:
    """True for a parsed JSON object shaped like an OpenClaw session header (the file's first line)."""
    return isinstance(doc, dict) and doc.get("type") == "session" and isinstance(doc.get("id"), str)


def _parts(content: object) -> str | list[dict[str, Any]]:
    """OpenClaw text/image content as chat content: a string when it is one text (or a string)."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif block.get("type") == "image":
            url = f"data:{block.get('mimeType', 'image/png')};base64,{block.get('data', '')}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return chat_content(parts) or ""


def _arguments(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, ensure_ascii=False, separators=(",", ":"))


def _assistant(message: dict[str, Any]) -> ChatMessage:
    texts: list[dict[str, Any]] = []
    thinking: list[str] = []
    calls: list[tuple[str, str, str]] = []
    content = message.get("content")
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(block)
        elif kind == "thinking":
            thinking.append(str(block.get("thinking", "")))
        elif kind == "toolCall":
            calls.append(
                (str(block.get("id", "")), str(block.get("name", "")), _arguments(block.get("arguments")))
            )
    return assistant_message(content if isinstance(content, str) else _parts(texts), thinking, calls)


def _bash(message: dict[str, Any]) -> str:
    """A shell run the user made from OpenClaw's prompt, as the text the model is shown."""
    text = f"Ran `{message.get('command', '')}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif isinstance(code, int) and code != 0:
        text += f"\n\nCommand exited with code {code}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message['fullOutputPath']}]"
    return text


class _Session:
    """One session's entries, their tree, and their chat-form messages (converted once, shared)."""

    def __init__(self, entries: list[Entry], lines: list[int], version: int, path: Path) -> None:
        self.entries = entries
        self.lines = lines
        self.path = path
        self.version = version
        self.parents: list[int | None] = []
        by_id: dict[str, int] = {}
        for i, entry in enumerate(entries):
            ident = entry.get("id")
            if isinstance(ident, str):
                by_id.setdefault(ident, i)
        self.by_id = by_id
        for i, entry in enumerate(entries):
            if version < 2:
                self.parents.append(i - 1 if i else None)
            else:
                parent = entry.get("parentId")
                self.parents.append(by_id.get(parent) if isinstance(parent, str) else None)
        self.windows = {i for i, entry in enumerate(entries) if entry.get("type") in _WINDOW}
        self._messages: dict[int, ChatMessage | None] = {}

    def message_of(self, i: int) -> dict[str, Any]:
        message = self.entries[i].get("message")
        if not isinstance(message, dict):
            raise TraceError(
                f"trace {self.path}: line {self.lines[i]} is a message entry without a 'message' object"
            )
        return message

    def chain(self, start: int) -> list[int]:
        """Entry indices from the root down to the parent of entry ``start``."""
        out: list[int] = []
        seen: set[int] = set()
        parent = self.parents[start]
        while parent is not None:
            if parent in seen:
                ident = self.entries[parent].get("id")
                raise TraceError(f"trace {self.path}: parentId cycle at {ident!r}; the file is corrupt")
            seen.add(parent)
            out.append(parent)
            parent = self.parents[parent]
        out.reverse()
        return out

    def kept_from(self, boundary: int) -> str | int | None:
        """What a compaction or reset keeps: an entry id, or (version 1) an entry index."""
        entry = self.entries[boundary]
        kept = entry.get("firstKeptEntryId")
        if isinstance(kept, str):
            return self.by_id.get(kept)
        index = entry.get("firstKeptEntryIndex")
        if self.version < 2 and isinstance(index, int) and index >= 1:
            return index - 1  # the line among the file's entries, the header being line 0
        return None

    def context(self, chain: list[int], whole: bool = False) -> list[ChatMessage]:
        """The chat-form messages a call sees whose parent chain is ``chain`` (root first).

        ``whole``: as if OpenClaw had not compacted: its compactions are left out (a reset, which
        the user asked for, still opens a new window)."""
        if whole:
            chain = [i for i in chain if self.entries[i].get("type") != "compaction"]
        cut = next((k for k in range(len(chain) - 1, -1, -1) if chain[k] in self.windows), None)
        order: list[int] = chain
        if cut is not None:
            boundary = chain[cut]
            kept = self.kept_from(boundary)
            start = chain.index(kept) if isinstance(kept, int) and kept in chain[:cut] else cut
            order = [boundary, *chain[start:cut], *chain[cut + 1 :]]
        out: list[ChatMessage] = []
        for i in order:
            if self.entries[i].get("type") == "reset":
                continue
            message = self.message(i)
            if message is not None:
                out.append(message)
        return out

    def message(self, i: int) -> ChatMessage | None:
        """Entry ``i`` as the chat message the model sees, or None when it is not in the context."""
        if i not in self._messages:
            self._messages[i] = self._convert(i)
        return self._messages[i]

    def _convert(self, i: int) -> ChatMessage | None:
        entry = self.entries[i]
        kind = entry.get("type")
        if kind == "custom_message":
            return {"role": "user", "content": _parts(entry.get("content"))}
        if kind == "branch_summary":
            summary = entry.get("summary")
            return {"role": "user", "content": BRANCH_BEFORE + summary + BRANCH_AFTER} if summary else None
        if kind == "compaction":
            return {
                "role": "user",
                "content": COMPACTION_BEFORE + str(entry.get("summary", "")) + COMPACTION_AFTER,
            }
        if kind != "message":
            return None
        message = self.message_of(i)
        if message.get("excludeFromContext") is True:
            return None
        role = message.get("role")
        if role == "assistant":
            return None if message.get("stopReason") in _FAILED else _assistant(message)
        if role == "toolResult":
            return {
                "role": "tool",
                "tool_call_id": str(message.get("toolCallId", "")),
                "content": _parts(message.get("content")),
            }
        if role in ("user", "custom", "hookMessage"):
            return {"role": "user", "content": _parts(message.get("content"))}
        if role == "bashExecution":
            return {"role": "user", "content": _bash(message)}
        return None


def _is_call(message: dict[str, Any]) -> bool:
    """An assistant message a provider answered and counted (see the module docstring)."""
    if message.get("role") != "assistant" or message.get("provider") == "openclaw":
        return False
    usage = message.get("usage")
    if message.get("stopReason") == "error" and isinstance(usage, dict):
        return any(usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite"))
    return True


def _cache_provider(api: object, provider: object) -> str:
    """The replay's cache model for OpenClaw's wire API and provider name."""
    if isinstance(api, str) and api.startswith("anthropic"):
        return "anthropic"
    if isinstance(provider, str) and "deepseek" in provider.lower():
        return "deepseek"
    return "openai"


def parse_openclaw(lines: Sequence[str], path: Path) -> Trace:
    """The neutral trace of an OpenClaw session file given as its JSONL lines."""
    header: Entry | None = None
    entries: list[Entry] = []
    lines_of: list[int] = []
    fix = "the file is cut or damaged, pass a complete OpenClaw session .jsonl"
    for n, entry in typed_lines(lines, path, fix, "an OpenClaw session entry"):
        if entry["type"] == "session":
            header = header or entry
            continue
        entries.append(entry)
        lines_of.append(n)
    assert header is not None  # load_trace sends a file here only when its first line is the header
    version = header.get("version")
    session = _Session(entries, lines_of, version if isinstance(version, int) else 1, path)
    calls: list[TraceCall] = []
    compactions: dict[int, RecordedCompaction] = {}  # compaction entry -> the compaction it records
    firsts: list[dict[str, Any]] = []
    for i, entry in enumerate(entries):
        if entry["type"] != "message":
            continue
        message = session.message_of(i)
        if not _is_call(message):
            continue
        usage = message.get("usage")
        if not isinstance(usage, dict):
            raise TraceError(f"trace {path}: assistant message on line {lines_of[i]} has no usage object")
        where = f"line {lines_of[i]} message.usage"
        fresh, read, write, out = (
            as_int(usage.get(k, 0) or 0, path, f"{where}.{k}")
            for k in ("input", "cacheRead", "cacheWrite", "output")
        )
        anthropic = _cache_provider(message.get("api"), None) == "anthropic"
        stamp = message.get("timestamp")
        at = stamp / 1000 if isinstance(stamp, int | float) and not isinstance(stamp, bool) else None
        output = session.message(i) or _assistant(message)  # a failed call's reply is in no later prompt
        chain = session.chain(i)
        compacted = [k for k in chain if entries[k].get("type") == "compaction"]
        for k in compacted:
            if k not in compactions:
                summary = session.message(k)
                before = entries[k].get("tokensBefore")
                compactions[k] = RecordedCompaction(
                    before_call=len(calls),
                    trigger="auto",
                    pre_tokens=before if isinstance(before, int) and not isinstance(before, bool) else None,
                    summary=summary if summary is not None else {"role": "user", "content": ""},
                )
        calls.append(
            TraceCall(
                prompt=session.context(chain),
                whole=session.context(chain, whole=True) if compacted else None,
                output=output,
                prompt_tokens=fresh + read + write,
                cached_tokens=read,
                completion_tokens=out,
                input_tokens=fresh if anthropic else None,
                cache_read_input_tokens=read if anthropic else None,
                cache_creation_input_tokens=write if anthropic else None,
                at=at if at is not None else epoch_seconds(entry.get("timestamp")),
            )
        )
        firsts.append(message)
    first = firsts[0] if firsts else {}
    meta = {k: str(first[f]) for k, f in (("openclaw_provider", "provider"), ("api", "api")) if first.get(f)}
    return Trace(
        id=str(header["id"]),
        source=f"openclaw session v{session.version}",
        provider=_cache_provider(first.get("api"), first.get("provider")),
        calls=calls,
        kind="openclaw",
        model=str(first["model"]) if first.get("model") else None,
        meta=meta,
        compactions=list(compactions.values()),
    )
