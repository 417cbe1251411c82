"""A team gateway: three ``lightmem2 serve`` processes on one PostgreSQL serve one session as one would.

A real recorded session (bundled) is replayed as Chat Completions requests (aggressive mode, eviction
batches) to a fake provider on loopback: once through a single ``serve`` on the embedded store, once
with call i sent to process i mod 3 of three processes that share only ``store.url`` (each has its own
home, as on three machines), one of them killed by PID mid-session, the others carrying on. The fake
upstream records the raw bytes it received; the runs must agree on every one of them. A process that
did not serve the previous turn holds a stale session in memory: it must notice (the session's version
in the store moved on) and reload it, or its call count and eviction state fall behind.
"""

from __future__ import annotations

import base64
import itertools
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_upstream import FakeUpstream
from server_harness import ServeProcess, ServerThread

from lightmem_plugin.config import Config
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.reduction.base import STUB_RE
from lightmem_plugin.store import open_stores
from lightmem_plugin.store.registry import Registry, content_key
from lightmem_plugin.store.sealing import KEY_ENV, Sealer

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz"
KILL_AFTER = 24
KILLED = 1
ARCHIVE_KEY = base64.b64encode(bytes(range(32))).decode()
"""The fleet's archive key: every process must open what another one sealed."""


def Serve(home: Path, config: dict[str, Any]) -> ServeProcess:
    """A ``lightmem2 serve`` process with its own home and config and the fleet's archive key."""
    home.mkdir()
    (home / "config.json").write_text(json.dumps(config))
    return ServeProcess(home, {KEY_ENV: ARCHIVE_KEY})


def _config(upstream: str, store_url: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "mode": "aggressive",
        "eviction": {"expectedRemainingCalls": 500, "keepRecentTurns": 2},  # batches at calls 23 and 26
        "server": {"upstreams": {"openai": upstream + "/v1"}},
    }
    if store_url:
        config["store"] = {"url": store_url}
    return config


def _replay(
    root: Path, upstream: str, fake: FakeUpstream, store_url: str | None, processes: int
) -> tuple[list[bytes], list[int]]:
    """The bytes upstream received, and which process served each call."""
    root.mkdir()
    serves = [Serve(root / f"home{i}", _config(upstream, store_url)) for i in range(processes)]
    for s in serves:
        s.wait_ready()
    start = len(fake.received)
    served_by: list[int] = []
    try:
        with httpx.Client(timeout=30) as client:
            for i, call in enumerate(load_trace(TRACE).calls):
                alive = [n for n, s in enumerate(serves) if s.proc.poll() is None]
                n = alive[i % len(alive)]
                body = {"model": "fake-model", "messages": call.prompt}
                r = client.post(serves[n].url + "/v1/chat/completions", json=body)
                assert r.status_code == 200, r.text
                served_by.append(n)
                if processes > 1 and i == KILL_AFTER:
                    serves[KILLED].kill()
    finally:
        for s in serves:
            s.stop()
    return [r.raw for r in fake.received[start:]], served_by


def test_three_processes_on_one_postgres_send_what_one_process_sends(tmp_path: Path, pg_url: str) -> None:
    import psycopg

    fake = FakeUpstream()
    with ServerThread(fake.app) as up:
        single, _ = _replay(tmp_path / "single", up.url, fake, None, 1)
        fleet, served_by = _replay(tmp_path / "fleet", up.url, fake, pg_url, 3)
    n = len(load_trace(TRACE).calls)
    assert len(single) == len(fleet) == n
    # the feature under test really happened: every turn on another process than the one before, the
    # killed one served before it died, and eviction batches both before and after the kill
    assert all(a != b for a, b in itertools.pairwise(served_by))
    assert KILLED in served_by[: KILL_AFTER + 1] and KILLED not in served_by[KILL_AFTER + 1 :]
    evicted = [i for i, raw in enumerate(single) if b"[lightmem2: output archived as " in raw]
    assert evicted and evicted[0] < KILL_AFTER < evicted[-1]
    differ = [i for i, (a, b) in enumerate(zip(single, fleet, strict=True)) if a != b]
    assert differ == []
    # one ledger for the fleet: every call recorded once, numbered as one process numbers them
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT call_index, writer FROM lm_calls ORDER BY call_index").fetchall()
    assert [r[0] for r in rows] == list(range(1, n + 1))
    assert len({r[1] for r in rows}) >= 3  # rows of (at least) three processes' sessions
    # no artifact lost: every key a request names is in the database, byte-exact, whoever archived it
    named = [set(STUB_RE.findall(json.loads(raw).__repr__())) for raw in fleet]
    keys = set().union(*named)
    by_killed = set().union(*(k for i, k in enumerate(named) if served_by[i] == KILLED))
    assert keys and by_killed  # stubs in the requests, some of them made by the killed process
    stores = open_stores(Config.model_validate({"store": {"url": pg_url}}))
    try:
        sealer = Sealer(base64.b64decode(ARCHIVE_KEY))
        registry = stores.registry_like(Registry(tmp_path / "unused", sealer=sealer))
        assert all(content_key(registry.get(k)) == registry.resolve(k) for k in keys)  # names: short
    finally:
        stores.close()
    assert not any((tmp_path / "fleet").glob("home*/artifacts/??/*"))  # none left on one machine only
