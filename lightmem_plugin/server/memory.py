"""Giving memory back: a long-running ``serve`` returns what idle sessions held to the system.

Why: measured before this, each 11.7 MB request added about 68 MB to serve's RSS, never returned once its
session left memory (18 such requests: 82 -> 1,451 MB with 1 session still held). Python had freed the
objects (tracemalloc: under 10 MB retained, the bounded token cache); glibc kept the pages. Two causes,
two settings: its dynamic mmap threshold rises after the first large free, so later multi-megabyte
buffers (request bodies, joined prompts) come from the heap and fragment it instead of being mapped and
unmapped; and each worker thread may get an arena of its own. Fixing the threshold and capping the
arenas, then trimming after sessions expire, brings RSS back near its level before the big requests.

Only on Linux with glibc; elsewhere every function here is a no-op.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import gc
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from ..pipeline import LightMem

M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD_BYTES = 256 * 1024
"""Allocations above this are mapped on their own and unmapped when freed (a fixed threshold)."""
ARENAS = 2
SWEEP_EVERY_S = 30.0
"""How often serve looks for sessions idle past ``server.sessionIdleS`` (at most; sooner for short idles)."""


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        libc.malloc_trim  # noqa: B018  # glibc only: musl and macOS have no malloc_trim
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def tune_allocator() -> bool:
    """Fix glibc's mmap threshold and cap its arenas (call once, before the worker threads start);
    False where there is no glibc."""
    libc = _libc()
    if libc is None:
        return False
    libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    libc.mallopt(M_ARENA_MAX, ARENAS)
    return True


GC_THRESHOLDS = (20_000, 50, 50)
"""The cycle collector's thresholds in ``serve`` (Python's default: 700, 10, 10)."""


def tune_gc() -> None:
    """Collect cycles less often in ``serve``, and never scan what was loaded at start again.

    Why: each call of a host session allocates tens of thousands of short-lived objects (the decoded
    request, its neutral messages), so the default thresholds ran a young collection every few hundred
    microseconds and a full one, over every session held in memory, every ~140 calls (measured at 100
    streaming clients with host-like requests: ~1 ms of collection per call, full ones of ~85 ms each
    that stalled every call in flight; with these, 18% more calls per second). Almost none of it is
    cyclic: reference counting frees it. What the server loaded before serving (modules, config,
    patterns) is frozen out of the collector's scans."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def release_memory() -> None:
    """Collect cycles and hand freed heap pages back to the system."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


class Busy:
    """How many HTTP requests the server is answering now (kept by :class:`InFlight`)."""

    def __init__(self) -> None:
        self.now = 0
        self.started = 0


class InFlight:
    """ASGI middleware counting the HTTP requests being answered now (a streamed answer until its end).

    Why: memory a request used is freed only when its answer is done, so a trim while one is in flight
    gives back little (measured: eight 11.7 MB requests, the last session dropped while the next request
    was in flight; about 80 MB stayed until yet another request came)."""

    def __init__(self, app: ASGIApp, busy: Busy) -> None:
        self.app = app
        self.busy = busy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.busy.now += 1
        self.busy.started += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.busy.now -= 1


async def sweep_idle(plugin: LightMem, busy: Busy) -> None:
    """Forever: drop sessions idle past ``server.sessionIdleS`` (their decisions are in the store) and
    give their memory back (also of those a request dropped since: a new session's first call drops
    the idle ones). Without it a session left memory only when a later request came.

    A trim runs as soon as sessions were dropped (it bounds what a busy server holds), and once more at
    the first quiet sweep after it: no request in flight (``busy``) and none started since the last
    sweep. What requests in flight at the first trim held is then free too (measured before this
    second trim: about 80 MB of eight 11.7 MB requests stayed until yet another request came)."""
    released = plugin.expired
    seen = -1
    again = False
    while True:
        idle = plugin.config.server.sessionIdleS
        await asyncio.sleep(min(SWEEP_EVERY_S, max(0.5, idle / 2)))
        await anyio.to_thread.run_sync(plugin.expire_idle)
        quiet = busy.now == 0 and busy.started == seen
        seen = busy.started
        if plugin.expired != released:
            released, again = plugin.expired, not quiet
        elif not (again and quiet):
            continue
        else:
            again = False
        await anyio.to_thread.run_sync(release_memory)
