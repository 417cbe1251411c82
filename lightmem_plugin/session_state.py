"""A session's decisions, persisted beside the ledger so a restart sends the same bytes (DESIGN 3).

Why: reductions are pure functions of (content, settings), but several things a session decides are
taken over time and depend on what it saw before: the reduced form of each output under the mode in
force *when it arrived* (a later mode switch must not re-reduce it), which outputs were repeats, which
lines the model was already shown, which placeholders the head got, which tool outputs were evicted and
the task registry behind that, and the call count. Lose any of them (a restarted ``serve`` or sidecar, a
session dropped from the in-memory LRU, a hook that runs as its own process) and the next request
differs from the one an uninterrupted process would send: a full cache miss and lost evictions.

Shape on disk (one SQLite file, ``sessions.sqlite3``, 0600 in the 0700 data dir):

- ``entries(session_id, ns, key, value)``: insert-only maps (``memo``, ``images``, ``dedup_first``,
  ``dedup_repeats``, ``dedup_spellings``, ``lines``). A call writes only the entries that are new since the last write, so
  the work per call is proportional to what is new, not to the session's size.
- ``blobs(session_id, name, value)``: small documents rewritten when they change (``core``,
  ``stabilizer``, ``eviction``, ``tasks``).

Values are JSON with sorted keys. Nothing here is ever shown to the model directly; what the model
sees is rebuilt from it by the same code that made it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from .config import data_dir
from .sqlite_store import open_private_db

STATE_FILE = "sessions.sqlite3"
STATE_VERSION = 1
"""Bumped when the meaning of a stored value changes; a session saved under another version starts over."""

WRITER_PREFIXES = ("hook:",)
"""Writers that keep their sessions under ``<prefix>:<id>`` (see :class:`StateStore`)."""

APPEND_ONLY = ("memo", "images", "dedup_first", "dedup_repeats", "dedup_spellings", "lines")
_CREATE = (
    "CREATE TABLE IF NOT EXISTS entries (session_id TEXT NOT NULL, ns TEXT NOT NULL, key TEXT NOT NULL, "
    "value TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (session_id, ns, key));\n"
    "CREATE TABLE IF NOT EXISTS blobs (session_id TEXT NOT NULL, name TEXT NOT NULL, "
    "value TEXT NOT NULL, PRIMARY KEY (session_id, name));\n"
)


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass
class StoredSession:
    """One session as read back: insert-only maps in insertion order, and the blobs by name."""

    maps: dict[str, dict[str, Any]] = field(default_factory=lambda: {ns: {} for ns in APPEND_ONLY})
    blobs: dict[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """True when nothing was ever saved for the session."""
        return not self.blobs and not any(self.maps.values())


class StateStore:
    """The persisted state of every session of one data dir, shared by all our processes (WAL)."""

    def __init__(self, path: Path, prefix: str = "") -> None:
        """``prefix`` keeps one writer's sessions apart from another's in the same file (the hooks
        store theirs under ``hook:<session id>``: the proxy may serve the same id, with decisions of
        its own); it is part of the stored id, never of what the model sees."""
        self.path = path
        self.prefix = prefix
        self._db = open_private_db(path, _CREATE, STATE_VERSION)
        self._lock = threading.Lock()

    @classmethod
    def default(cls, prefix: str = "") -> StateStore:
        """The store in the lightmem2 data dir (``$LIGHTMEM2_HOME`` or the platform default)."""
        return cls(data_dir() / STATE_FILE, prefix)

    def load(self, session_id: str) -> StoredSession:
        """Everything saved for ``session_id`` (empty when nothing was)."""
        out = StoredSession()
        session_id = self.prefix + session_id
        with self._lock:
            rows = self._db.execute(
                "SELECT ns, key, value FROM entries WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
            blobs = self._db.execute(
                "SELECT name, value FROM blobs WHERE session_id = ?", (session_id,)
            ).fetchall()
        for ns, key, value in rows:
            if ns in out.maps:
                out.maps[ns][key] = json.loads(value)
        for name, value in blobs:
            out.blobs[name] = json.loads(value)
        return out

    def write(
        self, session_id: str, entries: Mapping[str, list[tuple[str, Any, int]]], blobs: Mapping[str, str]
    ) -> None:
        """New map entries ``(key, value, seq)`` per namespace and changed blobs, in one transaction."""
        session_id = self.prefix + session_id
        rows = [
            (session_id, ns, key, _dump(value), seq)
            for ns, items in entries.items()
            for key, value, seq in items
        ]
        if not rows and not blobs:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?)", rows)
                self._db.executemany(
                    "INSERT OR REPLACE INTO blobs VALUES (?, ?, ?)",
                    [(session_id, name, text) for name, text in blobs.items()],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def forget(self, session_id: str) -> None:
        """Drop everything saved for a session (a damaged state, or the user asked)."""
        session_id = self.prefix + session_id
        with self._lock:
            self._db.execute("DELETE FROM entries WHERE session_id = ?", (session_id,))
            self._db.execute("DELETE FROM blobs WHERE session_id = ?", (session_id,))

    def sessions(self) -> list[str]:
        """Ids of this writer's sessions with saved state (without the prefix), sorted."""
        with self._lock:
            rows = self._db.execute("SELECT DISTINCT session_id FROM blobs ORDER BY session_id").fetchall()
        ids = [str(r[0]) for r in rows]
        if self.prefix:
            return [i[len(self.prefix) :] for i in ids if i.startswith(self.prefix)]
        return [i for i in ids if not i.startswith(WRITER_PREFIXES)]

    def close(self) -> None:
        """Close the connection (the store is unusable afterwards)."""
        with self._lock:
            self._db.close()


class Journal:
    """What of one session's state is on disk already, so a save writes only what changed.

    The maps it saves are insert-only and insertion-ordered (plain dicts that only ever gain keys), so
    the new entries are those past the count written last time; blobs are compared as JSON text.
    """

    def __init__(self, store: StateStore, session_id: str, loaded: StoredSession | None = None) -> None:
        self.store = store
        self.session_id = session_id
        self._written: dict[str, int] = {
            ns: len((loaded.maps if loaded else {}).get(ns, {})) for ns in APPEND_ONLY
        }
        self._seq = sum(self._written.values())
        self._blobs: dict[str, str] = {k: _dump(v) for k, v in (loaded.blobs if loaded else {}).items()}

    def save(self, maps: Mapping[str, Mapping[Any, Any]], blobs: Mapping[str, Any]) -> None:
        """Write the entries added to ``maps`` since the last save and the blobs whose JSON changed."""
        entries: dict[str, list[tuple[str, Any, int]]] = {}
        counts: dict[str, int] = {}
        for ns in APPEND_ONLY:
            current = maps.get(ns, {})
            done = self._written[ns]
            if len(current) < done:  # a map was replaced by a smaller one: rewrite it whole
                done = 0
            new = list(islice(current.items(), done, None))
            if new:
                entries[ns] = [(str(k), v, self._seq + i) for i, (k, v) in enumerate(new)]
                self._seq += len(new)
            counts[ns] = len(current)
        changed = {}
        for name, value in blobs.items():
            text = _dump(value)
            if self._blobs.get(name) != text:
                changed[name] = text
        self.store.write(self.session_id, entries, changed)
        self._written.update(counts)
        self._blobs.update(changed)
