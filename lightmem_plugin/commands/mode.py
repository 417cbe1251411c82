"""mode [conservative|normal|aggressive]: show the current mode, or switch it.

Without an argument: the current mode and what it enables. With one: validates it, writes it to the
config file (the user's other keys and their order stay as they were) and it takes effect on the next
model call. What is already in the history keeps the form it was given.
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from ..config import MODES, Config, config_path, load_config, merge_config_keys
from ..errors import UsageError
from .base import Command, Outcome


def describe(config: Config) -> str:
    """One short paragraph: the mode and what it turns on."""
    table = config.mode_table()
    eviction = "on" if table.eviction else "off"
    return (
        f"mode: {config.mode}\n"
        f"  stabilizer: {'on' if config.stabilizer.enabled else 'off'}\n"
        f"  reduction: outputs over {table.triggerChars:,} chars -> ~{table.capChars:,}; "
        f"passes: {', '.join(table.passes)}\n"
        f"  eviction: {eviction}"
        + (f" (every {config.eviction.batchTurns} calls, when it pays)" if table.eviction else "")
    )


def check_mode(value: str) -> str:
    """``value`` if it is a mode, else a UsageError with the allowed values and a suggestion."""
    if value in MODES:
        return value
    close = difflib.get_close_matches(value, MODES, n=1)
    hint = f'; did you mean "{close[0]}"?' if close else ""
    raise UsageError(f'unknown mode "{value}"; allowed: {", ".join(MODES)}{hint}')


def set_mode(value: str, path: Path | None = None) -> Config:
    """Persist ``value`` as the mode in the config file, keeping every other key as it was."""
    path = path or config_path()
    merge_config_keys({"mode": check_mode(value)}, path)  # refuses an invalid file, keeps the rest
    return load_config(path)


def run(value: str | None) -> str:
    """The text ``lightmem2 mode [VALUE]`` prints."""
    if value is None:
        return describe(load_config())
    config = set_mode(value)
    return f"mode set to {config.mode} (takes effect on the next model call)\n" + describe(config)


def configure(parser: argparse.ArgumentParser) -> None:
    """The optional mode to switch to."""
    parser.add_argument("value", nargs="?", metavar="conservative|normal|aggressive")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 mode [VALUE]``."""
    return run(args.value)


COMMAND = Command("mode", __doc__, configure, main)
