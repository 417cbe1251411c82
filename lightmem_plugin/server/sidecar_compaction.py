"""What the sidecar does when OpenClaw compacts: archive before, and the note for the summary after.

Why here and not in the JS plugin: the archive, the search index, the session record and the kept
notes live on the Python side. OpenClaw's runtime keeps compacting (the engine delegates to it, see
``adapters/openclaw/index.js``), so lightmem2 acts at its two edges:

- ``precompact`` (the engine's ``compact()``, before it delegates: ``/compact`` and overflow
  recovery): every tool output of the history the plugin last assembled that carries no stub is
  archived whole, the conversation as one document, all indexed for search
  (:mod:`lightmem_plugin.eviction.compaction_archive`); the record of that whole history becomes
  the session's newest snapshot, so the note after the compaction quotes the work it summarised.
- ``compacted`` (every ``assemble()`` that finds a compaction summary in the history): the note to
  add to the summary: the record and how to search and recover
  (:mod:`lightmem_plugin.eviction.compaction_note`), kept per summary
  (:mod:`lightmem_plugin.store.compaction_notes`) so every later assemble adds the same bytes and the
  prefix stays cached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import xxhash

from ..errors import LightMemError
from ..eviction.compaction_archive import archive_history, chat_messages
from ..eviction.compaction_note import LEVEL, compaction_note, records_of
from ..store.compaction_notes import CompactionNotes
from ..store.home import Home

if TYPE_CHECKING:
    from ..pipeline import LightMem

JSON = dict[str, Any]
SHELL = False
"""OpenClaw's model has our tools (``lightmem2_search``, ``lightmem2_recover``): the note names them."""


def precompact(plugin: LightMem, session: str, raw_messages: object, host: str = "OpenClaw") -> JSON:
    """Archive the history ``host`` is about to compact; what was archived. The record of that whole
    history becomes the session's newest snapshot (:func:`latest_record`)."""
    messages = chat_messages(raw_messages)
    with plugin.searching() as index:
        done = archive_history(
            messages, plugin.registry, index, session, f"{host} session {session} before a compaction"
        )
    renders = records_of(messages)
    if renders and plugin.records is not None:
        plugin.records.append(session, len(messages) - 1, dict(renders.items()))
    return {"archived": len(done.outputs), "indexed": len(done.stubbed), "conversation": done.conversation}


def compaction_id(summary: str, host: str = "openclaw") -> str:
    """The id a note is kept under: the summary's hash (neither OpenClaw's nor Codex's summaries carry
    an id we can use)."""
    return f"{host}-" + xxhash.xxh3_64_hexdigest(summary.encode("utf-8", "surrogatepass"))


def latest_record(plugin: LightMem, session: str) -> str:
    """The session's newest record snapshot ("" when it has none yet)."""
    if plugin.records is None:
        return ""
    try:
        return str(plugin.records.snapshot(session).get(LEVEL, ""))
    except LightMemError:
        return ""


def notes_of(plugin: LightMem) -> CompactionNotes:
    """The data dir's kept notes (redacted with the plugin's rules where they are not sealed)."""
    return CompactionNotes(Home.default().compaction_notes_dir, redactor=plugin.registry.redactor)


def compacted(plugin: LightMem, session: str, summary: str, conversation: str | None = None) -> JSON:
    """The note for the context after the compaction whose summary is ``summary`` (``conversation``:
    the key ``precompact`` archived the conversation under, when the plugin still knows it)."""
    notes = notes_of(plugin)
    cid = compaction_id(summary)
    note = notes.get(session, cid)
    if note is None:
        note = notes.put(
            session, cid, compaction_note(latest_record(plugin, session), None, conversation, SHELL)
        )
    return {"note": note}
