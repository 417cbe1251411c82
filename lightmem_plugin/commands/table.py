"""The command table: every ``lightmem2`` subcommand, in the order ``--help`` and docs/REFERENCE.md list them.

To add a command, touch two files:

1. a module ``lightmem_plugin/commands/NAME.py`` whose docstring is the command's help (first line:
   ``NAME [ARGS]: what it does``), with ``configure(parser)``, ``main(args) -> Outcome`` and
   ``COMMAND = Command("NAME", __doc__, configure, main)`` (``chat=False`` if it only makes sense in a
   terminal) — see :mod:`lightmem_plugin.commands.base`;
2. one line in :data:`COMMANDS` below.

The CLI parser, ``/lightmem2 ...`` in chat (:func:`run_line`: hooks, the sidecar, ``LightMem.command``)
and the command table of docs/REFERENCE.md (``make docs``) all read this tuple; nothing else lists commands.
``tests/test_command_table.py`` fails when a module under ``commands/`` declares a ``COMMAND`` that
is not listed here (modules that are not commands start with ``_``, apart from ``chart``).
"""

from __future__ import annotations

import argparse
import shlex
from typing import NoReturn

from .._version import __version__
from ..errors import CommandRefused, LightMemError, UsageError
from . import (
    _chat_policy,
    config_cmd,
    continuous,
    demo,
    doctor,
    export,
    gateway,
    hook_cmd,
    install_cmd,
    mode,
    recover,
    replay_cmd,
    report,
    resume,
    search,
    serve_cmd,
    status,
    visual,
)
from .base import Command, reply

COMMANDS: tuple[Command, ...] = (
    status.COMMAND,
    report.COMMAND,
    doctor.COMMAND,
    visual.COMMAND,
    resume.COMMAND,
    mode.COMMAND,
    recover.COMMAND,
    config_cmd.COMMAND,
    replay_cmd.COMMAND,
    continuous.COMMAND,
    search.COMMAND,
    export.COMMAND,
    serve_cmd.COMMAND,
    gateway.COMMAND,
    install_cmd.COMMAND,
    hook_cmd.COMMAND,
    demo.COMMAND,
)
PROG = "lightmem2"
DESCRIPTION = "Cache-stable, reduced context for long-running LLM agents."


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line (UsageError) instead of a usage dump."""

    def error(self, message: str) -> NoReturn:
        # no "lightmem2:" here: the CLI and run_line add the one prefix every error gets
        raise UsageError(f"{message}; see '{self.prog} --help'")


def find(name: str) -> Command:
    """The command called ``name`` (KeyError if there is none)."""
    for command in COMMANDS:
        if command.name == name:
            return command
    raise KeyError(name)


def parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``lightmem2`` parser and each command's sub-parser by name, in table order."""
    root = _Parser(prog=PROG, description=DESCRIPTION)
    root.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    # the hook and serve commands answer chat lines themselves: they get the runners from here
    root.set_defaults(run_line=run_line, run_remote_line=run_remote_line)
    sub = root.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    subs: dict[str, argparse.ArgumentParser] = {}
    for command in COMMANDS:
        subs[command.name] = p = sub.add_parser(command.name, help=command.summary, description=command.help)
        command.configure(p)
    return root, subs


def build_parser() -> argparse.ArgumentParser:
    """The full ``lightmem2`` parser."""
    return parsers()[0]


def dispatch(args: argparse.Namespace) -> tuple[str, int]:
    """Run the command ``args`` were parsed for: (text, exit code); our errors propagate."""
    return reply(find(args.command).main(args))


def chat_argv(line: str) -> list[str]:
    """The CLI arguments of a chat line (``/lightmem2 mode x`` -> ``["mode", "x"]``; empty is status).

    ValueError when the quoting is broken.
    """
    text = line.strip()
    for prefix in ("/lightmem2", "lightmem2"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    return shlex.split(text) or ["status"]


def run_line(line: str) -> tuple[str, int]:
    """Run a chat command such as ``/lightmem2 mode aggressive``: (text to show, exit code).

    What hosts call for ``/lightmem2 ...`` typed in chat: the same code and text as the CLI; errors come
    back as their one-line message instead of raising, so the host always has something to show.
    """
    try:
        argv = chat_argv(line)
        if argv[0] in {c.name for c in COMMANDS if not c.chat}:
            raise UsageError(f'"{argv[0]}" is not available in chat; run `lightmem2 {argv[0]}` in a terminal')
        return dispatch(build_parser().parse_args(argv))
    except ValueError as err:
        return f"lightmem2: cannot parse {line.strip()!r}: {err}", 2
    except LightMemError as err:
        return f"lightmem2: {err}", err.exit_code
    except SystemExit as exit_:  # --help / --version print and exit inside argparse
        return "", int(exit_.code or 0)


def refusal(line: str) -> str | None:
    """Why ``line`` may not run from the network, or None when it may (or fails to parse: running it
    reports the parse error, or prints the help, the same way as anywhere else)."""
    try:
        args = build_parser().parse_args(chat_argv(line))
    except (ValueError, LightMemError, SystemExit):
        return None
    try:
        _chat_policy.check(args)
    except CommandRefused as err:
        return str(err)
    return None


def run_remote_line(line: str) -> tuple[str, int]:
    """:func:`run_line` for a line from the network (the sidecar): CommandRefused when
    :mod:`._chat_policy` does not allow it, so the caller can answer "forbidden" rather than a result."""
    why = refusal(line)
    if why is not None:
        raise CommandRefused(why)
    return run_line(line)
