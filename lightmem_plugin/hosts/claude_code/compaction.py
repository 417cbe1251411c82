"""When Claude Code compacts anyway: ``PreCompact`` archives what it is about to summarise away, and
the ``SessionStart`` that follows (``source: "compact"``) hands the model lightmem2's note.

Why two events: ``PreCompact`` (payload ``session_id``, ``transcript_path``, ``trigger`` manual or
auto) still sees the whole history but cannot add to the new context; ``SessionStart`` with source
``compact`` runs right after the summary was written and answers ``hookSpecificOutput.
additionalContext``, which Claude Code puts in the first context after the compaction. So the first
archives every tool output the transcript holds whole and the conversation itself
(:mod:`lightmem_plugin.eviction.compaction_archive`), renders the note (the session record and how to
search and recover, :mod:`lightmem_plugin.eviction.compaction_note`) and keeps it
(:mod:`lightmem_plugin.store.compaction_notes`); the second answers with the kept note, or, when
``PreCompact`` did not run (an install before this, a timeout), does both itself: the transcript
still holds everything before the compaction.

A compaction is named by the session's count of dropped histories (:mod:`..shared.transcripts`):
``PreCompact`` of compaction N runs while N-1 are counted, its ``SessionStart`` after N are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...eviction.compaction_archive import archive_history
from ...eviction.compaction_note import compaction_note, record_of
from ...store.compaction_notes import CompactionNotes
from ...store.home import Home
from ..shared import hook_session as _common
from ..shared import transcripts

SHELL = True
"""The note names the command lines: Claude Code lists our recover and search tools only when the
MCP server is registered, and runs ``lightmem2`` through its Bash tool either way (as the stubs of
its hook do)."""


def _transcript(payload: dict[str, Any], session: str) -> Path | None:
    path = payload.get("transcript_path")
    if isinstance(path, str) and path and Path(path).is_file():
        return Path(path)
    return transcripts.transcript_for(session)


def compaction_id(number: int) -> str:
    """The id a note of this session's ``number``-th dropped history is kept under."""
    return f"claude-code-{number}"


def build_note(session: str, transcript: Path | None) -> str:
    """Archive the transcript's history (tool outputs whole, the conversation as one document) and
    render the note for the context after the compaction."""
    from ...faults import open_sink
    from ...measure.traces.claude_code import whole_history
    from ...pipeline import LightMem  # lazy: the stores, as the other hooks open them

    messages: list[dict[str, Any]] = []
    if transcript is not None:
        messages = whole_history(
            transcript.read_text(encoding="utf-8", errors="replace").split("\n"), transcript
        )
    plugin = LightMem(faults=open_sink())
    plugin.attach_search_index()
    try:
        done = archive_history(messages, plugin.registry, plugin.search_index, session, _title(session))
    finally:
        if plugin.search_index is not None:
            plugin.search_index.close()
    return compaction_note(record_of(messages), session, done.conversation, SHELL)


def _title(session: str) -> str:
    return f"Claude Code session {session} before the host compacted it"


def notes() -> CompactionNotes:
    """The data dir's kept notes."""
    return CompactionNotes(Home.default().compaction_notes_dir)


def pre_compact(payload: dict[str, Any]) -> None:
    """Archive what the compaction will drop and keep the note for the ``SessionStart`` after it.
    Answers nothing: Claude Code goes on compacting as it would have."""
    session = _common.session_id(payload)
    number = transcripts.history(session) + 1
    store = notes()
    if store.get(session, compaction_id(number)) is None:
        store.put(session, compaction_id(number), build_note(session, _transcript(payload, session)))


def after_compaction(payload: dict[str, Any]) -> dict[str, Any]:
    """The ``SessionStart`` answer after a compaction: the kept note as ``additionalContext`` (built
    now when ``PreCompact`` kept none)."""
    session = _common.session_id(payload)
    number = max(1, transcripts.history(session))
    store = notes()
    note = store.get(session, compaction_id(number))
    if note is None:
        note = store.put(session, compaction_id(number), build_note(session, _transcript(payload, session)))
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": note}}
