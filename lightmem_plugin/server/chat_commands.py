"""``/lightmem2 ...`` commands that arrive over HTTP (``POST /sidecar/command``): allowed, bounded, off-loop.

Why an allowlist: a chat line reaches us from OpenClaw's Gateway, which relays messaging channels, so
it is text from the network. Nothing from the network may name a file for ``serve`` to read or write
(``resume --trace /dev/zero`` grew serve to 24 GB; a FIFO hung it) or start or install something. Each
command that may run from chat lists the options it may use; anything else (a new command, a new
flag, an argparse abbreviation of a refused one) is refused with a one-line "run it in a terminal".

Why a thread pool with limits: commands read the ledger, the registry and the index; run inside the
event loop, one slow command stalled every ``/v1`` call and ``/healthz``. Here each runs in one of
:data:`WORKERS` threads; the route waits at most ``server.commandTimeoutS`` (504 after that) and a
reply is cut at ``server.commandMaxChars``. A thread cannot be killed, so a timed-out command keeps
its slot until it ends; when every slot is taken the route answers 503 at once instead of queueing.
"""

from __future__ import annotations

import argparse
import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..commands.registry import build_parser, chat_argv, run_line
from ..errors import CommandRefused, LightMemError

WORKERS = 2

# command -> the argparse destinations it may set from chat (the rest must keep their defaults)
CHAT_SAFE: dict[str, frozenset[str]] = {
    "status": frozenset({"session", "json"}),
    "report": frozenset({"session", "all", "json"}),
    "doctor": frozenset({"json", "fix"}),
    "mode": frozenset({"value"}),
    "recover": frozenset({"key", "lines"}),
    "search": frozenset({"query", "session", "all", "regex", "fts", "limit", "json"}),
    "resume": frozenset({"level", "session", "at_turn"}),
    "export": frozenset({"format", "session"}),  # prints; writes no file
    "visual": frozenset({"session"}),  # into the data dir's visual/ only
    "config": frozenset({"action"}),
}
CONFIG_ACTIONS = frozenset({"path", "show", "validate"})
_UNSET: tuple[Any, ...] = (None, False)


def refusal(line: str) -> str | None:
    """Why ``line`` may not run from chat, or None when it may (or fails to parse: the CLI says why)."""
    try:
        argv = chat_argv(line)
        args = build_parser().parse_args(argv)
    except (ValueError, LightMemError, SystemExit):
        return None  # run_line reports the same parse error (or help) the same way
    try:
        check(args)
    except CommandRefused as err:
        return str(err)
    return None


def check(args: argparse.Namespace) -> None:
    """CommandRefused unless the parsed command uses only what :data:`CHAT_SAFE` allows."""
    cmd = str(args.command)
    allowed = CHAT_SAFE.get(cmd)
    if allowed is None:
        raise CommandRefused(
            f'"{cmd}" cannot run from chat (it reads or writes files it is given, or starts or installs '
            f"something); run `lightmem2 {cmd}` in a terminal"
        )
    for dest, value in sorted(vars(args).items()):
        if dest == "command" or dest in allowed or value in _UNSET:
            continue
        flag = "--" + dest.replace("_", "-")
        raise CommandRefused(
            f"{flag} cannot be used from chat (nothing sent over the network may name a file or open "
            f"one); run `lightmem2 {cmd} {flag} ...` in a terminal"
        )
    if cmd == "config" and args.action not in CONFIG_ACTIONS:
        raise CommandRefused(
            f'"config {args.action}" cannot run from chat; run `lightmem2 config {args.action}` in a terminal'
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


def _run(line: str) -> tuple[int, dict[str, Any]]:
    try:
        why = refusal(line)
        if why is not None:
            return 403, {"error": why}
        text, _code = run_line(line)
    except Exception as err:  # a bug in a command: the chat shows it, serve keeps running (I5)
        return 500, {"error": f"lightmem2 command failed: {type(err).__name__}: {str(err)[:200]}"}
    return 200, {"text": text}


class CommandRunner:
    """Runs chat commands in a small thread pool, each bounded in time and output."""

    def __init__(self, workers: int = WORKERS) -> None:
        self.workers = workers
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="lightmem2-command")
        self.running = 0

    async def run(self, line: str, timeout_s: float, max_chars: int) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for the chat command ``line``."""
        if self.running >= self.workers:
            return 503, {
                "error": f"{self.running} earlier commands are still running (at most {self.workers} at a "
                "time); try again when they finish"
            }
        self.running += 1
        future = asyncio.get_running_loop().run_in_executor(self.pool, _run, line)
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
