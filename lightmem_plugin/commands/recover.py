"""recover KEY [--lines A:B]: print an archived original, byte-exact, or a line range of it.

The key is the 32-hex-char name in a ``[lightmem2: ... archived as KEY ...]`` stub. Lines are 1-based
and inclusive; ``A:`` means from A to the end.
"""

from __future__ import annotations

import argparse

from ..pipeline import LightMem
from ..registry import Registry
from .base import Command, Outcome


def run(registry: Registry, key: str, lines: str | None = None) -> str:
    """The archived text (or the requested lines of it)."""
    return registry.recover(key.strip(), lines)


def configure(parser: argparse.ArgumentParser) -> None:
    """``KEY``, ``--lines A:B``."""
    parser.add_argument("key", help="artifact key from a stub (32 hex chars)")
    parser.add_argument("--lines", metavar="A:B", help="1-based inclusive line range")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 recover`` from the user's registry."""
    return run(LightMem.from_config().registry, args.key, args.lines)


COMMAND = Command("recover", __doc__, configure, main, verbatim=True)
