"""Drive many streamed Chat Completions calls and time each one's first body byte (TTFB).

Used by the load test (``benchmarks/bench_server.py`` drives host-like sessions of its own, ``host_load.py``). Each call must end with ``data: [DONE]``
and status 200, or it counts as an error.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Batch:
    ttfb_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def pct(self, q: float) -> float:
        data = sorted(self.ttfb_ms)
        return data[min(len(data) - 1, round(q * (len(data) - 1)))] if data else float("nan")

    @property
    def p50(self) -> float:
        return statistics.median(self.ttfb_ms) if self.ttfb_ms else float("nan")


def body(i: int) -> dict[str, Any]:
    return {
        "model": "m",
        "stream": True,
        "messages": [
            {
                "role": "system",
                "content": f"You are agent {i % 20}. Working directory: /home/u{i % 20}/proj\n",
            },
            {"role": "user", "content": f"task {i}: list the files"},
        ],
    }


async def run_batch(url: str, n: int, concurrency: int, timeout: float = 60.0) -> Batch:
    """``n`` streamed calls to ``url``, at most ``concurrency`` in flight."""
    out = Batch()
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8)
    async with httpx.AsyncClient(limits=limits, timeout=timeout, trust_env=False) as client:

        async def one(i: int) -> None:
            async with sem:
                headers = {"authorization": "Bearer sk-load", "x-lightmem2-session": f"load-{i % 20}"}
                start = time.perf_counter()
                first: float | None = None
                data = b""
                try:
                    async with client.stream("POST", url, json=body(i), headers=headers) as r:
                        async for chunk in r.aiter_bytes():
                            if first is None:
                                first = time.perf_counter() - start
                            data += chunk
                    if r.status_code != 200 or not data.rstrip().endswith(b"data: [DONE]"):
                        out.errors.append(f"call {i}: status {r.status_code}, {len(data)} bytes")
                    elif first is not None:
                        out.ttfb_ms.append(first * 1000)
                except httpx.HTTPError as err:
                    out.errors.append(f"call {i}: {type(err).__name__}: {err}")

        await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(n))), timeout=timeout * 2)
    return out
