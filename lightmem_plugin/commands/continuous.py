"""continuous OUT PATH...: chain recorded sessions into one continuous session (tasks back to back, with pauses).

OUT is written as a gzipped swe-format trace (one system prompt, then each session's turns in
order, as an assistant agent running several tasks in one session would have them), which
``lightmem2 replay OUT`` measures like any recorded session. PATH is any session ``replay`` reads.
Each call gets a time from a declared pause model: S seconds apart within a task (default 10, the
median gap of recorded Claude Code sessions) and M minutes before each new task (default 30, the
user coming back; 0: no pauses), so a replay on a cache with a TTL (Anthropic: 5 minutes) meets a
cold start where the user paused.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from ..errors import TraceError, UsageError
from ..measure.traces import load_trace
from ..measure.traces.continuous import CALL_SECONDS, TASK_PAUSE_MINUTES, Pauses, chain
from .base import Command, Outcome


def run(
    out: str,
    paths: list[str],
    session_id: str | None = None,
    pause_minutes: float = TASK_PAUSE_MINUTES,
    call_seconds: float = CALL_SECONDS,
) -> str:
    """Write the chained session to ``out``; the line ``lightmem2 continuous`` prints."""
    if len(paths) < 2:
        raise UsageError(f"continuous needs two or more sessions, got {len(paths)}; pass more PATHs")
    try:
        pauses = Pauses(call_seconds, pause_minutes)
    except TraceError as err:  # a bad option, not a bad file: say which option
        raise UsageError(f"{err}; pass --pause-minutes M and --call-seconds S as numbers >= 0") from None
    traces = [load_trace(p) for p in paths]
    doc = chain(traces, session_id, pauses)
    target = Path(out)
    data = json.dumps(doc, ensure_ascii=False, sort_keys=True).encode("utf-8")
    target.write_bytes(gzip.compress(data, mtime=0))  # mtime 0: the same sessions give the same bytes
    paused = f"{pause_minutes:g}-minute pauses between tasks" if pause_minutes else "no pauses between tasks"
    return (
        f"wrote {target}: {len(traces)} tasks, {len(doc['calls'])} model calls, {len(doc['messages'])} "
        f"messages; calls {call_seconds:g} s apart, {paused}"
    )


def configure(parser: argparse.ArgumentParser) -> None:
    """``OUT PATH...``, ``--id ID``, ``--pause-minutes M``, ``--call-seconds S``."""
    parser.add_argument("out", metavar="OUT")
    parser.add_argument("paths", nargs="+", metavar="PATH")
    parser.add_argument("--id", dest="session_id", metavar="ID", help="session id of the chained session")
    parser.add_argument(
        "--pause-minutes",
        type=float,
        default=TASK_PAUSE_MINUTES,
        metavar="M",
        help=f"minutes the user is away before each new task (default {TASK_PAUSE_MINUTES:g}; 0: no pauses)",
    )
    parser.add_argument(
        "--call-seconds",
        type=float,
        default=CALL_SECONDS,
        metavar="S",
        help=f"seconds between two calls of a task (default {CALL_SECONDS:g})",
    )


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 continuous``."""
    return run(args.out, args.paths, args.session_id, args.pause_minutes, args.call_seconds)


COMMAND = Command("continuous", __doc__, configure, main, chat=False)
