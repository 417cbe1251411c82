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
- ``versions(session_id, version)``: bumped by every write. A process that holds a session in memory
  compares it with the version it last read or wrote before each call, and reloads when another
  process (a second ``serve`` on the same data dir, a team gateway's peer) wrote since; a write that
  expects another version than the stored one is refused (:class:`~.errors.StaleState`), so two
  writers' entries never interleave.

The same interface has a PostgreSQL backend (:mod:`.store`), chosen by ``store.url``.

Values are JSON with sorted keys, sealed with the archive key (:mod:`.store.sealed_values`: the store
holds what the model was shown, so it must not be readable without the key). Nothing here is ever shown to the model directly; what the model
sees is rebuilt from it by the same code that made it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import Any

import xxhash

from ..errors import StaleState
from .base import APPEND_ONLY as APPEND_ONLY  # re-exported: the maps of a session
from .base import SessionStates
from .base import StoredSession as StoredSession  # re-exported: callers import it from here
from .home import Home
from .sealed_values import StateCipher, dump
from .sqlite_store import open_private_db

STATE_VERSION = 1
"""Bumped when the meaning of a stored value changes; a session saved under another version starts over."""
SCHEMA_VERSION = 2
"""The SQLite file's layout (``user_version``); 2 added ``versions``. Apart from :data:`STATE_VERSION`."""
LOCK_BUCKETS = 64
"""Lock files per data dir (``locks/state-NN.lock``): sessions hash into them, never one file each."""

WRITER_PREFIXES = ("hook:",)
"""Writers that keep their sessions under ``<prefix>:<id>`` (see :class:`StateStore`)."""

_CREATE = (
    "CREATE TABLE IF NOT EXISTS entries (session_id TEXT NOT NULL, ns TEXT NOT NULL, key TEXT NOT NULL, "
    "value TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (session_id, ns, key));\n"
    "CREATE TABLE IF NOT EXISTS blobs (session_id TEXT NOT NULL, name TEXT NOT NULL, "
    "value TEXT NOT NULL, PRIMARY KEY (session_id, name));\n"
    "CREATE TABLE IF NOT EXISTS versions (session_id TEXT PRIMARY KEY, version INTEGER NOT NULL);\n"
)


def entry_rows(
    stored_id: str, entries: Mapping[str, list[tuple[str, Any, int]]], cipher: StateCipher
) -> list[tuple[str, str, str, str, int]]:
    """The ``entries`` table rows of one write: ``(session, namespace, key, sealed value, seq)``
    (both backends store the same rows)."""
    return [
        (stored_id, ns, key, cipher.protect(_dump(value)), seq)
        for ns, items in entries.items()
        for key, value, seq in items
    ]


def blob_rows(stored_id: str, blobs: Mapping[str, str], cipher: StateCipher) -> list[tuple[str, str, str]]:
    """The ``blobs`` table rows of one write: ``(session, name, sealed value)`` from each blob's JSON."""
    return [(stored_id, name, cipher.protect(text)) for name, text in blobs.items()]


_dump = dump


RETRY_BLOB = "retry"
"""The blob naming the last proxied request a save ended and the blobs as they were before it."""


def retry_start(loaded: StoredSession, request_key: str) -> dict[str, Any] | None:
    """The blobs of ``loaded`` as they were before its last call, when that call was ``request_key``
    (the same request again: a retry); None otherwise."""
    retry = loaded.blobs.get(RETRY_BLOB)
    if not isinstance(retry, dict) or retry.get("request") != request_key:
        return None
    blobs = {k: v for k, v in loaded.blobs.items() if k != RETRY_BLOB}
    for name, value in (retry.get("before") or {}).items():
        if value is None:
            blobs.pop(name, None)
        else:
            blobs[name] = value
    return blobs


def load_rows(
    out: StoredSession,
    rows: list[tuple[Any, ...]],
    blobs: list[tuple[Any, ...]],
    version: int,
    cipher: StateCipher,
) -> StoredSession:
    """``out`` filled from ``(ns, key, value)`` entry rows (in seq order) and ``(name, value)`` blobs."""
    for ns, key, value in rows:
        if ns in out.maps:
            out.maps[ns][key] = cipher.reveal(value)
    for name, value in blobs:
        out.blobs[name] = cipher.reveal(value)
    out.version = version
    return out


def stale(session_id: str, expect: int, found: int) -> StaleState:
    """The error for a write that expected version ``expect`` of a session stored at ``found``."""
    return StaleState(
        f"session {session_id!r} is at version {found} in the store, this process expected {expect}: "
        "another process wrote it since; the write is refused and the next call reloads the session"
    )


def lock_key(session_id: str) -> int:
    """A signed 64-bit key for ``session_id`` (a PostgreSQL advisory lock; the lock file's bucket)."""
    return int(xxhash.xxh3_64_intdigest(session_id.encode("utf-8", "surrogatepass"))) - (1 << 63)


class StateStore:
    """The persisted state of every session of one data dir, shared by all our processes (WAL)."""

    shared = False
    """True for a store other machines' processes share (PostgreSQL); this one is one data dir's."""

    def __init__(self, path: Path, prefix: str = "", cipher: StateCipher | None = None) -> None:
        """``prefix`` keeps one writer's sessions apart from another's in the same file (the hooks
        store theirs under ``hook:<session id>``: the proxy may serve the same id, with decisions of
        its own); it is part of the stored id, never of what the model sees. ``cipher`` seals the
        values (default: with this home's archive key, :mod:`.store.sealed_values`)."""
        self.path = path
        self.prefix = prefix
        self.cipher = cipher or StateCipher.from_home()
        self._db = open_private_db(path, _CREATE, SCHEMA_VERSION)
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        """Where the state lives, for messages."""
        return str(self.path)

    @classmethod
    def default(cls, prefix: str = "", cipher: StateCipher | None = None) -> StateStore:
        """The store in the lightmem2 data dir (``$LIGHTMEM2_HOME`` or the platform default)."""
        return cls(Home.default().states_file, prefix, cipher)

    def load(self, session_id: str) -> StoredSession:
        """Everything saved for ``session_id`` (empty when nothing was)."""
        session_id = self.prefix + session_id
        with self._lock:
            self._db.execute("BEGIN")  # one snapshot: a concurrent writer's half is never read
            try:
                rows = self._db.execute(
                    "SELECT ns, key, value FROM entries WHERE session_id = ? ORDER BY seq", (session_id,)
                ).fetchall()
                blobs = self._db.execute(
                    "SELECT name, value FROM blobs WHERE session_id = ?", (session_id,)
                ).fetchall()
                version = self._version(session_id)
            finally:
                self._db.execute("COMMIT")
        return load_rows(StoredSession(), rows, blobs, version, self.cipher)

    def _version(self, stored_id: str) -> int:
        row = self._db.execute("SELECT version FROM versions WHERE session_id = ?", (stored_id,)).fetchone()
        return int(row[0]) if row else 0

    def version(self, session_id: str) -> int:
        """How many writes the session has had (0: none); cheap, read before each call."""
        with self._lock:
            return self._version(self.prefix + session_id)

    def write(
        self,
        session_id: str,
        entries: Mapping[str, list[tuple[str, Any, int]]],
        blobs: Mapping[str, str],
        expect: int | None = None,
    ) -> int:
        """New map entries ``(key, value, seq)`` per namespace and changed blobs, in one transaction;
        returns the session's new version. ``expect``: the version this writer last saw; another one
        in the store raises :class:`~.errors.StaleState` and writes nothing."""
        stored_id = self.prefix + session_id
        rows = entry_rows(stored_id, entries, self.cipher)
        with self._lock:
            if not rows and not blobs:
                return self._version(stored_id)
            self._db.execute("BEGIN IMMEDIATE")
            try:
                found = self._version(stored_id)
                if expect is not None and found != expect:
                    raise stale(session_id, expect, found)
                self._db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?)", rows)
                self._db.executemany(
                    "INSERT OR REPLACE INTO blobs VALUES (?, ?, ?)", blob_rows(stored_id, blobs, self.cipher)
                )
                self._db.execute("INSERT OR REPLACE INTO versions VALUES (?, ?)", (stored_id, found + 1))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return found + 1

    @contextlib.contextmanager
    def lock(self, session_id: str) -> Iterator[None]:
        """Hold the session against every other process of this data dir (an ``flock`` on one of
        :data:`LOCK_BUCKETS` files): load, call and save of one request never interleave with
        another process's. Threads of one process still need their own lock (the proxy has one)."""
        bucket = lock_key(self.prefix + session_id) % LOCK_BUCKETS
        folder = self.path.parent / "locks"
        folder.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(folder / f"state-{bucket:02d}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def forget(self, session_id: str) -> None:
        """Drop everything saved for a session (a damaged state, or the user asked)."""
        session_id = self.prefix + session_id
        with self._lock:
            self._db.execute("DELETE FROM entries WHERE session_id = ?", (session_id,))
            self._db.execute("DELETE FROM blobs WHERE session_id = ?", (session_id,))
            self._db.execute("UPDATE versions SET version = version + 1 WHERE session_id = ?", (session_id,))

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

    def __init__(self, store: SessionStates, session_id: str, loaded: StoredSession | None = None) -> None:
        self.store = store
        self.session_id = session_id
        self.version = loaded.version if loaded else store.version(session_id)
        """The store's version of the session as this journal last read or wrote it."""
        self._written: dict[str, int] = {
            ns: len((loaded.maps if loaded else {}).get(ns, {})) for ns in APPEND_ONLY
        }
        self._seq = sum(self._written.values())
        self._blobs: dict[str, str] = {k: _dump(v) for k, v in (loaded.blobs if loaded else {}).items()}

    def save(
        self, maps: Mapping[str, Mapping[Any, Any]], blobs: Mapping[str, Any], request_key: str | None = None
    ) -> None:
        """Write the entries added to ``maps`` since the last save and the blobs whose JSON changed.

        ``request_key`` names the request this save ends (a proxied call): the blobs as they were
        before it are kept beside them (:data:`RETRY_BLOB`), so a process that gets the same request
        again, after the one that saved died before the host had its answer, can take the call again
        from where it started (:func:`retry_start`). Maps need no copy: they only gain entries, and
        the retried call finds its own in them (the reductions it made, memoised)."""
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
        if request_key is not None or RETRY_BLOB in self._blobs:  # another save since: no retry of that
            before = {n: json.loads(self._blobs[n]) if n in self._blobs else None for n in changed}
            text = _dump({"request": request_key, "before": before if request_key else {}})
            if self._blobs.get(RETRY_BLOB) != text:
                changed[RETRY_BLOB] = text
        self.version = self.store.write(self.session_id, entries, changed, self.version)
        self._written.update(counts)
        self._blobs.update(changed)
