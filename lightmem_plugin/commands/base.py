"""What every command module declares: a :class:`Command` named ``COMMAND``.

A command module holds the command's logic as plain functions (``run(...)`` with typed arguments, which
tests and the adapters call directly) and, for the CLI and chat, two small functions the spec points at:

``configure(parser)``
    adds the command's arguments to its argparse sub-parser;
``main(args) -> Outcome``
    runs it on the parsed ``argparse.Namespace``: the text to print (exit code 0), or ``(text, code)``.

The module docstring is the command's help: its first line is the summary shown by ``lightmem2 --help``
and in the command table of docs/REFERENCE.md, the whole text is ``lightmem2 COMMAND --help``.
This module imports nothing of lightmem2, so a spec costs nothing to import.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

Outcome = str | tuple[str, int]
"""What :attr:`Command.main` returns: text to print with exit code 0, or (text, exit code)."""


@dataclass(frozen=True)
class Command:
    """One ``lightmem2`` subcommand, as the registry lists it."""

    name: str
    doc: str | None
    """The module docstring: first line the summary, the whole text the ``--help`` description."""
    configure: Callable[[argparse.ArgumentParser], None]
    main: Callable[[argparse.Namespace], Outcome]
    chat: bool = True
    """False for commands that only make sense in a terminal (``/lightmem2 NAME`` says so in chat)."""
    verbatim: bool = False
    """True when stdout must carry the text's bytes exactly (no newline added; ``recover``)."""

    @property
    def help(self) -> str:
        """The whole help text (the module docstring, stripped)."""
        return (self.doc or "").strip()

    @property
    def summary(self) -> str:
        """The first line of the help text."""
        return self.help.splitlines()[0] if self.help else self.name


def reply(outcome: Outcome) -> tuple[str, int]:
    """``outcome`` as (text, exit code)."""
    return (outcome, 0) if isinstance(outcome, str) else outcome
