"""The storage interface, on both backends: the same writes read back the same, versions, locks.

Every test runs on the embedded store (SQLite in the data dir) and on PostgreSQL (a throwaway cluster,
``make pg``; skipped without PostgreSQL). The PostgreSQL-only ones cover migrations, a bad URL and the
advisory lock across separate pools (two processes, as far as the database can tell).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lightmem_plugin.config import Config
from lightmem_plugin.errors import StaleState, StoreError, StoreUnavailable
from lightmem_plugin.ledger import CallRecord, Ledger
from lightmem_plugin.session_state import StateStore
from lightmem_plugin.store import CallLedger, SessionStates, Stores, open_stores

BACKENDS = ["embedded", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    if request.param == "embedded":
        opened = Stores(StateStore(tmp_path / "s.sqlite3"), Ledger(tmp_path / "l.sqlite3"))
    else:
        url = request.getfixturevalue("pg_url")
        opened = open_stores(Config.model_validate({"store": {"url": url}}))
        assert opened.kind == "postgresql"
    try:
        yield opened
    finally:
        opened.close()


def _states(stores: Stores) -> SessionStates:
    assert stores.states is not None
    return stores.states


def _ledger(stores: Stores) -> CallLedger:
    assert stores.ledger is not None
    return stores.ledger


def test_what_is_written_reads_back_in_order_with_a_version(stores: Stores) -> None:
    states = _states(stores)
    assert states.load("s").empty and states.version("s") == 0
    v1 = states.write("s", {"memo": [("b", "B", 0), ("a", None, 1)]}, {"core": '{"calls":1}'}, 0)
    v2 = states.write("s", {"memo": [("c", "ü\n\t", 2)], "lines": [("7", 1, 3)]}, {}, v1)
    assert (v1, v2) == (1, 2) == (1, states.version("s"))
    got = states.load("s")
    assert list(got.maps["memo"].items()) == [("b", "B"), ("a", None), ("c", "ü\n\t")]
    assert got.maps["lines"] == {"7": 1} and got.blobs == {"core": {"calls": 1}} and got.version == 2
    assert states.write("s", {}, {}, 2) == 2  # nothing new: no write, no new version
    assert states.sessions() == ["s"]


def test_a_write_that_expects_an_old_version_is_refused_and_writes_nothing(stores: Stores) -> None:
    states = _states(stores)
    states.write("s", {"memo": [("a", "A", 0)]}, {"core": "1"}, 0)
    states.write("s", {"memo": [("b", "B", 1)]}, {"core": "2"}, 1)  # another process, meanwhile
    with pytest.raises(StaleState, match=r"version 2 in the store, this process expected 1"):
        states.write("s", {"memo": [("x", "X", 1)]}, {"core": "3"}, 1)
    got = states.load("s")
    assert list(got.maps["memo"]) == ["a", "b"] and got.blobs["core"] == 2 and got.version == 2


def test_forget_moves_the_version_on_so_holders_reload(stores: Stores) -> None:
    states = _states(stores)
    states.write("s", {"memo": [("a", "A", 0)]}, {"core": "1"}, 0)
    states.forget("s")
    assert states.load("s").empty and states.version("s") == 2 and states.sessions() == []


def test_ledger_rows_read_back_equal_and_a_rerecorded_call_is_the_newest(stores: Stores) -> None:
    ledger = _ledger(stores)
    a1 = CallRecord("a", 1, "normal", 100, 120, 0, 100, k=100.0, k_baseline=120.0, writer="w1")
    b1 = CallRecord("b", 1, "aggressive", 50, 50, 10, 40, saved_by_pass={"html": 3}, writer="w2")
    a2 = CallRecord(
        "a", 2, "normal", 150, 200, 100, 50, prefix_break_at=(3, 17), break_reason="tools changed",
        errors={"reduction": 1}, last_error="boom", writer="w1",
    )  # fmt: skip
    for rec in (a1, b1, a2):
        ledger.record_call(rec)
    assert ledger.sessions() == ["a", "b"] and ledger.last_session() == "a"
    ledger.record_call(CallRecord(**{**b1.__dict__, "real_input_tokens": 50, "real_cached_tokens": 10}))
    assert ledger.last_session() == "b"  # recorded again with the provider's usage: the newest row
    assert ledger.calls("a") == [a1, a2]
    assert ledger.calls("b")[0].real_cached_tokens == 10 and len(ledger.calls("b")) == 1
    assert [r.session_id for r in ledger.recent_calls(2)] == ["a", "b"]
    assert ledger.totals("a").calls == 2 and ledger.totals("a").prefix_breaks == 1
    assert ledger.forget("a") == 2 and ledger.sessions() == ["b"]


def test_the_lock_serialises_one_session_and_leaves_others_free(stores: Stores) -> None:
    states = _states(stores)
    order: list[str] = []
    inside = threading.Event()

    def holder() -> None:
        with states.lock("s"):
            inside.set()
            time.sleep(0.3)
            order.append("first out")

    t = threading.Thread(target=holder)
    t.start()
    assert inside.wait(10)
    with states.lock("other"):  # another session: no wait
        order.append("other")
    started = time.monotonic()
    with states.lock("s"):  # the same one: waits for the holder
        order.append("second in")
    t.join(10)
    assert order == ["other", "first out", "second in"]
    assert time.monotonic() - started > 0.1


@pytest.mark.postgres
def test_migrations_run_once_and_a_newer_schema_is_refused(pg_url: str) -> None:
    import psycopg

    from lightmem_plugin.store.postgres import SCHEMA_VERSION, PgBackend

    backends: list[PgBackend] = []
    threads = [threading.Thread(target=lambda: backends.append(PgBackend(pg_url, 2))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(backends) == 4 and all(b.schema_version == SCHEMA_VERSION for b in backends)
    for b in backends:
        b.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute("SELECT version, name FROM lm_schema_migrations").fetchall()
        assert [r[0] for r in rows] == [SCHEMA_VERSION] == [1]
        conn.execute("INSERT INTO lm_schema_migrations (version, name) VALUES (99, 'from the future')")
    with pytest.raises(StoreUnavailable, match=r"schema version 99, newer than this lightmem2 knows \(1\)"):
        PgBackend(pg_url)


@pytest.mark.postgres
def test_an_unreachable_url_says_which_with_the_password_hidden(pg_cluster: object) -> None:
    from pg_cluster import free_port

    url = f"postgresql://team:s3cret@127.0.0.1:{free_port()}/lm"
    cfg = Config.model_validate({"store": {"url": url, "connectTimeoutS": 2}})
    with pytest.raises(StoreUnavailable) as err:
        open_stores(cfg)
    text = str(err.value)
    assert "s3cret" not in text and "postgresql://team:***@127.0.0.1" in text
    assert "cannot connect to" in text and "check store.url" in text
    assert isinstance(err.value, StoreError)  # the fail-open paths that pass a broken store by


@pytest.mark.postgres
def test_the_lock_holds_across_pools_and_a_dead_holder_releases_it(pg_url: str) -> None:
    from lightmem_plugin.store.postgres import PgBackend, PgStateStore

    a, b = PgBackend(pg_url, 2), PgBackend(pg_url, 2, lock_timeout_s=0.5)
    try:
        sa, sb = PgStateStore(a), PgStateStore(b)
        with sa.lock("s"):
            # inside the lock the holder's queries run on the connection that holds it
            assert sa.write("s", {"memo": [("k", "v", 0)]}, {}, 0) == 1
            with (
                pytest.raises(StoreUnavailable, match=r"session 's' stayed locked by another process"),
                sb.lock("s"),
            ):
                pass
            assert sb.version("s") == 1  # reads need no lock
        with sb.lock("s"):  # released: the other process gets it at once
            pass
        # a holder whose connection dies (its process was killed) frees the session
        cm = sa.lock("s")
        cm.__enter__()
        held = a._held.conns["s"]
        held.pgconn.finish()  # the socket closes as when a process dies
        with sb.lock("s"):
            pass
        cm.__exit__(None, None, None)  # its release cannot reach the server: the connection is dropped
        assert held.closed and "s" not in a._held.conns
    finally:
        a.close()
        b.close()
