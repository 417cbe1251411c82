"""Recorded agent sessions, read into one neutral form for replay, report and retention.

``load_trace(path)`` sniffs the format (gzip or not, whatever the file name): a single JSON object
with ``messages`` and ``calls`` is a swe session (:mod:`.swe`); JSON lines whose first line is a
``session`` header are an OpenClaw session file (:mod:`.openclaw`); other JSON lines of events with a
``type`` are a Claude Code transcript (:mod:`.claude_code`). OpenClaw is tried before Claude Code
because its header has a ``type`` too. A :class:`.openclaw_store.StoreSession` (one session of
OpenClaw 2026.9.x's SQLite store, as replay's ``trace_files`` lists them) is read from the store
as its session file would be. Anything else raises :class:`TraceError` with the path and
what was wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...errors import TraceError
from .base import ChatMessage, Trace, TraceCall, TraceKind, read_text
from .claude_code import looks_like_claude_code, parse_claude_code
from .openclaw import looks_like_openclaw, parse_openclaw
from .openclaw_store import StoreSession, is_sqlite, load_store_session, store_sessions
from .swe import looks_like_swe, parse_swe

__all__ = [
    "ChatMessage",
    "StoreSession",
    "Trace",
    "TraceCall",
    "TraceKind",
    "TraceSource",
    "is_sqlite",
    "load_trace",
    "store_sessions",
]

TraceSource = Path | StoreSession  # a session file, or one session of an OpenClaw store


def load_trace(path: str | Path | StoreSession) -> Trace:
    """Read one recorded session (.json/.jsonl, optionally gzipped or zstd-compressed) into a
    :class:`Trace`: a swe session, an OpenClaw session file or a Claude Code transcript, told apart
    by content; or one session of an OpenClaw SQLite store."""
    if isinstance(path, StoreSession):
        return load_store_session(path)
    file = Path(path)
    text = read_text(file)
    if not text.strip():
        raise TraceError(f"trace {file} is empty; pass a recorded session file")
    try:
        doc: object = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    if looks_like_swe(doc):
        return parse_swe(doc, file)
    first_line = text.lstrip().split("\n", 1)[0]
    try:
        first: object = json.loads(first_line)
    except json.JSONDecodeError:
        first = None
    if looks_like_openclaw(first):
        return parse_openclaw(text.split("\n"), file)
    if looks_like_claude_code(first):
        return parse_claude_code(text.split("\n"), file)
    raise TraceError(
        f"trace {file} is not a swe session (JSON with 'messages' and 'calls'), an OpenClaw session "
        "(JSON lines, a 'session' header first) or a Claude Code transcript (JSON lines with 'type'); "
        "pass a file from traces/swe, an OpenClaw session export or ~/.claude/projects"
    )
