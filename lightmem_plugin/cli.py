"""``lightmem2`` command line: parse the arguments, run the command, map errors to exit codes.

The commands, their arguments and the parser live in :mod:`lightmem_plugin.commands.table`; this
module only turns their outcome into stdout and an exit code. Exit codes: 0 ok, 2 bad usage or bad
input (one line on stderr: what, the bad value, the fix), 1 an internal failure.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Sequence

from .commands import hook_cmd
from .commands._disk import disk_failure
from .errors import LightMemError

__all__ = ["main"]


def chat_line(line: str) -> tuple[str, int]:
    """The registry's chat runner for a hook's ``/lightmem2 ...`` prompt, imported on that call only."""
    from .commands.table import run_line  # lazy: see main

    return run_line(line)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lightmem2`` console script."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == [hook_cmd.COMMAND.name]:
        hook_cmd.run_raw(args_list[1:], chat_line)  # before argparse and before the registry (see below)
    # lazy: importing every command (pipeline, pillow, httpx) costs ~0.4 s, which a host hook must not pay
    from .commands.table import build_parser, dispatch, find

    try:
        args = build_parser().parse_args(args_list)
        text, code = dispatch(args)
    except LightMemError as err:
        print(f"lightmem2: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    except (OSError, sqlite3.Error) as err:  # the disk, not lightmem2: one line saying what and the fix
        print(f"lightmem2: {disk_failure(err)}", file=sys.stderr)
        return 1
    if find(args.command).verbatim:  # byte-exact: no newline added, undecodable bytes restored
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
        sys.stdout.buffer.flush()
    elif text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
