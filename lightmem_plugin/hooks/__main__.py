"""``python -m lightmem_plugin.hooks HOST EVENT``: the host hook entry without the CLI parser."""

from __future__ import annotations

import sys

from ..hosts.hook_runtime import exit_with


def run_line(line: str) -> tuple[str, int]:
    """The registry's chat runner, imported only when a prompt is a ``/lightmem2`` command."""
    from ..commands.table import run_line as registry_run_line  # lazy: ~0.4 s most hooks skip

    return registry_run_line(line)


if __name__ == "__main__":
    host, event = sys.argv[1:3] if len(sys.argv) == 3 else ("", "")
    exit_with(host, event, run_line)
