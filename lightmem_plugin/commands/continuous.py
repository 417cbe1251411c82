"""continuous OUT PATH...: chain recorded sessions into one continuous session (tasks back to back).

OUT is written as a gzipped swe-format trace (one system prompt, then each session's turns in
order, as an assistant agent running several tasks in one session would have them), which
``lightmem2 replay OUT`` measures like any recorded session. PATH is any session ``replay`` reads.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from ..errors import UsageError
from ..measure.traces import load_trace
from ..measure.traces.continuous import chain
from .base import Command, Outcome


def run(out: str, paths: list[str], session_id: str | None = None) -> str:
    """Write the chained session to ``out``; the line ``lightmem2 continuous`` prints."""
    if len(paths) < 2:
        raise UsageError(f"continuous needs two or more sessions, got {len(paths)}; pass more PATHs")
    traces = [load_trace(p) for p in paths]
    doc = chain(traces, session_id)
    target = Path(out)
    data = json.dumps(doc, ensure_ascii=False, sort_keys=True).encode("utf-8")
    target.write_bytes(gzip.compress(data, mtime=0))  # mtime 0: the same sessions give the same bytes
    return f"wrote {target}: {len(traces)} tasks, {len(doc['calls'])} model calls, {len(doc['messages'])} messages"


def configure(parser: argparse.ArgumentParser) -> None:
    """``OUT PATH...``, ``--id ID``."""
    parser.add_argument("out", metavar="OUT")
    parser.add_argument("paths", nargs="+", metavar="PATH")
    parser.add_argument("--id", dest="session_id", metavar="ID", help="session id of the chained session")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 continuous``."""
    return run(args.out, args.paths, args.session_id)


COMMAND = Command("continuous", __doc__, configure, main, chat=False)
