"""install openclaw|claude-code|codex [--uninstall] [--project DIR]: wire lightmem2 into a host.

Idempotent; every file it edits is backed up first and the changes are printed. ``--uninstall``
restores the edited files exactly. ``--project DIR`` installs into a project's own settings instead of
the user's.
"""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..hosts import NAMES, get
from .base import Command, Outcome


def run(host: str, uninstall: bool, project: str | None) -> str:
    """The text ``lightmem2 install HOST`` prints."""
    found = get(host)
    if found is None:
        raise UsageError(f'unknown host "{host}"; expected one of {", ".join(NAMES)}')
    return found.install(uninstall=uninstall, project=project)


def configure(parser: argparse.ArgumentParser) -> None:
    """``HOST``, ``--uninstall``, ``--project DIR``."""
    parser.add_argument("host", choices=NAMES)
    parser.add_argument("--uninstall", action="store_true")
    parser.add_argument("--project", metavar="DIR")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 install HOST``."""
    return run(args.host, args.uninstall, args.project)


COMMAND = Command("install", __doc__, configure, main, chat=False)
