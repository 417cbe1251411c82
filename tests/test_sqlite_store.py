"""Opening a private store while other processes open or write it (the crash campaign's first round)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from lightmem_plugin.store.sqlite_store import open_private_db, sql_statements

_SCHEMA = "CREATE TABLE IF NOT EXISTS runs (n INTEGER);\nINSERT INTO runs VALUES (1);\n"


def test_statements_are_cut_at_their_end_and_not_inside_a_trigger() -> None:
    script = (
        "CREATE TABLE a (x);\n"
        "CREATE TRIGGER t AFTER INSERT ON a BEGIN INSERT INTO a VALUES (1); DELETE FROM a; END;\n"
        "CREATE INDEX i ON a (x);\n"
    )
    assert [s.split()[1] for s in sql_statements(script)] == ["TABLE", "TRIGGER", "INDEX"]
    with pytest.raises(ValueError, match="incomplete"):
        sql_statements("CREATE TRIGGER t AFTER INSERT ON a BEGIN INSERT INTO a VALUES (1);")


def test_a_second_opener_sees_the_first_ones_migration_and_never_runs_it_again(tmp_path: Path) -> None:
    """The first opener migrates, commits and at once holds the write lock again (a writer in a tight
    loop); a second opener that read the old version must neither starve on the lock nor migrate twice."""
    path = tmp_path / "store.sqlite3"
    first = open_private_db(path, "CREATE TABLE IF NOT EXISTS seed (x);\n", 1)  # WAL, version 1
    first.execute("BEGIN IMMEDIATE")
    for statement in sql_statements(_SCHEMA):
        first.execute(statement)
    first.execute("PRAGMA user_version=2")
    result: list[object] = []

    def second_opener() -> None:
        try:
            result.append(open_private_db(path, _SCHEMA, 2))
        except sqlite3.Error as err:  # pragma: no cover - the failure this test is about
            result.append(err)

    thread = threading.Thread(target=second_opener)
    thread.start()
    time.sleep(0.3)  # the second opener has read version 1 and waits for the lock
    first.execute("COMMIT")
    first.execute("BEGIN IMMEDIATE")  # and holds it again, longer than a single busy timeout
    thread.join(timeout=20)
    first.execute("COMMIT")
    assert not thread.is_alive()
    assert isinstance(result[0], sqlite3.Connection), result
    assert first.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
    result[0].close()
    first.close()
