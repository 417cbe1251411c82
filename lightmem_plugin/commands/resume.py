"""resume [--level critical|standard|full] [--session ID] [--at-turn N] [--trace PATH]: print a session's record.

The record (goals, decisions and what superseded them, task status, files touched, open errors) is
what a new session needs to pick up where an old one stopped: paste it as the first message. Without
``--session`` the most recent session is used; ``--at-turn N`` shows what was believed at message N.
``--trace PATH`` builds the record from a recorded session instead (a swe JSON or a Claude Code
transcript), so sessions run without lightmem2 can be resumed too.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UsageError
from ..eviction.entries import of_chat
from ..eviction.record_render import render
from ..eviction.record_store import LEVELS, RecordStore
from ..eviction.session_record import standalone
from ..measure.traces import load_trace
from ..store.home import Home
from .base import Command, Outcome


def from_trace(path: str, level: str, at_turn: int | None) -> str:
    """The record of a recorded session, rendered at ``level``."""
    trace = load_trace(Path(path))
    if not trace.calls:
        raise UsageError(f"{path} has no model calls to build a record from")
    record = standalone(of_chat([*trace.calls[-1].prompt, trace.calls[-1].output]))
    if at_turn is not None:
        record = record.at_turn(at_turn)
    return render(record, next(lv for lv in LEVELS if lv == level))


def run(
    store: RecordStore,
    level: str = "standard",
    session_id: str | None = None,
    at_turn: int | None = None,
    trace: str | None = None,
) -> str:
    """The text ``lightmem2 resume`` prints."""
    if level not in LEVELS:
        raise UsageError(f'unknown level "{level}"; allowed: {", ".join(LEVELS)}')
    if at_turn is not None and at_turn < 0:  # a trace's record at turn -5 printed as an empty record
        raise UsageError(f"--at-turn takes a message number, 0 or more; got {at_turn}")
    if trace is not None:
        return from_trace(trace, level, at_turn)
    snap = store.snapshot(session_id, at_turn)
    return f"[lightmem2 session record: {snap['session']} at turn {snap['turn']}]\n{snap[level]}"


def configure(parser: argparse.ArgumentParser) -> None:
    """``--level``, ``--session ID``, ``--at-turn N``, ``--trace PATH``."""
    parser.add_argument("--level", default="standard", choices=["critical", "standard", "full"])
    parser.add_argument("--session", metavar="ID")
    parser.add_argument("--at-turn", type=int, metavar="N")
    parser.add_argument("--trace", metavar="PATH")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 resume`` on the user's record store."""
    return run(RecordStore(Home.default().records_dir), args.level, args.session, args.at_turn, args.trace)


COMMAND = Command("resume", __doc__, configure, main)
