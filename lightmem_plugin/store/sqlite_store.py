"""Opening the private SQLite files (ledger, search index) the same way everywhere.

Why one helper: both stores must be 0600 in a 0700 directory (DESIGN I6), shared across processes
(WAL, a busy timeout) and migrated by ``user_version``; doing that in one place keeps them in step.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from ..errors import StoreError

Schema = str | Sequence[tuple[int, str]]
"""A store's schema: one script that brings any older file to the version, or ``(version, script)``
steps in order, each applied once to a file below its version (a new file gets them all)."""


def open_private_db(path: Path, create_sql: Schema, version: int) -> sqlite3.Connection:
    """A connection to ``path`` (created 0600), in WAL mode, with ``create_sql`` applied once per version."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    if path.stat().st_mode & 0o777 != 0o600:  # only when needed: a private file on a read-only disk opens
        os.chmod(path, 0o600)
    db = sqlite3.connect(path, timeout=5.0, check_same_thread=False, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        _migrate(db, create_sql, version)
    except sqlite3.DatabaseError as err:
        db.close()
        if isinstance(err, sqlite3.OperationalError):
            raise  # locked by another process, a read-only or full disk: the file is fine, not damaged
        raise StoreError(
            f"{path} is not a usable SQLite database ({err}); run `lightmem2 doctor --fix` to move it "
            "aside (a new one is started, the old file is kept for inspection)"
        ) from None
    return db


MIGRATION_WAIT_S = 30.0


def _migrate(db: sqlite3.Connection, create_sql: Schema, version: int) -> None:
    """Bring the schema to ``version`` in one transaction, once, however many processes open it at once.

    Why a loop and not one ``BEGIN IMMEDIATE``: SQLite's busy handler is not fair, so a process that
    waits for the write lock while the first opener already writes in a tight loop can starve past any
    timeout. Reading ``user_version`` needs no lock in WAL mode, so a waiter tries the lock in short
    turns and stops as soon as it sees that another process did the migration. The version is checked
    again inside the transaction, so the migration never runs twice. With steps, a file at version n
    gets the steps above n, in one transaction.
    """
    steps = [(version, create_sql)] if isinstance(create_sql, str) else list(create_sql)
    deadline = time.monotonic() + MIGRATION_WAIT_S
    db.execute("PRAGMA busy_timeout=200")
    try:
        while _user_version(db) < version:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) or time.monotonic() > deadline:
                    raise
                continue
            try:
                current = _user_version(db)
                if current < version:
                    for step, script in steps:
                        if step > current:
                            for statement in sql_statements(script):
                                db.execute(statement)
                    db.execute(f"PRAGMA user_version={int(version)}")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
    finally:
        db.execute("PRAGMA busy_timeout=5000")


def _user_version(db: sqlite3.Connection) -> int:
    cur = db.execute("PRAGMA user_version")
    try:
        return int(cur.fetchone()[0])
    finally:
        cur.close()


def sql_statements(script: str) -> list[str]:
    """``script`` cut into complete statements (a trigger body's ``;`` does not end its statement)."""
    out: list[str] = []
    buf = ""
    for piece in script.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \n\t;"):
                out.append(buf.strip())
            buf = ""
    if buf.strip(" \n\t;"):
        raise ValueError(f"incomplete SQL statement at the end of the schema script: {buf.strip()!r}")
    return out


def move_aside(path: Path) -> Path:
    """Rename a damaged store (and its WAL files) to ``NAME.damaged[.N]``; returns the new path."""
    n = 0
    while True:
        target = path.with_name(path.name + ".damaged" + (f".{n}" if n else ""))
        if not target.exists():
            break
        n += 1
    path.rename(target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))
    return target
