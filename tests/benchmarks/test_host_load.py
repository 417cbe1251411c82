"""The host-like load of ``benchmarks/bench_server.py``: sessions that read as the hosts' own requests, and
the fake provider and driver it runs, here on a few calls."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import host_load  # noqa: E402

from lightmem_plugin import wire  # noqa: E402
from lightmem_plugin.model import ToolResultPart  # noqa: E402
from lightmem_plugin.server.identity import session_identity  # noqa: E402


@pytest.mark.parametrize("api", host_load.APIS)
def test_a_session_grows_by_one_tool_exchange_per_call_and_reads_as_its_host(api: str) -> None:
    session = host_load.HOSTS[api](f"t/{api}/1", 1, 30)
    sizes, ids = [], set()
    for call in range(30):
        payload = json.loads(session.body(call))
        assert payload["stream"] is True
        req = wire.get(api).decode(payload)  # the proxy's own codec reads it
        results = [p for m in req.messages for p in m.parts if isinstance(p, ToolResultPart)]
        assert len(results) == call
        sizes.append(len(session.body(call)))
        ids.add(session_identity(api, payload, session.headers()))
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0] + 30_000  # multi-KB outputs pile up
    assert len(ids) == 1 and None not in ids  # one session for the proxy, named as the host names it


@pytest.mark.parametrize("api", host_load.APIS)
def test_sessions_are_distinct_conversations(api: str) -> None:
    first = [json.loads(host_load.HOSTS[api](f"t/{api}/{n}", n, 3).body(2)) for n in range(40)]
    assert len({session_identity(api, p, {}) for p in first}) == 40


def test_the_outputs_mix_short_ones_with_kinds_lightmem2_reduces() -> None:
    import random

    steps = [s for seed in range(20) for s in host_load.steps(random.Random(seed), 30, numbered_views=False)]
    kinds = {s.kind for s in steps}
    assert {"small", "edit", "file_view", "test_run", "build_log", "search", "diff"} <= kinds
    big = [s for s in steps if len(s.output) >= 2000]
    assert 0.3 < len(big) / len(steps) < 0.7


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_driver_runs_host_sessions_against_the_fake_provider() -> None:
    port = _free_port()
    fake = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "host_load.py"), "fake", str(port), "--delay-ms", "20"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        url = f"http://127.0.0.1:{port}"
        end = time.monotonic() + 20
        while True:
            try:
                httpx.get(url + "/v1/models", timeout=1.0, trust_env=False)
                break
            except httpx.HTTPError:
                assert time.monotonic() < end and fake.poll() is None, "the fake provider did not come up"
                time.sleep(0.05)
        for api in (*host_load.APIS, "mixed"):
            run = asyncio.run(
                host_load.drive(api, url, clients=3, calls=12, turns=4, tag=api, watch=(fake.pid,))
            )
            assert run.errors == [] and len(run.ttfb_ms) == len(run.total_ms) == 12
            assert min(run.ttfb_ms) >= 15 and all(  # the fake waits 20 ms (its loop clock may round)
                t >= f for t, f in zip(run.total_ms, run.ttfb_ms, strict=True)
            )
            assert run.watched_cpu_s[str(fake.pid)] >= 0 and run.sessions >= 3  # clock ticks: may read 0
    finally:
        fake.terminate()
        fake.wait(timeout=10)
