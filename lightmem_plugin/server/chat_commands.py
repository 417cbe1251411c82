"""``/lightmem2 ...`` commands that arrive over HTTP (``POST /sidecar/command``): allowed, bounded, off-loop.

What may run is the command table's business (:func:`lightmem_plugin.commands.table.run_remote_line`
applies :mod:`lightmem_plugin.commands._chat_policy`, an allowlist, because a chat line relayed by
OpenClaw's Gateway is text from the network). The server is handed that runner by whoever starts it
(``lightmem2 serve``): the command table lists ``serve`` itself, so the server does not import it.

Why a thread pool with limits: commands read the ledger, the registry and the index; run inside the
event loop, one slow command stalled every ``/v1`` call and ``/healthz``. Here each runs in one of
:data:`WORKERS` threads; the route waits at most ``server.commandTimeoutS`` (504 after that) and a
reply is cut at ``server.commandMaxChars``. A thread cannot be killed, so a timed-out command keeps
its slot until it ends; when every slot is taken the route answers 503 at once instead of queueing.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import CommandRefused
from ..faults import FaultSink, guard
from ..hookspec import LineRunner

WORKERS = 2
NOT_WIRED = (
    "chat commands are not wired into this server (it was started without the command table); "
    "start it with `lightmem2 serve`, or run the command in a terminal"
)


def bounded(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars``, saying so and how to see all of it."""
    if len(text) <= max_chars:
        return text
    return (
        text[:max_chars]
        + f"\n[lightmem2: output cut at {max_chars:,} of {len(text):,} chars (server.commandMaxChars); "
        "run the command in a terminal for all of it]"
    )


def _run(commands: LineRunner, line: str, sink: FaultSink | None) -> tuple[int, dict[str, Any]]:
    """(status, body) of one chat line; a bug in a command is a 500 the chat shows and a fault
    ``doctor`` shows, and serve keeps running (I5)."""
    with guard("command", sink, surface="sidecar") as caught:
        try:
            text, _code = commands(line)
        except CommandRefused as err:
            return 403, {"error": str(err)}
        return 200, {"text": text}
    err = caught.error
    return 500, {"error": f"lightmem2 command failed: {type(err).__name__}: {str(err)[:200]}"}


class CommandRunner:
    """Runs chat commands in a small thread pool, each bounded in time and output."""

    def __init__(
        self, commands: LineRunner | None = None, workers: int = WORKERS, sink: FaultSink | None = None
    ) -> None:
        self.commands = commands
        self.sink = sink  # where a command's bug is reported (serve's fault sink)
        self.workers = workers
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="lightmem2-command")
        self.running = 0

    async def run(self, line: str, timeout_s: float, max_chars: int) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for the chat command ``line``."""
        if self.commands is None:
            return 503, {"error": NOT_WIRED}
        if self.running >= self.workers:
            return 503, {
                "error": f"{self.running} earlier commands are still running (at most {self.workers} at a "
                "time); try again when they finish"
            }
        self.running += 1
        future = asyncio.get_running_loop().run_in_executor(self.pool, _run, self.commands, line, self.sink)
        future.add_done_callback(self._finished)  # when the thread ends, not when we stop waiting
        try:
            status, body = await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError:
            return 504, {
                "error": f"command {line.strip()[:80]!r} still running after {timeout_s:g} s "
                "(server.commandTimeoutS); raise that key or run the command in a terminal"
            }
        if "text" in body:
            body["text"] = bounded(str(body["text"]), max_chars)
        return status, body

    def _finished(self, _future: object) -> None:
        self.running -= 1

    def close(self) -> None:
        """Stop taking commands; running ones finish in their threads."""
        self.pool.shutdown(wait=False, cancel_futures=True)
