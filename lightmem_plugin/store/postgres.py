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

A database that stops answering (PostgreSQL stopped by SIGSTOP, or the network to it cut without a
reset) costs a call at most ``1.5 x store.responseTimeoutS``, never the length of the outage: see
:class:`Liveness` (every wait of a pooled connection is watched; a server that answers neither that wait
nor a ``SELECT 1`` of its own counts as down, and every operation fails at once, so calls pass through
unreduced, until it answers again). A connection the server closed (a restart) is never handed out:
:meth:`PgBackend._checkout` looks at its socket first, at no round trip.

Values are the same JSON text the embedded store keeps, in ``text`` columns: what is read back is
exactly what was written.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.abc import PQGen
from psycopg.rows import TupleRow, dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import StoreUnavailable
from .base import StoredSession
from .ledger import _COLUMNS, CallRecord, LedgerReads, _record, _redacted, _row
from .sealed_values import StateCipher
from .session_state import blob_rows, entry_rows, load_rows, lock_key, stale

T = TypeVar("T")
RV = TypeVar("RV")

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
    (
        6,
        "money beside K (the model, output tokens, 1-hour cache writes, USD billed and saved)",
        """
ALTER TABLE lm_calls ADD COLUMN model text, ADD COLUMN output_tokens bigint,
    ADD COLUMN real_cache_write_1h bigint, ADD COLUMN cost_usd double precision,
    ADD COLUMN saved_usd double precision;
""",
    ),
    (
        7,
        "cold starts (why a call met a cold provider cache)",
        """
ALTER TABLE lm_calls ADD COLUMN cold_start text;
""",
    ),
    (
        8,
        "the causes of cache misses (each request's shape against the previous one, uncached money)",
        """
ALTER TABLE lm_calls ADD COLUMN miss_shape text, ADD COLUMN uncached_usd double precision;
""",
    ),
)
"""(version, what it adds, SQL), in order. Never edit an applied one: append the next version."""
SCHEMA_VERSION = MIGRATIONS[-1][0]


def safe_url(url: str) -> str:
    """``url`` with its password hidden (for messages and ``doctor``)."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


RETRY_S = 0.5
"""While the database counts as down, how often it is asked again (in the background: no call waits)."""
CHECKOUT_SLICE_S = 0.05
"""How often a call waiting for a pooled connection looks again whether to stop waiting."""
SERVER_KEEPALIVES = {"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"}
"""The server's side of each pooled connection: one this process gave up on in a network partition (its
close lost on the way) is found dead within 25 s and the session locks it held are released, instead of
after the OS default of two hours (every call of that session meanwhile waited store.lockTimeoutS)."""


def _cut(fd: int) -> None:
    """Shut down the socket ``fd``: a wait on it in another thread returns at once, as on a connection
    the server closed, and nothing of that connection is freed under the waiting thread's feet."""
    try:
        dup = os.dup(fd)
    except OSError:
        return
    try:
        sock = socket.socket(fileno=dup)
    except OSError:
        os.close(dup)
        return
    with sock, contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _closed_by_server(conn: psycopg.Connection[Any]) -> bool:
    """True when an idle connection is closed, or has something to read: the server ended it (a
    restart, a terminated backend), which it says before any query is sent. No round trip."""
    if conn.closed:
        return True
    try:
        fd = conn.fileno()
    except psycopg.Error:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])


class Unanswered(psycopg.OperationalError):
    """A wait :class:`Liveness` cut: the database did not answer (the message says how long)."""


class _Prober:
    """Asks the database ``SELECT 1`` on a connection of its own, in a thread of its own, so that the
    asker waits no longer than it chooses (a question to a stopped server never returns by itself).

    Never on a pooled connection: a pool busy with slow calls must not read as a dead server. An answer
    that comes after the asker gave up (a connect that waited out a stopped server) still reaches
    ``on_answer``: the database counts as back at once, not at the next question.
    """

    def __init__(
        self,
        url: str,
        connect_timeout_s: float,
        conn: psycopg.Connection[Any] | None,
        on_answer: Callable[[], object],
    ) -> None:
        self.url = url
        self.on_answer = on_answer
        self.connect_timeout = max(2, int(connect_timeout_s))
        self._conn = conn
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._box: list[BaseException | None] = []  # what the current question thread answered
        self._answer: tuple[float, str | None] = (0.0, None)

    def ask(self, limit_s: float) -> str | None:
        """None when the database answered within ``limit_s``, else why not; one question at a time
        (whoever waited for another's gets its answer; a question still under way from before, such as
        a reconnect, is waited for rather than taken for silence)."""
        called = time.monotonic()
        with self._lock:
            if self._answer[0] >= called:
                return self._answer[1]
            if self._thread is None or not self._thread.is_alive():
                self._box = []
                self._thread = threading.Thread(
                    target=self._question, args=(self._box,), name="lightmem2-pg-probe", daemon=True
                )
                self._thread.start()
            self._thread.join(limit_s)
            why = self._why(self._box, limit_s)
            self._answer = (time.monotonic(), why)
            return why

    def _why(self, box: list[BaseException | None], limit_s: float) -> str | None:
        """The answer a question thread left in ``box``; none yet: its query is cut (a connect in
        flight ends at connect_timeout) and the database counts as silent."""
        if not box:
            conn = self._conn
            if conn is not None:
                with contextlib.suppress(psycopg.Error):
                    _cut(conn.fileno())
            return f"no answer to SELECT 1 within {limit_s:g} s"
        err = box[0]
        return (
            None if err is None else "SELECT 1 failed: " + (" ".join(str(err).split()) or type(err).__name__)
        )

    def _question(self, box: list[BaseException | None]) -> None:
        try:
            conn = self._conn
            if conn is None or _closed_by_server(conn):
                self._conn = None
                if conn is not None:
                    conn.close()
                conn = psycopg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)
                self._conn = conn
            conn.execute("SELECT 1")
        except Exception as err:  # the answer is the error: the asker reports it
            box.append(err)
            return
        box.append(None)
        self.on_answer()

    def close(self) -> None:
        """Close its connection; one a question is still waiting on is only shut down (that question
        ends with an error; closing it under the thread would free what the thread still reads)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._thread is not None and self._thread.is_alive():
            with contextlib.suppress(psycopg.Error):
                _cut(conn.fileno())
            return
        conn.close()


class Liveness:
    """Whether the database answers, and the watchdog that ends a wait on one that does not.

    Why: PostgreSQL stopped (SIGSTOP), or the network to it cut without a reset, leaves every socket
    open and silent (the kernel acknowledges, nothing answers), and a query already sent waited as long
    as the outage: 25 s and 100 s per call measured, on every gateway process, while ``/healthz`` said
    ok; neither ``connect_timeout`` nor ``lock_timeout`` bounds it, and a server-side timeout cannot
    fire on a server that does not run. So every network wait of a pooled connection is armed here
    (:class:`WatchedConnection`). When one has gone ``limit_s`` with no answer on any connection since
    it began, the server is asked ``SELECT 1`` on a connection of its own (:class:`_Prober`, at most
    ``limit_s / 2``): if it answers, the wait goes on (a slow query on a live server is never cut); if
    not, the database is down: every armed wait is cut (its socket shut down, so the waiting thread gets
    a connection error at once), :attr:`down` says why so no new operation starts, and the server is
    asked again every :data:`RETRY_S` in the background until it answers. A wait longer than ``cap_s``
    is cut whatever the server says (no call of ours means to wait longer).
    """

    def __init__(
        self,
        url: str,
        limit_s: float,
        cap_s: float,
        connect_timeout_s: float,
        conn: psycopg.Connection[Any] | None = None,
    ) -> None:
        self.limit_s = limit_s
        self.probe_s = limit_s / 2
        self.cap_s = max(cap_s, limit_s)
        self.down: str | None = None
        """Why the database counts as down; None while it answers."""
        self.alive_at = time.monotonic()
        """When it last answered anything (monotonic clock)."""
        self._prober = _Prober(url, connect_timeout_s, conn, lambda: self._judge(None))
        self._cond = threading.Condition()
        self._armed: dict[int, tuple[float, int]] = {}  # token -> (when the wait began, its socket)
        self._cuts: dict[int, str] = {}  # token of a wait cut -> why
        self._tokens = itertools.count()
        self._asked_at = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, fd: int) -> int:
        """Watch a wait on socket ``fd`` that begins now; the token to :meth:`disarm` it with.

        The watchdog is not woken (measured: waking it per wait tripled the cost of a query, 91 to 236
        us): it looks at least every ``limit_s``, and no wait is due sooner. Only while the database is
        down is it woken, to cut the wait at once."""
        with self._cond:
            token = next(self._tokens)
            self._armed[token] = (time.monotonic(), fd)
            self._start()
            if self.down is not None:
                self._cond.notify()
        return token

    def disarm(self, token: int) -> str | None:
        """The wait ended: None, or why it was cut (its connection is then unusable)."""
        with self._cond:
            if self._armed.pop(token, None) is not None:
                return None
            return self._cuts.pop(token, "cut")

    def answered(self) -> None:
        """The database answered something just now."""
        self.alive_at = time.monotonic()

    def verdict(self, ask: bool = False) -> str | None:
        """Why the database is down, None when it answers: at once while it counts as down or when it
        answered within ``limit_s`` (unless ``ask``); otherwise it is asked now (at most ``limit_s / 2``)."""
        if self.down is not None:
            return self.down
        if not ask and time.monotonic() - self.alive_at < self.limit_s:
            return None
        return self._judge(self._prober.ask(self.probe_s))

    def close(self) -> None:
        """Stop the watchdog thread and close the asking connection."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._prober.close()

    def _judge(self, why: str | None) -> str | None:
        """Take an answer (None) or its absence (why) as the database's state."""
        with self._cond:
            self._asked_at = time.monotonic()
            if why is None:
                self.alive_at, self.down = self._asked_at, None
            else:
                self.down = why
                self._start()  # it asks again in the background, and cuts what waits meanwhile
                self._cond.notify()
        return why

    def _start(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name="lightmem2-pg-watchdog", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                wake = self._step(time.monotonic())
                if wake > 0:
                    self._cond.wait(wake)

    def _step(self, now: float) -> float:
        """Do what is due (called holding the lock); how long to sleep then."""
        if self.down is not None:
            for token in list(self._armed):
                self._cut(token, self.down)
            retry = self._asked_at + RETRY_S
            if now < retry:
                return retry - now
            self._ask()
            return 0
        if not self._armed:
            return self.limit_s  # a wait armed meanwhile is due no sooner than that
        token, (began, _fd) = next(iter(self._armed.items()))  # the oldest: waits are armed in order
        if now >= began + self.cap_s:
            self._cut(token, f"no answer for {self.cap_s:g} s, store.connectTimeoutS + store.lockTimeoutS")
            return 0
        due = min(max(began, self.alive_at) + self.limit_s, began + self.cap_s)
        if now < due:
            return due - now
        self._ask()
        return 0

    def _ask(self) -> None:
        """Ask the database, without holding the lock meanwhile (arming and disarming go on)."""
        self._cond.release()
        try:
            why = self._prober.ask(self.probe_s)
        finally:
            self._cond.acquire()
        if why is not None:
            why = f"no answer for {self.limit_s:g} s, and {why}" if self.down is None else why
        self._judge(why)

    def _cut(self, token: int, why: str) -> None:
        _began, fd = self._armed.pop(token)
        self._cuts[token] = why
        _cut(fd)


class WatchedConnection(psycopg.Connection[TupleRow]):
    """A pooled connection whose every network wait is armed in its backend's :class:`Liveness`: a wait
    it cuts raises :class:`Unanswered`, every answer counts as a sign of life."""

    liveness: Liveness | None = None

    def wait(self, gen: PQGen[RV], *args: Any, **kwargs: Any) -> RV:
        """psycopg's one place where a connection waits for the server (queries, fetches, commits)."""
        live = self.liveness
        try:
            fd = self.pgconn.socket
        except psycopg.Error:
            live = None  # closed: psycopg says so itself
        if live is None:
            return super().wait(gen, *args, **kwargs)
        token = live.arm(fd)
        try:
            done = super().wait(gen, *args, **kwargs)
        except psycopg.Error as err:
            why = live.disarm(token)
            if why is not None:
                raise Unanswered(why) from None
            if err.sqlstate:  # the server answered with an error: it is alive
                live.answered()
            raise
        except BaseException:
            live.disarm(token)
            raise
        if live.disarm(token) is None:
            live.answered()
        return done


class PgBackend:
    """One pool to one database, migrated on open; shared by the state store and the ledger."""

    def __init__(
        self,
        url: str,
        pool_size: int = 20,
        connect_timeout_s: float = 10.0,
        lock_timeout_s: float = 60.0,
        response_timeout_s: float = 1.0,
    ) -> None:
        self.url = url
        self.where = safe_url(url)
        self.lock_timeout_s = lock_timeout_s
        self.wait_s = connect_timeout_s + lock_timeout_s
        """The longest a call waits for a pooled connection while every one is busy."""
        self._held = threading.local()  # stored session id -> the connection its lock is held on
        self._out = 0  # connections checked out by this backend's operations
        self._out_lock = threading.Lock()
        first = self._migrated(connect_timeout_s)
        self.live = Liveness(url, response_timeout_s, self.wait_s, connect_timeout_s, first)
        self.pool: ConnectionPool[WatchedConnection] = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True, "connect_timeout": max(1, int(connect_timeout_s))},
            connection_class=WatchedConnection,
            configure=self._watch,
            timeout=self.wait_s,
            open=False,
            name="lightmem2",
            reset=_reset,
        )
        try:
            self.pool.open(wait=True, timeout=connect_timeout_s)
        except PoolTimeout:
            self.close()
            raise StoreUnavailable(
                f"the session store {self.where} accepted one connection but the pool could not open "
                f"within {connect_timeout_s:g} s; check the server's max_connections and store.poolSize"
            ) from None

    def _migrated(self, connect_timeout_s: float) -> psycopg.Connection[Any]:
        """A connection on which the schema is brought forward; kept to ask the server whether it
        answers (:class:`_Prober`), so the first question needs no new connection."""
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, int(connect_timeout_s)))
        except psycopg.Error as err:
            raise self.unavailable("cannot connect to", err) from None
        try:
            self.schema_version = migrate(conn, self.where)
        except BaseException as err:
            conn.close()
            if isinstance(err, psycopg.Error):
                raise self.unavailable("cannot connect to", err) from None
            raise
        return conn

    def _watch(self, conn: WatchedConnection) -> None:
        """The pool's ``configure``: every new connection's waits are watched, and the server probes
        it (:data:`SERVER_KEEPALIVES`; ignored on a Unix socket)."""
        conn.liveness = self.live
        settings = ", ".join("set_config(%s, %s, false)" for _ in SERVER_KEEPALIVES)
        params = [x for pair in SERVER_KEEPALIVES.items() for x in pair]
        with contextlib.suppress(psycopg.Error):  # refused (a proxy in between): the OS defaults stay
            conn.execute(f"SELECT {settings}", params)

    def unavailable(self, what: str, err: BaseException) -> StoreUnavailable:
        """The one-line error for a failed database operation: the URL, the cause and the fix."""
        cause = " ".join(str(err).split()) or type(err).__name__
        return StoreUnavailable(
            f"{what} the session store {self.where} ({cause}); check store.url and that PostgreSQL is "
            "running and reachable from this host, or remove store.url to use the embedded store"
        )

    def down_error(self, why: str) -> StoreUnavailable:
        """The error of every operation while the database counts as down, and of each one cut."""
        return StoreUnavailable(
            f"the session store {self.where} does not answer ({why}); calls pass through unreduced until "
            f"it does (asked every {RETRY_S:g} s); check that PostgreSQL is running and reachable from "
            "this host, or raise store.responseTimeoutS if it is only slow"
        )

    def _failed(self, what: str, err: psycopg.Error) -> StoreUnavailable:
        return self.down_error(str(err)) if isinstance(err, Unanswered) else self.unavailable(what, err)

    def trouble(self) -> str | None:
        """Why the database cannot serve calls now (what ``/healthz`` shows), None when it answers;
        asks it (at most ``store.responseTimeoutS / 2``) when nothing answered for that long."""
        why = self.live.verdict()
        return None if why is None else str(self.down_error(why))

    def _admit(self) -> None:
        """Refuse at once while the database counts as down: no operation waits on it then."""
        why = self.live.down
        if why is not None:
            raise self.down_error(why)

    def run(self, session_key: str | None, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``work(connection)`` on the connection holding ``session_key``'s lock in this thread, else
        on a pooled one; database errors become :class:`StoreUnavailable`."""
        held = getattr(self._held, "conns", {}).get(session_key) if session_key else None
        try:
            self._admit()
            if held is not None:
                return work(held)
            with self._connection() as conn:
                return work(conn)
        except psycopg.Error as err:
            raise self._failed("a query failed on", err) from None

    def stream(self, sql: str, params: Sequence[Any], batch: int = 500) -> Generator[tuple[Any, ...]]:
        """The rows of a read-only ``sql``, fetched ``batch`` at a time through a server-side cursor
        (a caller that stops early does not read the rest); database errors become
        :class:`StoreUnavailable`. Close it (``contextlib.closing``) to give the connection back."""
        try:
            self._admit()
            with self._connection() as conn, conn.transaction(), conn.cursor(name="lm_stream") as cur:
                cur.itersize = batch
                cur.execute(sql, params)
                yield from cur
        except psycopg.Error as err:
            raise self._failed("a query failed on", err) from None

    @contextlib.contextmanager
    def session_lock(self, session_key: str) -> Iterator[None]:
        """Hold an advisory lock on ``session_key``; this thread's work on it uses the same connection."""
        conns: dict[str, psycopg.Connection[Any]] = self._held.__dict__.setdefault("conns", {})
        if session_key in conns:  # re-entered by the same thread: it holds the lock already
            yield
            return
        key = lock_key(session_key)
        try:
            self._admit()
            with self._connection() as conn:
                self._lock(conn, session_key, key)
                conns[session_key] = conn
                try:
                    yield
                finally:
                    del conns[session_key]
                    self._release(conn, key)
        except psycopg.OperationalError as err:
            raise self._failed("lost the connection to", err) from None

    def _lock(self, conn: psycopg.Connection[Any], session_key: str, key: int) -> None:
        """Wait for the advisory lock ``key`` (at most ``store.lockTimeoutS``, the server's own timeout)."""
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

    def _release(self, conn: psycopg.Connection[Any], key: int) -> None:
        """Unlock ``key``; a connection that cannot say so is closed (the server then drops its locks),
        never handed back to the pool still holding one; so is one to a database that counts as down
        (nothing waits on it)."""
        try:
            if self.live.down is None and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                return
        except psycopg.Error:
            pass
        conn.close()

    @contextlib.contextmanager
    def _connection(self) -> Iterator[WatchedConnection]:
        """A pooled connection for one operation (:meth:`_checkout`), given back after it."""
        conn = self._checkout()
        try:
            yield conn
        finally:
            with self._out_lock:
                self._out -= 1
            self.pool.putconn(conn)

    def _checkout(self) -> WatchedConnection:
        """A pooled connection the server has not closed (after a restart every idle one is closed:
        handing them out made each fail one call, passed through unreduced); StoreUnavailable when
        :meth:`_waited` says to stop waiting for one."""
        started = time.monotonic()
        errors = self._connect_errors()
        while True:
            try:
                conn = self.pool.getconn(timeout=CHECKOUT_SLICE_S)
            except PoolTimeout:
                self._waited(started, errors)
                continue
            if not _closed_by_server(conn):
                with self._out_lock:
                    self._out += 1
                return conn
            conn.close()
            self.pool.putconn(conn)  # the pool opens another in its place

    def _waited(self, started: float, errors: int) -> None:
        """Raise when a call should stop waiting for a pooled connection: the database counts as down;
        or the pool failed to open one, or has room and opened none within ``store.responseTimeoutS``,
        and the server does not answer (then it counts as down) or refuses connections; or every
        connection stayed busy for ``store.connectTimeoutS + store.lockTimeoutS``."""
        self._admit()
        waited = time.monotonic() - started
        refused = self._connect_errors() > errors
        with self._out_lock:
            busy = self._out >= (self.pool.max_size or 1)
        if refused or (waited >= self.live.limit_s and not busy):
            why = self.live.verdict(ask=refused)  # a refusal right after an answer: stopped meanwhile?
            if why is not None:
                raise self.down_error(why)
            if refused:
                raise StoreUnavailable(
                    f"the session store {self.where} answers but refused a new connection; check its log "
                    "(max_connections, authentication) and store.poolSize"
                )
        if waited >= self.wait_s:
            raise self.unavailable(
                "no free connection (store.poolSize) to", PoolTimeout(f"none within {self.wait_s:g} s")
            )

    def _connect_errors(self) -> int:
        """How many connections the pool failed to open so far."""
        return int(self.pool.get_stats().get("connections_errors", 0))

    def close(self) -> None:
        """Close the pool and stop watching."""
        self.live.close()
        self.pool.close()


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
        from .session_state import WRITER_PREFIXES

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
