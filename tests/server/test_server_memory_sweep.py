"""serve's sweep trims when sessions expire, and once more at the first quiet sweep after that.

The slow test (``tests/reliability/test_rel_memory_return.py``) measures RSS in a real serve; this one
checks the schedule itself: a trim that ran while a request was in flight is followed by one once no
request is in flight or started, and a server left quiet trims no further."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from lightmem_plugin.server import memory
from lightmem_plugin.server.memory import Busy, InFlight


class FakePlugin:
    """What the sweep reads of :class:`~lightmem_plugin.pipeline.LightMem`: config, expiry, its count."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(server=SimpleNamespace(sessionIdleS=0.0))
        self.expired = 0
        self.to_expire = 0

    def expire_idle(self) -> int:
        n, self.to_expire = self.to_expire, 0
        self.expired += n
        return n


def test_a_trim_while_busy_is_followed_by_one_at_the_first_quiet_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each sweep is one step of the test (its sleep waits for the test's go), so no timing decides."""
    trims: list[str] = []
    monkeypatch.setattr(memory, "release_memory", lambda: trims.append(phase))
    plugin, busy = FakePlugin(), Busy()
    phase = ""

    async def drive() -> None:
        nonlocal phase
        go: asyncio.Queue[None] = asyncio.Queue()
        done: asyncio.Queue[None] = asyncio.Queue()

        async def step_sleep(_: float) -> None:
            await done.put(None)  # the previous sweep (if any) finished
            await go.get()

        monkeypatch.setattr(memory, "asyncio", SimpleNamespace(sleep=step_sleep))
        task = asyncio.get_running_loop().create_task(memory.sweep_idle(plugin, busy))  # type: ignore[arg-type]
        await done.get()

        async def sweep(now: str) -> None:
            nonlocal phase
            phase = now
            await go.put(None)
            await done.get()

        busy.now, busy.started = 1, 1  # a big request in flight while the last session expires
        plugin.to_expire = 1
        await sweep("busy")  # expired: trimmed at once
        busy.now, busy.started = 0, 2  # the request ended; a short one came and went
        await sweep("ended")  # nothing in flight, but a request started since the last sweep
        await sweep("quiet")  # the first quiet sweep: one more trim
        await sweep("still quiet")  # and no more
        await sweep("still quiet")
        task.cancel()

    asyncio.run(drive())
    assert trims == ["busy", "quiet"], trims


def test_in_flight_counts_http_requests_until_their_answer_ends() -> None:
    busy = Busy()
    seen: list[int] = []

    async def app(scope: dict, receive: object, send: object) -> None:
        seen.append(busy.now)

    mw = InFlight(app, busy)  # type: ignore[arg-type]
    asyncio.run(mw({"type": "http"}, None, None))  # type: ignore[arg-type]
    asyncio.run(mw({"type": "lifespan"}, None, None))  # type: ignore[arg-type]
    assert seen == [1, 0]
    assert (busy.now, busy.started) == (0, 1)
