"""Before a host summarises a conversation away, put what lightmem2 has not archived yet in the archive.

Why: a host's own compaction (Claude Code's ``/compact`` or its auto-compaction, OpenClaw's runtime
compaction) replaces the history with an LLM summary. Outputs lightmem2 reduced are archived already
(their stubs name the keys), but outputs it kept whole, and the conversation itself (what the user
asked, what the agent answered and ran), lived only in the context the host is about to drop. Here
each such tool output is archived whole under its content key, and the conversation is archived as
one document in which every tool output is a line naming its key; both are indexed for the session,
so ``lightmem2 search`` (and the ``lightmem2_search`` tool) finds them and ``lightmem2 recover KEY``
prints them byte-exact (DESIGN I4).

Everything here is a pure function of the messages and the stores it is handed: the same history
archives under the same keys (xxh3-128 of the bytes), however often it runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import LightMemError
from ..reduction.base import already_reduced, stub_keys
from ..store.registry import Registry
from ..store.search_index import IndexBase
from .entries import content_text

ChatMessage = dict[str, Any]

MIN_OUTPUT_CHARS = 1
"""Outputs shorter than this are not archived on their own (an empty result says nothing)."""


@dataclass
class Archived:
    """What :func:`archive_history` did: the keys it stored or indexed, and the conversation's key."""

    outputs: list[str] = field(default_factory=list)
    """Keys of tool outputs archived whole now (stored before or not: the key is the same)."""
    stubbed: list[str] = field(default_factory=list)
    """Keys named by stubs in the history (archived when they were reduced), indexed for the session."""
    conversation: str | None = None
    """The key of the conversation document, None when the history had no text at all."""


def _call_line(call: Any) -> str:
    """One tool call as the conversation document shows it: ``-> name(arguments)``."""
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict):
        return "-> (a tool call)"
    return f"-> {fn.get('name', '?')}({fn.get('arguments', '')})"


def _index(index: IndexBase | None, registry: Registry, key: str, data: bytes, session: str) -> None:
    """Index artifact ``key`` for ``session`` (redacted, as every indexed line is); fails open, as
    archiving's own indexing does: search is a convenience, the archive is what must not fail."""
    if index is None:
        return
    with contextlib.suppress(*index.errors):
        index.add(key, registry.redactor.redact_bytes(data), session)


def _stubbed_text(registry: Registry, name: str) -> tuple[str, bytes] | None:
    """(whole key, archived bytes) of a stub's key; None when the archive no longer has it."""
    try:
        key = registry.resolve(name)
        return key, registry.peek(key)
    except LightMemError:
        return None


def archive_history(
    messages: Sequence[ChatMessage],
    registry: Registry,
    index: IndexBase | None,
    session: str,
    title: str = "conversation",
) -> Archived:
    """Archive every tool output of ``messages`` that carries no lightmem2 stub, index the archives
    stubs name, and archive the conversation as one document; what was stored, by key.

    ``messages`` are in chat form (``role``, ``content``, ``tool_calls``, ``tool_call_id``).
    ``title`` heads the conversation document (it names what the host compacted)."""
    done = Archived()
    lines = [f"[lightmem2: {title}; each tool output is archived under the key its line names]"]
    for msg in messages:
        role = str(msg.get("role", "?"))
        text = content_text(msg.get("content"))
        if role == "tool":
            call = str(msg.get("tool_call_id", ""))
            if already_reduced(text):
                for name in stub_keys(text):
                    found = _stubbed_text(registry, name)
                    if found is not None and found[0] not in done.stubbed:
                        done.stubbed.append(found[0])
                        _index(index, registry, found[0], found[1], session)
                lines.append(f"tool output {call}: {text}")
                continue
            if len(text) < MIN_OUTPUT_CHARS:
                lines.append(f"tool output {call}: (empty)")
                continue
            data = text.encode("utf-8", "surrogatepass")
            key = registry.put(data)
            if key not in done.outputs:
                done.outputs.append(key)
            _index(index, registry, key, data, session)
            lines.append(f"tool output {call}: {len(text):,} chars archived as {key}")
            continue
        if text:
            lines.append(f"{role}: {text}")
        for call in msg.get("tool_calls") or ():
            lines.append(_call_line(call))
    if len(lines) > 1:
        data = "\n".join(lines).encode("utf-8", "surrogatepass")
        done.conversation = registry.put(data)
        _index(index, registry, done.conversation, data, session)
    return done


def chat_messages(raw: object) -> list[ChatMessage]:
    """The chat messages of a JSON body (objects with a ``role``); anything else is dropped."""
    if not isinstance(raw, list):
        return []
    return [m for m in raw if isinstance(m, dict) and isinstance(m.get("role"), str)]
