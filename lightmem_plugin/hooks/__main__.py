"""``python -m lightmem_plugin.hooks HOST EVENT``: the host hook entry without the CLI parser."""

from __future__ import annotations

import sys

from . import exit_with

if __name__ == "__main__":
    exit_with(*(sys.argv[1:3] if len(sys.argv) == 3 else ("", "")))
