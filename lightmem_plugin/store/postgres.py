"""The PostgreSQL backend: session state and ledger shared by every ``serve`` process of a team gateway.

Why PostgreSQL: several processes on several machines must see one session's decisions at once, with
row-level transactions and locks a file on one disk cannot give. psycopg 3 with a connection pool
(``store.poolSize`` per process). The schema is versioned (``lm_schema_migrations``): each process
applies the migrations it knows and the database lacks on start, under an advisory lock so a fleet
starting together migrates once; a database migrated by a newer lightmem2 is refused with the fix.

Serialising a session across processes: :meth:`PgStateStore.lock` takes a session-level advisory lock
(``pg_advisory_lock`` on a 64-bit hash of the stored id) on one pooled connection, held for the whole
call; the call's reads and writes of that session (state and ledger) go through that same connection,
so a process needs one connection per session in flight, never two (no pool deadlock). A process that
dies holding a lock loses its connection, and PostgreSQL releases the lock with it.

Values are the same JSON text the embedded store keeps, in ``text`` columns: what is read back is
exactly what was written.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import StoreUnavailable
from ..ledger import _COLUMNS, CallRecord, LedgerReads, _record, _redacted, _row
from ..session_state import blob_rows, entry_rows, load_rows, lock_key, stale
from .base import StoredSession
from .sealed_values import StateCipher

T = TypeVar("T")

MIGRATION_LOCK = 0x6C6D32  # "lm2": the advisory lock a starting process migrates under
MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "session state and ledger",
        """
CREATE TABLE lm_session_entries (session_id text NOT NULL, ns text NOT NULL, key text NOT NULL,
    value text NOT NULL, seq bigint NOT NULL, PRIMARY KEY (session_id, ns, key));
CREATE INDEX lm_session_entries_by_seq ON lm_session_entries (session_id, seq);
CREATE TABLE lm_session_blobs (session_id text NOT NULL, name text NOT NULL, value text NOT NULL,
    PRIMARY KEY (session_id, name));
CREATE TABLE lm_session_versions (session_id text PRIMARY KEY, version bigint NOT NULL);
CREATE TABLE lm_calls (seq bigserial PRIMARY KEY, session_id text NOT NULL,
    writer text NOT NULL DEFAULT '', call_index integer NOT NULL, mode text NOT NULL,
    input_tokens bigint NOT NULL, baseline_tokens bigint NOT NULL, hit_tokens bigint NOT NULL,
    miss_tokens bigint NOT NULL, write_tokens bigint NOT NULL, real_cache_read bigint,
    real_cache_creation bigint, real_cached_tokens bigint, real_input_tokens bigint,
    k double precision NOT NULL, k_baseline double precision NOT NULL, saved_by_pass text NOT NULL,
    evicted_tokens bigint NOT NULL, break_message integer, break_offset integer, break_reason text,
    errors text NOT NULL, last_error text, UNIQUE (session_id, writer, call_index));
CREATE INDEX lm_calls_by_session ON lm_calls (session_id, call_index);
""",
    ),
    (
        2,
        "artifact registry",
        """
CREATE TABLE lm_artifacts (key text PRIMARY KEY, data bytea NOT NULL, size bigint NOT NULL,
    last_used bigint NOT NULL);
CREATE INDEX lm_artifacts_lru ON lm_artifacts (last_used, key);
CREATE SEQUENCE lm_artifacts_clock;
""",
    ),
    (
        3,
        "artifact owners (team gateway users)",
        """
CREATE TABLE lm_artifact_owners (owner text NOT NULL, key text NOT NULL, PRIMARY KEY (owner, key));
CREATE INDEX lm_artifact_owners_by_key ON lm_artifact_owners (key);
""",
    ),
    (
        4,
        "search index (lightmem2 search, the gateway's search route)",
        """
CREATE TABLE lm_search_keys (key text PRIMARY KEY);
CREATE TABLE lm_search_docs (key text NOT NULL REFERENCES lm_search_keys ON DELETE CASCADE,
    session text NOT NULL, seq bigint NOT NULL, PRIMARY KEY (key, session));
CREATE INDEX lm_search_docs_by_session ON lm_search_docs (session, key);
CREATE TABLE lm_search_lines (id bigserial PRIMARY KEY,
    key text NOT NULL REFERENCES lm_search_keys ON DELETE CASCADE, line_no integer NOT NULL,
    text text NOT NULL, words tsvector NOT NULL);
CREATE INDEX lm_search_lines_words ON lm_search_lines USING gin (words);
CREATE INDEX lm_search_lines_by_key ON lm_search_lines (key);
CREATE SEQUENCE lm_search_clock;
""",
    ),
    (
        5,
        "short artifact names (the key prefix a stub names, claimed once for the fleet)",
        """
CREATE TABLE lm_artifact_names (name text PRIMARY KEY, key text NOT NULL);
""",
    ),
)
"""(version, what it adds, SQL), in order. Never edit an applied one: append the next version."""
SCHEMA_VERSION = MIGRATIONS[-1][0]


def safe_url(url: str) -> str:
    """``url`` with its password hidden (for messages and ``doctor``)."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


class PgBackend:
    """One pool to one database, migrated on open; shared by the state store and the ledger."""

    def __init__(
        self, url: str, pool_size: int = 20, connect_timeout_s: float = 10.0, lock_timeout_s: float = 60.0
    ) -> None:
        self.url = url
        self.where = safe_url(url)
        self.lock_timeout_s = lock_timeout_s
        self._held = threading.local()  # stored session id -> the connection its lock is held on
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(connect_timeout_s))) as c:
                self.schema_version = migrate(c, self.where)
        except psycopg.Error as err:
            raise self.unavailable("cannot connect to", err) from None
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True, "connect_timeout": max(1, int(connect_timeout_s))},
            timeout=connect_timeout_s + lock_timeout_s,
            open=False,
            name="lightmem2",
            reset=_reset,
        )
        try:
            self.pool.open(wait=True, timeout=connect_timeout_s)
        except PoolTimeout:
            self.pool.close()
            raise StoreUnavailable(
                f"the session store {self.where} accepted one connection but the pool could not open "
                f"within {connect_timeout_s:g} s; check the server's max_connections and store.poolSize"
            ) from None

    def unavailable(self, what: str, err: BaseException) -> StoreUnavailable:
        """The one-line error for a failed database operation: the URL, the cause and the fix."""
        cause = " ".join(str(err).split()) or type(err).__name__
        return StoreUnavailable(
            f"{what} the session store {self.where} ({cause}); check store.url and that PostgreSQL is "
            "running and reachable from this host, or remove store.url to use the embedded store"
        )

    def run(self, session_key: str | None, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``work(connection)`` on the connection holding ``session_key``'s lock in this thread, else
        on a pooled one; database errors become :class:`StoreUnavailable`."""
        held = getattr(self._held, "conns", {}).get(session_key) if session_key else None
        try:
            if held is not None:
                return work(held)
            with self.pool.connection() as conn:
                return work(conn)
        except PoolTimeout as err:
            raise self.unavailable("no free connection (store.poolSize) to", err) from None
        except psycopg.Error as err:
            raise self.unavailable("a query failed on", err) from None

    def stream(self, sql: str, params: Sequence[Any], batch: int = 500) -> Generator[tuple[Any, ...]]:
        """The rows of a read-only ``sql``, fetched ``batch`` at a time through a server-side cursor
        (a caller that stops early does not read the rest); database errors become
        :class:`StoreUnavailable`. Close it (``contextlib.closing``) to give the connection back."""
        try:
            with self.pool.connection() as conn, conn.transaction(), conn.cursor(name="lm_stream") as cur:
                cur.itersize = batch
                cur.execute(sql, params)
                yield from cur
        except PoolTimeout as err:
            raise self.unavailable("no free connection (store.poolSize) to", err) from None
        except psycopg.Error as err:
            raise self.unavailable("a query failed on", err) from None

    @contextlib.contextmanager
    def session_lock(self, session_key: str) -> Iterator[None]:
        """Hold an advisory lock on ``session_key``; this thread's work on it uses the same connection."""
        conns: dict[str, psycopg.Connection[Any]] = self._held.__dict__.setdefault("conns", {})
        if session_key in conns:  # re-entered by the same thread: it holds the lock already
            yield
            return
        key = lock_key(session_key)
        try:
            with self.pool.connection() as conn:
                conn.execute(
                    "SELECT set_config('lock_timeout', %s, false)", (f"{int(self.lock_timeout_s * 1000)}ms",)
                )
                try:
                    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
                except psycopg.errors.LockNotAvailable:
                    raise StoreUnavailable(
                        f"session {session_key!r} stayed locked by another process for over "
                        f"{self.lock_timeout_s:g} s in {self.where}; a call of it may hang upstream, or raise "
                        "store.lockTimeoutS"
                    ) from None
                conns[session_key] = conn
                try:
                    yield
                finally:
                    del conns[session_key]
                    _release(conn, key)
        except PoolTimeout as err:
            raise self.unavailable("no free connection (store.poolSize) to", err) from None
        except psycopg.OperationalError as err:
            raise self.unavailable("lost the connection to", err) from None

    def close(self) -> None:
        """Close the pool."""
        self.pool.close()


def _release(conn: psycopg.Connection[Any], key: int) -> None:
    """Unlock ``key``; a connection that cannot say so is closed (the server then drops its locks),
    never handed back to the pool still holding one."""
    try:
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            return
    except psycopg.Error:
        pass
    conn.close()


def _reset(conn: psycopg.Connection[Any]) -> None:
    """Run on every connection the pool takes back: no advisory lock survives into its next use."""
    conn.execute("SELECT pg_advisory_unlock_all()")


def migrate(conn: psycopg.Connection[Any], where: str) -> int:
    """Apply the migrations ``conn``'s database lacks, once across processes; the schema version."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS lm_schema_migrations (version integer PRIMARY KEY, "
            "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM lm_schema_migrations").fetchone()
        current = int(row[0]) if row else 0
        if current > SCHEMA_VERSION:
            raise StoreUnavailable(
                f"the session store {where} has schema version {current}, newer than this lightmem2 "
                f"knows ({SCHEMA_VERSION}); upgrade lightmem2 on this host to the fleet's version"
            )
        for version, name, sql in MIGRATIONS:
            if version > current:
                conn.execute(sql.encode())  # our own literal DDL: several statements, no parameters
                conn.execute(
                    "INSERT INTO lm_schema_migrations (version, name) VALUES (%s, %s)", (version, name)
                )
    return SCHEMA_VERSION


class PgStateStore:
    """:class:`~lightmem_plugin.store.base.SessionStates` in PostgreSQL (same rows as the SQLite file)."""

    shared = True

    def __init__(self, backend: PgBackend, prefix: str = "", cipher: StateCipher | None = None) -> None:
        self.backend = backend
        self.prefix = prefix
        self.cipher = cipher or StateCipher.from_home()

    @property
    def where(self) -> str:
        """The database URL, password hidden."""
        return self.backend.where

    def load(self, session_id: str) -> StoredSession:
        """Everything saved for ``session_id``, read in one snapshot."""
        sid = self.prefix + session_id

        def work(conn: psycopg.Connection[Any]) -> StoredSession:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                rows = conn.execute(
                    "SELECT ns, key, value FROM lm_session_entries WHERE session_id = %s ORDER BY seq",
                    (sid,),
                ).fetchall()
                blobs = conn.execute(
                    "SELECT name, value FROM lm_session_blobs WHERE session_id = %s", (sid,)
                ).fetchall()
                version = _version(conn, sid)
            return load_rows(StoredSession(), rows, blobs, version, self.cipher)

        return self.backend.run(sid, work)

    def version(self, session_id: str) -> int:
        """How many writes the session has had (0: none)."""
        sid = self.prefix + session_id
        return self.backend.run(sid, lambda conn: _version(conn, sid))

    def write(
        self,
        session_id: str,
        entries: Mapping[str, list[tuple[str, Any, int]]],
        blobs: Mapping[str, str],
        expect: int | None = None,
    ) -> int:
        """New entries and changed blobs in one transaction; the new version (see the protocol)."""
        sid = self.prefix + session_id
        rows = entry_rows(sid, entries, self.cipher)
        if not rows and not blobs:
            return self.version(session_id)

        def work(conn: psycopg.Connection[Any]) -> int:
            with conn.transaction():
                conn.execute("INSERT INTO lm_session_versions VALUES (%s, 0) ON CONFLICT DO NOTHING", (sid,))
                row = conn.execute(
                    "SELECT version FROM lm_session_versions WHERE session_id = %s FOR UPDATE", (sid,)
                ).fetchone()
                found = int(row[0]) if row else 0
                if expect is not None and found != expect:
                    raise stale(session_id, expect, found)
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO lm_session_entries VALUES (%s, %s, %s, %s, %s) ON CONFLICT "
                        "(session_id, ns, key) DO UPDATE SET value = EXCLUDED.value, seq = EXCLUDED.seq",
                        rows,
                    )
                    cur.executemany(
                        "INSERT INTO lm_session_blobs VALUES (%s, %s, %s) ON CONFLICT (session_id, name) "
                        "DO UPDATE SET value = EXCLUDED.value",
                        blob_rows(sid, blobs, self.cipher),
                    )
                conn.execute(
                    "UPDATE lm_session_versions SET version = %s WHERE session_id = %s", (found + 1, sid)
                )
            return found + 1

        return self.backend.run(sid, work)

    def lock(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """An advisory lock on the session, against every process on this database."""
        return self.backend.session_lock(self.prefix + session_id)

    def forget(self, session_id: str) -> None:
        """Drop everything saved for a session (its version moves on, so holders reload)."""
        sid = self.prefix + session_id

        def work(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute("DELETE FROM lm_session_entries WHERE session_id = %s", (sid,))
                conn.execute("DELETE FROM lm_session_blobs WHERE session_id = %s", (sid,))
                conn.execute(
                    "UPDATE lm_session_versions SET version = version + 1 WHERE session_id = %s", (sid,)
                )

        self.backend.run(sid, work)

    def sessions(self) -> list[str]:
        """Ids of this writer's sessions with saved state (without the prefix), sorted."""
        from ..session_state import WRITER_PREFIXES

        rows = self.backend.run(
            None,
            lambda conn: conn.execute(
                "SELECT DISTINCT session_id FROM lm_session_blobs ORDER BY session_id"
            ).fetchall(),
        )
        ids = [str(r[0]) for r in rows]
        if self.prefix:
            return [i[len(self.prefix) :] for i in ids if i.startswith(self.prefix)]
        return [i for i in ids if not i.startswith(WRITER_PREFIXES)]

    def close(self) -> None:
        """Nothing of its own to close: the backend's pool is closed by its owner."""


def _version(conn: psycopg.Connection[Any], sid: str) -> int:
    row = conn.execute("SELECT version FROM lm_session_versions WHERE session_id = %s", (sid,)).fetchone()
    return int(row[0]) if row else 0


_UPSERT = (
    f"INSERT INTO lm_calls ({', '.join(_COLUMNS)}) VALUES ({', '.join('%s' for _ in _COLUMNS)}) "
    "ON CONFLICT (session_id, writer, call_index) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in _COLUMNS)
    + ", seq = nextval(pg_get_serial_sequence('lm_calls', 'seq'))"
)
"""Recording a (session, writer, call) again replaces it and makes it the newest row, as SQLite's
``INSERT OR REPLACE`` does in the embedded ledger."""


class PgLedger(LedgerReads):
    """:class:`~lightmem_plugin.store.base.CallLedger` in PostgreSQL (``lm_calls``)."""

    def __init__(self, backend: PgBackend) -> None:
        self.backend = backend
        self.where = backend.where

    def __enter__(self) -> PgLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record_call(self, rec: CallRecord) -> None:
        """Store one call; recording the same (session, writer, call index) again replaces it."""
        row = _row(_redacted(rec))
        self.backend.run(rec.session_id, lambda conn: conn.execute(_UPSERT, row))

    def forget(self, session_id: str) -> int:
        """Delete every row of ``session_id``; returns how many there were."""
        cur = self.backend.run(
            session_id, lambda conn: conn.execute("DELETE FROM lm_calls WHERE session_id = %s", (session_id,))
        )
        return int(cur.rowcount)

    def sessions(self) -> list[str]:
        """Session ids, in the order their first call was recorded."""
        sql = "SELECT session_id FROM lm_calls GROUP BY session_id ORDER BY MIN(seq)"
        return [str(r[0]) for r in self.backend.run(None, lambda conn: conn.execute(sql).fetchall())]

    def last_session(self) -> str | None:
        """The session of the most recently recorded call, None when the ledger is empty."""
        sql = "SELECT session_id FROM lm_calls ORDER BY seq DESC LIMIT 1"
        row = self.backend.run(None, lambda conn: conn.execute(sql).fetchone())
        return None if row is None else str(row[0])

    def calls(self, session_id: str) -> list[CallRecord]:
        """The calls of one session, by call index."""
        sql = "SELECT * FROM lm_calls WHERE session_id = %s ORDER BY call_index, seq"

        def work(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
            with conn.cursor(row_factory=dict_row) as cur:
                return cur.execute(sql, (session_id,)).fetchall()

        return [_record(r) for r in self.backend.run(session_id, work)]

    def recent_calls(self, limit: int = 200) -> list[CallRecord]:
        """The last ``limit`` calls recorded, across sessions, oldest first."""

        def work(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
            with conn.cursor(row_factory=dict_row) as cur:
                return cur.execute("SELECT * FROM lm_calls ORDER BY seq DESC LIMIT %s", (limit,)).fetchall()

        return [_record(r) for r in reversed(self.backend.run(None, work))]

    def close(self) -> None:
        """Nothing of its own to close: the backend's pool is closed by its owner."""
