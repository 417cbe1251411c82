"""OpenClaw 2026.9.x's SQLite session store, read as the session files older releases wrote.

Why: 2026.9.x no longer writes ``~/.openclaw/agents/<agent>/sessions/<id>.jsonl``; it keeps the same
entries as rows of ``transcript_events(session_id, seq, event_json, event_zstd, ...)`` in
``~/.openclaw/agents/<agent>/agent/openclaw-agent.sqlite``. A session's rows in ``seq`` order are,
line for line, the old file, so each session goes to :func:`.openclaw.parse_openclaw` unchanged and
a store replays like a directory of session files. Rows of 1 KiB or more have ``event_json`` NULL and
their text zstd-compressed in ``event_zstd`` (hence the ``zstandard`` dependency: Python 3.11 has no
zstd module).

The store is opened read-only (``mode=ro``): OpenClaw may be running and writing it, and a
measurement must never change the host's data. A session whose first row is not a ``session`` header
is skipped (not a transcript this reader knows); one without model calls reads as a trace with no
calls, which replay skips as it skips such a file. Error messages name a session as
``<store>#<session_id>`` and a row by its line, its place among the session's rows (1 = the header).
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import zstandard

from ...errors import TraceError
from .base import Trace, unzstd
from .openclaw import looks_like_openclaw, parse_openclaw

SQLITE_MAGIC = b"SQLite format 3\x00"
STORE_HINT = "~/.openclaw/agents/<agent>/agent/openclaw-agent.sqlite"


@dataclass(frozen=True, slots=True)
class StoreSession:
    """One session of an OpenClaw store: where replay would otherwise hold a session file's path."""

    store: Path
    session_id: str

    def __str__(self) -> str:
        return f"{self.store}#{self.session_id}"


def is_sqlite(path: Path) -> bool:
    """True for an SQLite database file (by its magic bytes, whatever its name)."""
    try:
        with path.open("rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False  # not readable: the reader that opens it says why


def _connect(store: Path) -> sqlite3.Connection:
    """Read-only: OpenClaw may be writing the store, and measuring must not change the host's data."""
    return sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True)


def _failed(store: Path, err: sqlite3.Error) -> TraceError:
    """One line saying what is wrong with the store and the fix."""
    text = str(err)
    if "no such table" in text or "no such column" in text:
        return TraceError(
            f"trace {store} is an SQLite database but not an OpenClaw session store ({text}); "
            f"pass OpenClaw 2026.9.x's {STORE_HINT} or a session .jsonl"
        )
    return TraceError(
        f"trace {store} is a damaged or unreadable SQLite database ({text}); copy it again "
        f"(sqlite3 {store} '.backup copy.sqlite') and pass the copy"
    )


def _text(store: Path, session_id: str, line: int, event_json: object, event_zstd: object) -> str:
    """A row's event text: ``event_json``, else ``event_zstd`` decompressed."""
    if isinstance(event_json, str):
        return event_json
    where = f"trace {store}#{session_id}: line {line}"
    if not isinstance(event_zstd, bytes):
        raise TraceError(
            f"{where} has neither event_json nor event_zstd; the store is damaged, copy it again"
        )
    try:
        return unzstd(event_zstd).decode("utf-8")
    except (zstandard.ZstdError, UnicodeDecodeError) as err:
        raise TraceError(
            f"{where} is damaged zstd data ({err}); the store is damaged, copy it again"
        ) from None


def store_sessions(store: Path) -> list[StoreSession]:
    """The store's sessions that start with a ``session`` header, sorted by id (reproducible runs)."""
    out: list[StoreSession] = []
    try:
        with closing(_connect(store)) as conn:
            ids = [
                row[0]
                for row in conn.execute(
                    "SELECT DISTINCT session_id FROM transcript_events ORDER BY session_id"
                )
            ]
            for session_id in ids:
                first = conn.execute(
                    "SELECT event_json, event_zstd FROM transcript_events WHERE session_id = ? "
                    "ORDER BY seq LIMIT 1",
                    (session_id,),
                ).fetchone()
                try:
                    header: object = json.loads(_text(store, str(session_id), 1, *first))
                except json.JSONDecodeError:
                    continue
                if looks_like_openclaw(header):
                    out.append(StoreSession(store, str(session_id)))
    except sqlite3.Error as err:
        raise _failed(store, err) from None
    return out


def session_lines(session: StoreSession) -> list[str]:
    """The session's rows in ``seq`` order, as the lines of its session file."""
    try:
        with closing(_connect(session.store)) as conn:
            rows = conn.execute(
                "SELECT event_json, event_zstd FROM transcript_events WHERE session_id = ? ORDER BY seq",
                (session.session_id,),
            ).fetchall()
    except sqlite3.Error as err:
        raise _failed(session.store, err) from None
    return [_text(session.store, session.session_id, n, *row) for n, row in enumerate(rows, 1)]


def load_store_session(session: StoreSession) -> Trace:
    """The neutral trace of one session of a store, read as its session file would be."""
    lines = session_lines(session)
    try:
        header: object = json.loads(lines[0]) if lines else None
    except json.JSONDecodeError:
        header = None
    if not looks_like_openclaw(header):
        raise TraceError(
            f"trace {session}: no session in the store starts with a 'session' header under this id; "
            "pass the store itself, replay reads every session in it"
        )
    return parse_openclaw(lines, Path(str(session)))
