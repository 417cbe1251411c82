"""The shared store when PostgreSQL stops answering, refuses, or restarts: no operation waits it out.

A server stopped by SIGSTOP (a network partition without a reset looks the same to its clients) keeps
every socket open and silent; measured before this: each operation waited as long as the freeze, and
after a restart each stale pooled connection failed one operation. Here every operation on a frozen
server must fail within :data:`BOUND_S` (``1.5 x store.responseTimeoutS`` by design), and at once while
the database counts as down; it must count as back soon after the server answers again; after a restart
no operation may fail. A slow query on a server that answers must never be cut.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lightmem_plugin.errors import StoreUnavailable

pytestmark = pytest.mark.postgres

LIMIT_S = 1.0
"""store.responseTimeoutS of the backends here (the default)."""
BOUND_S = 2.0
"""What one operation may cost on a frozen server (1.5 s by design, plus scheduling slack)."""
AT_ONCE_S = 0.2
"""What it may cost once the database counts as down."""
POOL = 4
GIVE_UP_S = 10.0
"""How long a test waits for one operation before it counts it as hung (then it fails, never hangs)."""


@pytest.fixture
def backend(pg_own_cluster: Any) -> Iterator[Any]:
    from lightmem_plugin.store.postgres import PgBackend

    name = f"lm_outage_{time.monotonic_ns()}"
    opened = PgBackend(pg_own_cluster.create_db(name), POOL)  # store.responseTimeoutS: LIMIT_S
    try:
        yield opened
    finally:
        opened.close()


def _timed(op: Callable[[], object]) -> tuple[float, BaseException | None]:
    """How long ``op`` took and what it raised; run in a thread and given up on after
    :data:`GIVE_UP_S` (reported as that long, with a TimeoutError), so a hung operation fails the test
    instead of hanging it (the frozen server is thawed on the way out)."""
    box: list[BaseException | None] = []

    def run() -> None:
        try:
            op()
        except Exception as err:
            box.append(err)
        else:
            box.append(None)

    started = time.monotonic()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(GIVE_UP_S)
    if not box:
        return GIVE_UP_S, TimeoutError(f"still waiting after {GIVE_UP_S:g} s")
    return time.monotonic() - started, box[0]


def _operations(backend: Any) -> dict[str, Callable[[], object]]:
    """One of each kind of operation: a query, the session lock, a streamed read, a write."""
    from lightmem_plugin.store.postgres import PgStateStore

    states = PgStateStore(backend)

    def locked() -> None:
        with states.lock("s"):
            pass

    def streamed() -> None:
        with contextlib.closing(backend.stream("SELECT 1", [])) as rows:
            list(rows)

    return {
        "query": lambda: backend.run(None, lambda c: c.execute("SELECT 1").fetchone()),
        "lock": locked,
        "stream": streamed,
        "write": lambda: states.write("w", {"memo": [("k", "v", 0)]}, {}),
    }


def _in_threads(
    ops: dict[str, Callable[[], object]], results: dict[str, tuple[float, BaseException | None]]
) -> None:
    """Run every operation at once, each in a thread of its own; each one's time and error."""

    def one(name: str) -> None:
        results[name] = _timed(ops[name])

    threads = [threading.Thread(target=one, args=(name,)) for name in ops]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)


def _answer(op: Callable[[], Any]) -> Any:
    """What ``op`` returns, given up on after :data:`GIVE_UP_S` (then a TimeoutError)."""
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(op()), daemon=True)
    t.start()
    t.join(GIVE_UP_S)
    if not box:
        raise TimeoutError(f"still waiting after {GIVE_UP_S:g} s")
    return box[0]


def _wait_until_back(backend: Any, within_s: float = 10.0) -> float:
    """Seconds until the backend says the database answers again (``trouble()`` None)."""
    started = time.monotonic()
    while (why := _answer(backend.trouble)) is not None:
        assert time.monotonic() - started < within_s, why
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.mark.slow
def test_a_frozen_database_fails_every_operation_within_the_bound_and_is_back_after(
    pg_own_cluster: Any, backend: Any
) -> None:
    ops = _operations(backend)
    for op in ops.values():  # warm: every kind works, the pool holds connections to the server
        assert _timed(op)[1] is None
    results: dict[str, tuple[float, BaseException | None]] = {}
    with pg_own_cluster.frozen():
        # the calls in flight when it froze: each waits on its own connection, all are cut together
        _in_threads(ops, results)
        # then it counts as down: every operation fails at once, and says why and what to check
        later = {name: _timed(op) for name, op in ops.items()}
        trouble = _timed(backend.trouble)[0], _answer(backend.trouble)
    for name, (took, err) in results.items():
        assert isinstance(err, StoreUnavailable) and took < BOUND_S, (name, took, err)
        assert "does not answer" in str(err) and "PostgreSQL is running" in str(err)
    for name, (took, err) in later.items():
        assert isinstance(err, StoreUnavailable) and took < AT_ONCE_S, (name, took, err)
    assert trouble[0] < AT_ONCE_S and trouble[1] is not None and "does not answer" in trouble[1]
    # answered again: it counts as back within a retry or two, and every operation works
    assert _wait_until_back(backend) < 2.0
    for name, op in ops.items():
        assert _timed(op)[1] is None, name


@pytest.mark.slow
def test_a_frozen_database_with_nothing_in_flight_is_reported_by_trouble(
    pg_own_cluster: Any, backend: Any
) -> None:
    time.sleep(LIMIT_S)  # nothing answered for a while: trouble() must ask the server itself
    with pg_own_cluster.frozen():
        took, _ = _timed(backend.trouble)
        why = _answer(backend.trouble)
    assert why is not None and "no answer to SELECT 1" in why and took < BOUND_S
    _wait_until_back(backend)


def test_after_a_restart_no_operation_fails_and_a_refusal_fails_fast(
    pg_own_cluster: Any, backend: Any
) -> None:
    # every pooled connection open and idle, as on a busy gateway
    gate = threading.Barrier(POOL)

    def busy() -> None:
        backend.run(None, lambda c: (gate.wait(10), c.execute("SELECT 1")))

    threads = [threading.Thread(target=busy) for _ in range(POOL)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert backend.pool.get_stats()["pool_size"] == POOL
    pg_own_cluster.restart()  # the server closes every connection: none of them may fail a call
    failures: list[BaseException] = []
    for _ in range(3 * POOL):
        for name, op in _operations(backend).items():
            took, err = _timed(op)
            if err is not None:
                failures.append(err)
            assert took < BOUND_S, name
    assert failures == []
    # a stopped server refuses at once: so does every operation (measured before: 0.02 s)
    pg_own_cluster._shutdown()
    try:
        refused = [_timed(op) for op in _operations(backend).values()]
    finally:
        pg_own_cluster._launch()
    assert all(isinstance(err, StoreUnavailable) and took < 0.5 for took, err in refused), refused
    _wait_until_back(backend)
    assert all(_timed(op)[1] is None for op in _operations(backend).values())


def test_a_slow_query_on_a_live_database_is_never_cut(pg_url: str) -> None:
    from lightmem_plugin.store.postgres import PgBackend, PgStateStore

    a, b = PgBackend(pg_url, 2, response_timeout_s=0.2), PgBackend(pg_url, 2, response_timeout_s=0.2)
    try:
        took, err = _timed(lambda: a.run(None, lambda c: c.execute("SELECT pg_sleep(1.0)")))
        assert err is None and took >= 1.0
        # a session another process holds for a while: waited for, not taken for a dead server
        sa, sb = PgStateStore(a), PgStateStore(b)
        inside = threading.Event()

        def holder() -> None:
            with sa.lock("s"):
                inside.set()
                time.sleep(1.0)

        t = threading.Thread(target=holder)
        t.start()
        assert inside.wait(10)

        def waiter() -> None:
            with sb.lock("s"):
                pass

        took, err = _timed(waiter)
        t.join(10)
        assert err is None and took > 0.5
        assert a.live.down is None and b.live.down is None and a.trouble() is None
        # the server probes each pooled connection: one cut off in a partition frees its locks in 25 s
        shown = a.run(None, lambda c: c.execute("SHOW tcp_keepalives_idle").fetchone())
        assert shown == ("10",)
    finally:
        a.close()
        b.close()
