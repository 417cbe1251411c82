"""hook claude-code|codex EVENT: the host's hook JSON on stdin, our hook JSON on stdout.

Events: SessionStart, UserPromptSubmit, PostToolUse. A hook never blocks its host on our failure: a
crash, a timeout or unreadable stdin exits 0 and prints nothing, so the host goes on with the original.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from ..hookspec import HOOK_COMMAND, LineRunner
from ..hosts import WITH_HOOKS
from ..hosts.hook_runtime import exit_with
from .base import Command, Outcome


def configure(parser: argparse.ArgumentParser) -> None:
    """``HOST``, ``EVENT``."""
    parser.add_argument("host", choices=WITH_HOOKS)
    parser.add_argument("event")


def main(args: argparse.Namespace) -> Outcome:
    """Answer the hook on this process's stdin/stdout and end the process."""
    exit_with(args.host, args.event, args.run_line)


def run_raw(argv: list[str], run_line: LineRunner | None) -> NoReturn:
    """``lightmem2 hook HOST EVENT`` before argparse runs: a host reads exit code 2 as "blocking
    error", so no usage error may escape; a miswired hook (missing arguments) ends with exit code 0.
    """
    host, event = [*argv[:2], "", ""][:2]
    exit_with(host, event, run_line)


COMMAND = Command(HOOK_COMMAND, __doc__, configure, main, chat=False)
