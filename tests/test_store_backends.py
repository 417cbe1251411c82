"""The storage interface, on both backends: the same writes read back the same, versions, locks.

Every test runs on the embedded store (SQLite in the data dir) and on PostgreSQL (a throwaway cluster,
``make pg``; skipped without PostgreSQL). The PostgreSQL-only ones cover migrations, a bad URL and the
advisory lock across separate pools (two processes, as far as the database can tell).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lightmem_plugin.config import Config
from lightmem_plugin.errors import ArtifactCorrupt, ArtifactNotFound, StaleState, StoreError, StoreUnavailable
from lightmem_plugin.store import CallLedger, SessionStates, Stores, open_stores
from lightmem_plugin.store.ledger import CallRecord, Ledger
from lightmem_plugin.store.registry import SHORT_KEY_CHARS, Registry, content_key
from lightmem_plugin.store.sealing import OVERHEAD, TEXT_MARK, Sealer
from lightmem_plugin.store.session_state import StateStore

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


def _raw_values(states: SessionStates) -> list[str]:
    """Every stored value of the state tables, as the database holds it."""
    queries = ("SELECT value FROM {}entries", "SELECT value FROM {}blobs")
    backend = getattr(states, "backend", None)
    if backend is None:
        import sqlite3

        with contextlib.closing(sqlite3.connect(states.where)) as db:
            return [str(r[0]) for q in queries for r in db.execute(q.format(""))]
    return [
        str(r[0])
        for q in queries
        for r in backend.run(None, lambda c, q=q: c.execute(q.format("lm_session_")).fetchall())
    ]


def test_values_are_sealed_at_rest_and_a_store_without_key_redacts_them(stores: Stores) -> None:
    """The store holds what the model saw (reduced outputs, the record quoting the user): before, its
    values were plain JSON, so a token at the head of an output was readable in the table."""
    from lightmem_plugin.store.sealed_values import StateCipher

    secret = "AKIA" + "Q7X2M9P4K8W3R6T1"
    shown = f"export TOKEN={secret}\n[lightmem2: 2,998 lines archived as abc]"
    states = _states(stores)
    states.write("s", {"memo": [("k", shown, 0)]}, {"core": json.dumps({"goal": f"deploy, key {secret}"})}, 0)
    raw = _raw_values(states)
    assert raw and all(v.startswith(TEXT_MARK) for v in raw) and not any(secret in v for v in raw)
    got = states.load("s")
    assert got.maps["memo"]["k"] == shown and got.blobs["core"] == {"goal": f"deploy, key {secret}"}
    other = Sealer(b"\x01" * 32)
    states.cipher = StateCipher(other)  # type: ignore[attr-defined]
    with pytest.raises(ArtifactCorrupt, match="sealed with another archive key"):
        states.load("s")
    states.cipher = StateCipher(None)  # type: ignore[attr-defined]  # encryption off, or no key
    states.write("t", {"memo": [("k", shown, 0)]}, {"core": json.dumps([f"key {secret}"])}, 0)
    stored = states.load("t")
    assert stored.maps["memo"]["k"] == shown.replace(secret, "[REDACTED:aws_access_key_id]")
    assert stored.blobs["core"] == ["key [REDACTED:aws_access_key_id]"]
    assert not any(secret in v for v in _raw_values(states))


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
        errors={"reduction": 1}, last_error="boom", writer="w1", model="claude-sonnet-4-5",
        output_tokens=40, real_cache_write_1h=7, cost_usd=0.001234, saved_usd=0.0005,
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
def test_a_ledger_from_before_money_keeps_its_rows_with_no_money(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from lightmem_plugin.store import postgres
    from lightmem_plugin.store.ledger import _V2_COLUMNS
    from lightmem_plugin.store.postgres import MIGRATIONS, PgBackend, PgLedger

    monkeypatch.setattr(postgres, "MIGRATIONS", MIGRATIONS[:5])  # schema 5: the ledger before money
    monkeypatch.setattr(postgres, "SCHEMA_VERSION", 5)
    PgBackend(pg_url, 2).close()
    monkeypatch.undo()
    old = {c: 0 for c in _V2_COLUMNS} | {"session_id": "old", "writer": "", "mode": "normal"}
    old |= {"call_index": 1, "saved_by_pass": "{}", "errors": "{}", "k": 12.5, "k_baseline": 20.0}
    old |= {"break_message": None, "break_offset": None, "break_reason": None, "last_error": None}
    for name in ("real_cache_read", "real_cache_creation", "real_cached_tokens", "real_input_tokens"):
        old[name] = None
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO lm_calls ({', '.join(old)}) VALUES ({', '.join('%s' for _ in old)})",
            list(old.values()),
        )
    backend = PgBackend(pg_url, 2)  # migrates to 7
    try:
        ledger = PgLedger(backend)
        (row,) = ledger.calls("old")
        assert (row.k, row.k_baseline) == (12.5, 20.0)
        assert (row.model, row.output_tokens, row.cost_usd, row.saved_usd) == (None, None, None, None)
        totals = ledger.totals("old")
        assert totals.cost_usd is None and totals.unpriced_calls == 1
        new = CallRecord("old", 2, "normal", 10, 10, 0, 10, model="gpt-5", cost_usd=0.5, saved_usd=0.25)
        ledger.record_call(new)
        assert ledger.calls("old")[1] == new
        assert ledger.totals("old").cost_usd == 0.5 and ledger.totals("old").priced_calls == 1
    finally:
        backend.close()


@pytest.mark.postgres
def test_migrations_run_once_in_order_and_a_newer_schema_is_refused(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from lightmem_plugin.store import postgres
    from lightmem_plugin.store.postgres import MIGRATIONS, SCHEMA_VERSION, PgBackend

    # a database an older lightmem2 made (migration 1 only) is brought forward on open
    monkeypatch.setattr(postgres, "MIGRATIONS", MIGRATIONS[:1])
    monkeypatch.setattr(postgres, "SCHEMA_VERSION", 1)
    PgBackend(pg_url, 2).close()
    monkeypatch.undo()
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
        rows = conn.execute("SELECT version FROM lm_schema_migrations ORDER BY version").fetchall()
        assert [r[0] for r in rows] == [v for v, _name, _sql in MIGRATIONS] == [1, 2, 3, 4, 5, 6, 7, 8]
        assert conn.execute("SELECT COUNT(*) FROM lm_artifacts").fetchone() == (0,)
        conn.execute("INSERT INTO lm_schema_migrations (version, name) VALUES (99, 'from the future')")
    with pytest.raises(StoreUnavailable, match=r"schema version 99, newer than this lightmem2 knows \(8\)"):
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


@pytest.fixture(params=BACKENDS)
def registry(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Registry]:
    files = Registry(tmp_path / "artifacts", max_bytes=1 << 20, sealer=Sealer(bytes(range(32))))
    if request.param == "embedded":
        yield files
        return
    opened = open_stores(Config.model_validate({"store": {"url": request.getfixturevalue("pg_url")}}))
    try:
        yield opened.registry_like(files)
    finally:
        opened.close()


def test_artifacts_are_content_addressed_byte_exact_and_stored_once(registry: Registry) -> None:
    told: list[str] = []
    registry.on_put = lambda key, data: told.append(key)
    data = b"line 1\n\x00\xff\xfe not utf-8\r\nAKIAIOSFODNN7EXAMPLE\n"
    key = registry.put(data)
    assert key == content_key(data) and registry.put(data) == key and told == [key]
    assert registry.get(key) == data == registry.peek(key) and registry.exists(key)
    assert registry.keys() == {key} and registry.count() == 1
    assert registry.size_bytes() == len(data) + OVERHEAD  # sealed at rest
    assert registry.recover(key, "2:2") == "\x00\udcff\udcfe not utf-8\r\n"
    with pytest.raises(ArtifactNotFound, match=r"no artifact 0+"):
        registry.get("0" * 32)


def test_a_stub_names_a_short_prefix_claimed_once_and_it_recovers_that_artifact(registry: Registry) -> None:
    """12 hex chars instead of 32 (7.6 tokens instead of 18.9 in every stub, re-read on every call);
    a prefix another key claimed first is never shared: the second key's name grows a char."""
    data = b"the archived original\n"
    key = registry.put(data)
    name = registry.put_short(data)
    assert name == key[:SHORT_KEY_CHARS] and registry.short(key) == name
    assert registry.recover(name) == registry.recover(key) == data.decode() and registry.exists(name)
    assert registry.resolve(name) == key and registry.resolve(key) == key
    # another artifact whose key starts like this one (forged here: a real collision is 1 in 2^48)
    twin = name + "f" * (32 - SHORT_KEY_CHARS)
    assert registry._claim(name, twin) == key  # the claim stays with the first key
    assert registry._claim(twin[: SHORT_KEY_CHARS + 1], twin) == twin
    # once collected, its name says "not found", never another artifact's bytes
    registry.max_bytes = 0
    assert registry.gc() == [key]
    with pytest.raises(ArtifactNotFound, match=f"no artifact {key}"):
        registry.recover(name)
    with pytest.raises(ArtifactNotFound, match="12 to 32 hex chars"):
        registry.recover(name[:8])
    with pytest.raises(ArtifactNotFound, match=f"no artifact {'0' * 12}"):
        registry.recover("0" * 12)


def test_gc_drops_the_least_recently_used_and_never_a_live_key(registry: Registry) -> None:
    registry.max_bytes = 3 * (1000 + OVERHEAD)
    keys = [registry.put(bytes([65 + i]) * 1000) for i in range(5)]
    registry.get(keys[0])  # recent again
    assert registry.gc(live_keys=[keys[1]]) == [keys[2], keys[3]]
    assert registry.keys() == {keys[0], keys[1], keys[4]}


@pytest.mark.postgres
def test_a_damaged_artifact_row_is_refused(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    opened = open_stores(Config.model_validate({"store": {"url": pg_url}}))
    try:
        registry = opened.registry_like(Registry(tmp_path / "a", sealer=Sealer(bytes(32))))
        key = registry.put(b"original")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            (stored,) = conn.execute("SELECT data FROM lm_artifacts").fetchone() or (b"",)
            assert b"original" not in bytes(stored)  # sealed in the database too
            conn.execute("UPDATE lm_artifacts SET data = %s", (b"x" + bytes(stored)[1:],))
        with pytest.raises(ArtifactCorrupt):
            registry.get(key)
    finally:
        opened.close()


@pytest.mark.postgres
def test_doctor_checks_the_database(pg_url: str) -> None:
    from pg_cluster import free_port

    from lightmem_plugin.commands.doctor import check_database

    ok = check_database(Config.model_validate({"store": {"url": pg_url, "poolSize": 50}}))
    assert ok.status == "pass", ok
    assert (
        "reachable, schema version 8, 0 sessions with state, search index of 0 artifacts (0 stale)"
        in ok.detail
    )
    assert "pool 50 connections per process, server max_connections 300 (room for 6 processes)" in ok.detail
    big = check_database(Config.model_validate({"store": {"url": pg_url, "poolSize": 400}}))
    assert big.status == "fail" and big.fix.startswith("lower store.poolSize below 300")
    url = f"postgresql://u:pw@127.0.0.1:{free_port()}/x"
    down = check_database(Config.model_validate({"store": {"url": url, "connectTimeoutS": 2}}))
    assert down.status == "fail" and "cannot connect to the session store postgresql://u:***@" in down.detail
    assert "pw" not in down.detail and down.fix.startswith("check store.url")
