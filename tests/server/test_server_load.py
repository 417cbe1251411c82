"""Bounded local load: 200 concurrent streamed calls through the proxy, no errors; TTFB vs direct."""

from __future__ import annotations

import asyncio

import pytest
from fake_wire import Reply
from load_client import run_batch
from server_harness import stack

N = 200


@pytest.mark.slow
def test_200_concurrent_streams_complete_without_errors() -> None:
    with stack() as s:
        s.fake.queue(*[Reply(text="Listing <WORKDIR> now. " * 4, chunk=8) for _ in range(2 * N)])
        direct = asyncio.run(run_batch(s.upstream + "/v1/chat/completions", N, N))
        proxied = asyncio.run(run_batch(s.proxy + "/v1/chat/completions", N, N))
        assert direct.errors == [] and proxied.errors == []
        assert len(proxied.ttfb_ms) == N
        assert s.fake.streams_completed == 2 * N and s.fake.streams_aborted == 0
        assert len(s.plugin.sessions) == 20
    print(
        f"\nTTFB ms, {N} concurrent (threads in one process): "
        f"direct p50 {direct.p50:.1f} p99 {direct.pct(0.99):.1f}; "
        f"proxy p50 {proxied.p50:.1f} p99 {proxied.pct(0.99):.1f}"
    )
    # generous bound: a proxy stuck behind something (a blocked loop, a pool limit) would blow it
    assert proxied.pct(0.99) < 20_000
