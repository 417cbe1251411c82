"""The command table: every command module is listed once, and the CLI, chat and README read it."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import subprocess
import sys

import pytest

import lightmem_plugin.commands
from lightmem_plugin.commands._readme import cli_section
from lightmem_plugin.commands.base import Command, reply
from lightmem_plugin.commands.table import COMMANDS, find, parsers, run_line


def _command_modules() -> list[str]:
    skip = {"base", "table", "chart"}  # the spec type, the table, and visual's drawing code
    return [
        m.name
        for m in pkgutil.iter_modules(lightmem_plugin.commands.__path__)
        if not m.name.startswith("_") and m.name not in skip
    ]


def test_every_command_module_is_registered_once() -> None:
    listed = [c for c in COMMANDS]
    for name in _command_modules():
        module = importlib.import_module(f"lightmem_plugin.commands.{name}")
        spec = getattr(module, "COMMAND", None)
        assert isinstance(spec, Command), f"commands/{name}.py has no COMMAND = Command(...)"
        assert listed.count(spec) == 1, f"commands/{name}.py is not in table.COMMANDS (or twice)"
    assert len({c.name for c in COMMANDS}) == len(COMMANDS) == len(_command_modules())


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_each_spec_is_documented_and_parses(command: Command) -> None:
    assert command.summary.startswith(command.name), "the docstring's first line starts with the name"
    _, subs = parsers()
    assert subs[command.name].description == command.help
    assert find(command.name) is command


def test_the_readme_table_follows_the_table_order() -> None:
    rows = cli_section().splitlines()[2:]
    assert [r.split("`")[1].split()[1] for r in rows] == [c.name for c in COMMANDS]


def test_terminal_only_commands_are_refused_in_chat() -> None:
    for command in COMMANDS:
        if not command.chat:
            text, code = run_line(f"/lightmem2 {command.name}")
            assert code == 2 and "not available in chat" in text, command.name


def test_a_command_can_be_added_from_one_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a new module's COMMAND plus its line in the table give: parser, dispatch, chat, exit code."""

    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--loud", action="store_true")

    def main(args: argparse.Namespace) -> tuple[str, int]:
        return ("HELLO" if args.loud else "hello"), 3

    spec = Command("hello", "hello [--loud]: greet.\n\nLonger help.", configure, main)
    monkeypatch.setattr("lightmem_plugin.commands.table.COMMANDS", (*COMMANDS, spec))
    assert run_line("/lightmem2 hello --loud") == ("HELLO", 3)
    assert "| `lightmem2 hello [-h] [--loud]` | greet. |" in cli_section()
    assert reply("text") == ("text", 0)


def test_the_cli_module_does_not_load_the_command_table() -> None:
    """``lightmem2 hook`` runs before the command table is imported: a host waits on every hook call."""
    code = "import sys, lightmem_plugin.cli; print('lightmem_plugin.commands.table' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
