"""A team gateway whose PostgreSQL freezes, thaws and restarts: no call waits it out, none is lost after.

Two ``lightmem2 serve`` processes (each its own home, as on two machines) share one database and a fake
provider on loopback. The database is then stopped by SIGSTOP (postmaster and every child: a network
partition without a reset looks the same to the gateway). Measured before this: every call on every
process waited for the whole freeze (25 s and 100 s), ``/healthz`` said ok, and after a restart each
process passed up to ``store.poolSize`` calls through unreduced and unrecorded while its user routes
answered 500. Now each call during the freeze must come back from the provider within
:data:`BOUND_S`, passed through as the host sent it (the proxy's fail-open) with the failure in the
process's fault sink, ``/healthz`` must say degraded and why (still HTTP 200: the proxy serves), and ok
again once the server answers; after a restart the very next calls are reduced and recorded, and the
user routes answer 200.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_upstream import FakeUpstream
from server_harness import ServeProcess, ServerThread

from lightmem_plugin.faults import FaultSink
from lightmem_plugin.security import tenancy
from lightmem_plugin.store.home import FAULTS_FILE

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BOUND_S = 2.0
"""What a proxied call may cost on a frozen database (1.5 s by design with the default
store.responseTimeoutS of 1 s; the rest is slack for a busy machine)."""
TOKEN = tenancy.new_token()
LOG = "\n".join(
    f"2024-01-01 12:00:{i % 60:02d} INFO worker-{i % 7} processed item {i} ok" for i in range(600)
)


@pytest.fixture
def gateway(tmp_path: Path, pg_own_cluster: Any) -> Iterator[tuple[list[ServeProcess], FakeUpstream, str]]:
    """Two serve processes on one database of the freezable cluster, and the provider they call."""
    url = pg_own_cluster.create_db(f"lm_gateway_{time.monotonic_ns()}")
    fake = FakeUpstream()
    with ServerThread(fake.app) as up:
        config = {
            "server": {"upstreams": {"openai": up.url + "/v1"}},
            "store": {"url": url},
            "gateway": {"users": [{"name": "alice", "tokenSha256": tenancy.digest(TOKEN)}]},
        }
        serves = []
        for i in range(2):
            home = tmp_path / f"home{i}"
            home.mkdir()
            (home / "config.json").write_text(json.dumps(config))
            serves.append(ServeProcess(home))
        try:
            for s in serves:
                s.wait_ready()
            yield serves, fake, url
        finally:
            for s in serves:
                s.stop()


def _body(tag: str) -> dict[str, Any]:
    """A new session (its first user message is ``tag``) whose one tool output lightmem2 reduces."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"command": "pytest"}'},
    }
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": tag},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": LOG},
        ],
    }


class Caller:
    """Sends calls as alice and tells what the provider received for each."""

    def __init__(self, fake: FakeUpstream) -> None:
        self.fake = fake
        self.client = httpx.Client(timeout=10, headers={tenancy.TOKEN_HEADER: TOKEN})  # hung: fail
        self.n = 0
        self.lock = threading.Lock()

    def call(self, serve: ServeProcess) -> tuple[float, str]:
        """(seconds, what reached the provider: ``reduced`` or ``as sent``)."""
        with self.lock:
            self.n += 1
            tag = f"task {self.n}: run the tests"
        body = _body(tag)
        started = time.monotonic()
        r = self.client.post(serve.url + "/v1/chat/completions", json=body)
        took = time.monotonic() - started
        assert r.status_code == 200, r.text
        got = [x.body for x in self.fake.received if x.body["messages"][1]["content"] == tag]
        assert len(got) == 1
        return took, "as sent" if got[0] == body else "reduced"

    def health(self, serve: ServeProcess) -> tuple[float, int, dict[str, Any]]:
        started = time.monotonic()
        r = self.client.get(serve.url + "/healthz")
        return time.monotonic() - started, r.status_code, r.json()

    def close(self) -> None:
        self.client.close()


def _ledger_rows(url: str) -> int:
    import psycopg

    with psycopg.connect(url, connect_timeout=5) as conn:
        row = conn.execute("SELECT COUNT(*) FROM lm_calls").fetchone()
    return int(row[0]) if row else 0


def _reduced_and_recorded(caller: Caller, serve: ServeProcess, url: str) -> float:
    before = _ledger_rows(url)
    took, seen = caller.call(serve)
    assert seen == "reduced"
    assert _ledger_rows(url) == before + 1
    return took


def _wait_ok(caller: Caller, serve: ServeProcess, within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while (health := caller.health(serve))[2]["status"] != "ok":
        assert time.monotonic() < deadline, health
        time.sleep(0.05)


def test_a_frozen_database_costs_each_call_at_most_the_bound_and_a_restart_costs_none(
    gateway: tuple[list[ServeProcess], FakeUpstream, str], pg_own_cluster: Any, tmp_path: Path
) -> None:
    serves, fake, url = gateway
    caller = Caller(fake)
    try:
        for s in serves:
            _reduced_and_recorded(caller, s, url)
        in_flight: list[tuple[int, float, str]] = []
        after: list[tuple[int, float, str]] = []
        with pg_own_cluster.frozen():

            def one(i: int) -> None:
                in_flight.append((i, *caller.call(serves[i % 2])))

            threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]  # 3 per process at once
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            after = [(i, *caller.call(serves[i % 2])) for i in range(6)]
            health = [caller.health(s) for s in serves]
            sessions = [caller.client.get(s.url + "/lightmem2/v1/sessions") for s in serves]
            routes_s = max(r.elapsed.total_seconds() for r in sessions)
        assert len(in_flight) == 6
        for i, took, seen in in_flight + after:
            assert took < BOUND_S and seen == "as sent", (i, took, seen)
        assert max(took for _, took, _ in after) < 0.5  # known down: no call pays the bound again
        for took, status, body in health:
            assert took < BOUND_S and status == 200 and body["status"] == "degraded", body
            assert "does not answer" in body["reason"] and "postgresql://" in body["reason"]
        assert routes_s < BOUND_S  # the user routes say so too, and do not wait the freeze out
        for i in range(2):
            faults = FaultSink(tmp_path / f"home{i}" / FAULTS_FILE).summary()
            proxy = [f for f in faults if f.surface == "proxy"]
            assert proxy and sum(f.count for f in proxy) >= 6, faults
            assert "does not answer" in proxy[0].last_error
        # thawed: healthy again within a retry or two, every call reduced and recorded
        for s in serves:
            _wait_ok(caller, s)
            _reduced_and_recorded(caller, s, url)
        # restarted: every pooled connection is closed by the server; not one call may pay for it
        pg_own_cluster.restart()
        first = [_reduced_and_recorded(caller, s, url) for s in serves]
        for _ in range(10):
            for s in serves:
                _reduced_and_recorded(caller, s, url)
        for s in serves:
            r = caller.client.get(s.url + "/lightmem2/v1/sessions")
            assert r.status_code == 200 and r.json()["user"] == "alice", r.text
            assert caller.health(s)[2]["status"] == "ok"
        assert max(first) < BOUND_S
    finally:
        caller.close()
