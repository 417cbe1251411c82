"""Opening the private SQLite files (ledger, search index) the same way everywhere.

Why one helper: both stores must be 0600 in a 0700 directory (DESIGN I6), shared across processes
(WAL, a busy timeout) and migrated by ``user_version``; doing that in one place keeps them in step.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .errors import StoreError


def open_private_db(path: Path, create_sql: str, version: int) -> sqlite3.Connection:
    """A connection to ``path`` (created 0600), in WAL mode, with ``create_sql`` applied once per version."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    os.chmod(path, 0o600)
    db = sqlite3.connect(path, timeout=5.0, check_same_thread=False, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        if db.execute("PRAGMA user_version").fetchone()[0] < version:
            # one transaction: a process killed mid-way leaves the old schema, never half of the new
            db.executescript(f"BEGIN IMMEDIATE;\n{create_sql}PRAGMA user_version={version};\nCOMMIT;")
    except sqlite3.DatabaseError as err:
        db.close()
        if isinstance(err, sqlite3.OperationalError) and "locked" in str(err):
            raise  # another process holds it: a transient state, not damage
        raise StoreError(
            f"{path} is not a usable SQLite database ({err}); run `lightmem2 doctor --fix` to move it "
            "aside (a new one is started, the old file is kept for inspection)"
        ) from None
    return db


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
