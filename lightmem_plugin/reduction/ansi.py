"""ANSI escape sequences: an escape-free copy of a line, for the patterns that classify lines.

Why apart: the kept bytes are never changed (DESIGN I4), but a coloured ``FAILED`` or traceback line
must still be recognised, so classifiers match against :func:`strip_ansi` of the line.
"""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), and two-byte escapes (ESC + one char).
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")


def strip_ansi(line: str) -> str:
    """``line`` without ANSI escape sequences."""
    return _ANSI_RE.sub("", line) if "\x1b" in line else line
