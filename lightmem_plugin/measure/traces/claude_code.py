"""Reader for Claude Code transcripts (``~/.claude/projects/*/<session>.jsonl``, plain or gzipped).

Claude Code does not store requests, so each call's prompt is rebuilt the way Claude Code builds it:

- A call is one ``message.id``; Claude Code writes one assistant event per content block, chained
  through ``parentUuid``. The events of one id are merged into one assistant message.
- The prompt is the ``parentUuid`` chain from the call's first event back to the root. Progress,
  system and other events sit on the chain and are skipped. A ``compact_boundary`` system event has
  no parent, so a chain after compaction starts at the compact summary, as the model saw it.
- Tool results: with parallel tool calls only the last result lies on the chain (each hangs off
  its own ``tool_use`` event); with tools run one after another the results sit between the blocks
  of one assistant message. Either way Claude Code sends one assistant message followed by all its
  results, so every ``tool_use`` takes its result by id, from wherever it was recorded before the
  call, right after its assistant message, in call order.
- Anthropic blocks become chat form: ``text`` -> text, ``tool_use`` -> ``tool_calls`` (arguments =
  ``json.dumps(input, ensure_ascii=False)``, so non-ASCII text is not inflated by escapes),
  ``tool_result`` -> a ``tool`` message, images -> ``image_url`` parts, ``thinking`` ->
  ``reasoning_content`` (the DeepSeek/OpenAI-compatible field for it; signatures are dropped).
- Sidechain (subagent) events are left out when the file has main-chain calls; ``<synthetic>``
  assistant messages are not API calls. A ``parentUuid`` not in the file ends the chain there.

System prompt and tool definitions are not in transcripts: prompts start at the first message.
A call's time (``at``) is the ``timestamp`` of its first event: its first block, written as the
answer started streaming, the nearest the transcript comes to when the request went out.
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

Event = dict[str, Any]


def looks_like_claude_code(doc: object) -> bool:
    """True for a parsed JSON object shaped like a Claude Code event."""
    return isinstance(doc, dict) and isinstance(doc.get("type"), str)


def _parts(blocks: Sequence[Any]) -> str | list[dict[str, Any]]:
    """Anthropic text/image blocks as chat content: a string when it is one text block."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            source = block.get("source") or {}
            if source.get("type") == "base64":
                url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
            else:
                url = str(source.get("url", ""))
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return chat_content(parts)


def _tool_message(block: dict[str, Any]) -> ChatMessage:
    content = block.get("content")
    body: str | list[dict[str, Any]] = "" if content is None else str(content)
    if isinstance(content, list):
        body = _parts(content)
    return {"role": "tool", "tool_call_id": str(block.get("tool_use_id", "")), "content": body}


def _assistant(events: Sequence[Event]) -> ChatMessage:
    """One chat assistant message from the events of one API call, blocks in recorded order."""
    texts: list[dict[str, Any]] = []
    thinking: list[str] = []
    calls: list[tuple[str, str, str]] = []
    for event in events:
        for block in event["message"].get("content") or ():
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                texts.append(block)
            elif kind == "thinking":
                thinking.append(str(block.get("thinking", "")))
            elif kind == "tool_use":
                arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
                calls.append((str(block.get("id", "")), str(block.get("name", "")), arguments))
    return assistant_message(_parts(texts) if texts else "", thinking, calls)


class _Session:
    """Indexes one transcript and rebuilds prompts; converted messages are shared between calls."""

    def __init__(self, events: list[Event], path: Path) -> None:
        self.events = events
        self.path = path
        self.by_uuid: dict[str, int] = {}
        self.results: dict[str, tuple[int, int]] = {}  # tool_use id -> (event index, block index)
        self.groups: dict[str, list[int]] = {}  # message.id -> its assistant events, in file order
        self.caller: dict[str, str] = {}  # tool_use id -> message.id of the call that made it
        for i, event in enumerate(events):
            uuid = event.get("uuid")
            if isinstance(uuid, str):
                self.by_uuid[uuid] = i
            if event.get("type") == "assistant":
                mid = str(self._message(i).get("id"))
                self.groups.setdefault(mid, []).append(i)
                for block in self._message(i).get("content") or ():
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        self.caller[str(block.get("id", ""))] = mid
            if event.get("type") == "user":
                content = self._message(i).get("content")
                for j, block in enumerate(content if isinstance(content, list) else ()):
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        self.results.setdefault(str(block.get("tool_use_id", "")), (i, j))
        self._assistants: dict[tuple[int, ...], ChatMessage] = {}
        self._users: dict[int, ChatMessage | None] = {}
        self._tools: dict[tuple[int, int], ChatMessage] = {}

    def _message(self, i: int) -> dict[str, Any]:
        message = self.events[i].get("message")
        if not isinstance(message, dict):
            kind = self.events[i].get("type")
            raise TraceError(f"trace {self.path}: event {i + 1} ({kind}) has no 'message' object")
        return message

    def chain(self, start: int, whole: bool = False) -> list[int]:
        """Event indices from the root down to the parent of event ``start``.

        ``whole``: through the host's compactions, as if it had not compacted: at a
        ``compact_boundary`` the chain goes on from the event it compacted after
        (``logicalParentUuid``), and the summaries are left out.
        """
        out: list[int] = []
        seen: set[int] = set()
        parent = self.events[start].get("parentUuid")
        while isinstance(parent, str) and parent in self.by_uuid:
            i = self.by_uuid[parent]
            if i in seen:
                raise TraceError(f"trace {self.path}: parentUuid cycle at {parent!r}; the file is corrupt")
            seen.add(i)
            event = self.events[i]
            if not (whole and event.get("isCompactSummary")):
                out.append(i)
            parent = event.get("parentUuid")
            if whole and parent is None and is_boundary(event):
                parent = self.compacted_after(i)
        out.reverse()
        return out

    def compacted_after(self, boundary: int) -> str | None:
        """The uuid of the event a compaction followed: its ``logicalParentUuid``, or where that is
        not in the file (seen in a recorded session), the last message event of the main chain
        written before the boundary."""
        logical = self.events[boundary].get("logicalParentUuid")
        if isinstance(logical, str) and logical in self.by_uuid:
            return logical
        for i in range(boundary - 1, -1, -1):
            event = self.events[i]
            if event.get("type") in ("user", "assistant") and not event.get("isSidechain"):
                uuid = event.get("uuid")
                return uuid if isinstance(uuid, str) else None
        return None

    def assistant(self, group: tuple[int, ...]) -> ChatMessage:
        if group not in self._assistants:
            self._assistants[group] = _assistant([self.events[i] for i in group])
        return self._assistants[group]

    def tool(self, at: tuple[int, int]) -> ChatMessage:
        if at not in self._tools:
            self._tools[at] = _tool_message(self._message(at[0])["content"][at[1]])
        return self._tools[at]

    def user(self, i: int) -> ChatMessage | None:
        """The non-tool-result part of a user event as one user message (None when empty)."""
        if i not in self._users:
            content = self._message(i).get("content")
            message: ChatMessage | None = None
            if isinstance(content, str):
                message = {"role": "user", "content": content}
            elif isinstance(content, list):
                rest = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")]
                if rest:
                    message = {"role": "user", "content": _parts(rest)}
            self._users[i] = message
        return self._users[i]

    def prompt(self, before: int, whole: bool = False) -> list[ChatMessage]:
        """The chat-form prompt of the call whose first event is ``before``.

        An assistant message is every event of its ``message.id`` recorded before the call, on the
        chain or not: parallel ``tool_use`` blocks branch off each other and the chain keeps only
        one branch, and tool results may sit between the blocks. Each ``tool_use`` is followed by
        its result, as Claude Code sends them. ``whole``: as :meth:`chain`.
        """
        chain = self.chain(before, whole)
        seen: set[str] = set()
        slots: list[tuple[int, ...] | ChatMessage] = []
        for i in chain:
            kind = self.events[i].get("type")
            if kind == "assistant":
                mid = str(self._message(i).get("id"))
                if mid not in seen:
                    seen.add(mid)
                    slots.append(tuple(j for j in self.groups[mid] if j < before))
            elif kind == "user":
                content = self._message(i).get("content")
                for j, block in enumerate(content if isinstance(content, list) else ()):
                    is_result = isinstance(block, dict) and block.get("type") == "tool_result"
                    if is_result and self.caller.get(str(block.get("tool_use_id", ""))) not in seen:
                        slots.append(self.tool((i, j)))
                message = self.user(i)
                if message is not None:
                    slots.append(message)
        out: list[ChatMessage] = []
        for slot in slots:
            if isinstance(slot, dict):
                out.append(slot)
                continue
            message = self.assistant(slot)
            out.append(message)
            for call in message.get("tool_calls", ()):
                at = self.results.get(call["id"])
                if at is not None and at[0] < before:
                    out.append(self.tool(at))
        return out


def is_boundary(event: Event) -> bool:
    """True for the system event with which Claude Code starts a compacted history."""
    return event.get("type") == "system" and event.get("subtype") == "compact_boundary"


def _compaction(
    session: _Session, boundary: int, before_call: int, path: Path, line: int
) -> RecordedCompaction:
    """The recorded compaction that ``boundary`` opens, first seen by call ``before_call``."""
    meta = session.events[boundary].get("compactMetadata")
    meta = meta if isinstance(meta, dict) else {}
    pre = meta.get("preTokens")
    summary = next(
        (
            session.user(i)
            for i, e in enumerate(session.events)
            if e.get("isCompactSummary") and e.get("parentUuid") == session.events[boundary].get("uuid")
        ),
        None,
    )
    return RecordedCompaction(
        before_call=before_call,
        trigger=str(meta.get("trigger") or "auto"),
        pre_tokens=as_int(pre, path, f"line {line} compactMetadata.preTokens") if pre is not None else None,
        summary=summary or {"role": "user", "content": ""},
    )


def _usage(event: Event, path: Path, line: int) -> dict[str, int]:
    usage = event["message"].get("usage")
    if not isinstance(usage, dict):
        raise TraceError(f"trace {path}: assistant event on line {line} has no message.usage object")
    keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")
    out = {k: as_int(usage.get(k, 0) or 0, path, f"line {line} message.usage.{k}") for k in keys}
    split = usage.get("cache_creation")
    hour = split.get("ephemeral_1h_input_tokens") if isinstance(split, dict) else None
    out["write_1h"] = as_int(hour or 0, path, f"line {line} message.usage.cache_creation.ephemeral_1h")
    return out


def _event(line: str) -> Event | None:
    """One transcript line as an event; None for a blank, torn or foreign line."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if looks_like_claude_code(event) else None


def whole_history(lines: Sequence[str], path: Path) -> list[ChatMessage]:
    """Everything the model read in the session, to the transcript's end, in chat form: the main
    chain through the host's compactions (their summaries left out, as :meth:`_Session.chain` with
    ``whole``), with the tool results recorded after the last call. What a host compaction is about
    to summarise away (the ``PreCompact`` hook), or just did (``SessionStart`` after it)."""
    events = [e for e in map(_event, lines) if e is not None]  # the host may be writing its last line
    last = next(
        (
            e.get("uuid")
            for e in reversed(events)
            if e.get("type") in ("user", "assistant", "system") and not e.get("isSidechain")
        ),
        None,
    )
    if not isinstance(last, str):
        return []
    end: Event = {"type": "system", "parentUuid": last}  # the chain's next event, never a message
    session = _Session([*events, end], path)
    return session.prompt(len(events), whole=True)


def parse_claude_code(lines: Sequence[str], path: Path) -> Trace:
    """The neutral trace of a Claude Code transcript given as its JSONL lines."""
    events: list[Event] = []
    lines_of: list[int] = []
    for n, event in typed_lines(lines, path, "pass a Claude Code .jsonl transcript", "a Claude Code event"):
        events.append(event)
        lines_of.append(n)
    session = _Session(events, path)
    groups: dict[str, list[int]] = {}
    main = any(e.get("type") == "assistant" and not e.get("isSidechain") for e in events)
    for i, event in enumerate(events):
        if event.get("type") != "assistant" or (main and event.get("isSidechain")):
            continue
        message = session._message(i)
        mid = message.get("id")
        if not isinstance(mid, str) or message.get("model") == "<synthetic>":
            continue
        groups.setdefault(mid, []).append(i)
    calls: list[TraceCall] = []
    compactions: dict[int, RecordedCompaction] = {}  # boundary event -> the compaction it opens
    for group in groups.values():
        usage = _usage(events[group[-1]], path, lines_of[group[-1]])
        read, write = usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]
        chain = session.chain(group[0])
        compacted = bool(chain) and is_boundary(events[chain[0]])
        if compacted and chain[0] not in compactions:
            compactions[chain[0]] = _compaction(session, chain[0], len(calls), path, lines_of[chain[0]])
        calls.append(
            TraceCall(
                prompt=session.prompt(group[0]),
                whole=session.prompt(group[0], whole=True) if compacted else None,
                output=session.assistant(tuple(group)),
                prompt_tokens=usage["input_tokens"] + read + write,
                cached_tokens=read,
                completion_tokens=usage["output_tokens"],
                input_tokens=usage["input_tokens"],
                cache_read_input_tokens=read,
                cache_creation_input_tokens=write,
                at=epoch_seconds(events[group[0]].get("timestamp")),
                cache_write_1h_tokens=usage["write_1h"],
            )
        )
    first = next((e for e in events if isinstance(e.get("sessionId"), str)), {})
    version = first.get("version")
    models = [events[g[0]]["message"].get("model") for g in groups.values()]
    return Trace(
        id=str(first.get("sessionId") or path.name.split(".")[0]),
        source=f"claude-code {version}" if version else "claude-code",
        provider="anthropic",
        calls=calls,
        kind="claude-code",
        model=next((str(m) for m in models if m), None),
        compactions=list(compactions.values()),
    )
