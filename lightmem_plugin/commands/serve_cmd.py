"""serve [--host 127.0.0.1] [--port N] [--allow-remote]: run the local proxy and the OpenClaw sidecar.

Hosts reach it over loopback: Claude Code through ``ANTHROPIC_BASE_URL``, Codex through a model
provider ``base_url``, OpenClaw's plugin through the sidecar routes. A non-loopback bind is refused
unless ``--allow-remote`` is given. ``--port 0`` takes a free port and names it on stderr (``lightmem2
serve: listening on URL``). Runs until interrupted.
"""

from __future__ import annotations

import argparse

from ..hookspec import LineRunner
from ..server import serve
from .base import Command, Outcome


def run(host: str | None, port: int | None, allow_remote: bool, commands: LineRunner | None) -> str:
    """Serve until interrupted, answering the sidecar's chat commands with ``commands``; returns nothing
    to print."""
    serve(None, host, port, allow_remote, commands)
    return ""


def configure(parser: argparse.ArgumentParser) -> None:
    """``--host``, ``--port N``, ``--allow-remote``."""
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--allow-remote", action="store_true")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 serve`` until interrupted."""
    return run(args.host, args.port, args.allow_remote, args.run_remote_line)


COMMAND = Command("serve", __doc__, configure, main, chat=False)
