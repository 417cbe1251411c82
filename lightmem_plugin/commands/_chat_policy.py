"""What a ``/lightmem2 ...`` line that arrives over the network may run: an allowlist per command.

Why an allowlist: a chat line reaches ``lightmem2 serve`` from OpenClaw's Gateway, which relays
messaging channels, so it is text from the network. Nothing from the network may name a file for
``serve`` to read or write (``resume --trace /dev/zero`` grew serve to 24 GB; a FIFO hung it) or start
or install something. Each command that may run from chat lists the options it may use; anything else
(a new command, a new flag, an argparse abbreviation of a refused one) is refused with a one-line "run
it in a terminal". The command table applies this to the parsed line (:func:`.table.run_remote_line`);
this module imports no command, so the policy is readable on its own.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import CommandRefused

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


def check(args: argparse.Namespace) -> None:
    """CommandRefused unless the parsed command uses only what :data:`CHAT_SAFE` allows.

    A callable value is the command table's own runner (a parser default), never something the line set.
    """
    cmd = str(args.command)
    allowed = CHAT_SAFE.get(cmd)
    if allowed is None:
        raise CommandRefused(
            f'"{cmd}" cannot run from chat (it reads or writes files it is given, or starts or installs '
            f"something); run `lightmem2 {cmd}` in a terminal"
        )
    for dest, value in sorted(vars(args).items()):
        if dest == "command" or dest in allowed or value in _UNSET or callable(value):
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
