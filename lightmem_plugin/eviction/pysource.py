"""Which files a Python source opens for reading or writing, from its text.

Why: agents edit files by writing small Python scripts (``with open(path, 'w')``) and running them, so
the session record must read those scripts to know what was written. Only literal paths and variables
assigned a literal are followed; anything computed is ignored rather than guessed.
"""

from __future__ import annotations

import re

_OPEN = re.compile(
    r"""\bopen\(\s*(?:[rbf]?(['"])(?P<lit>[^'"\n]+)\1|(?P<var>[A-Za-z_]\w*))\s*"""
    r"""(?:,\s*(?:mode\s*=\s*)?[rb]?(['"])(?P<mode>[rwaxbt+]+)\4)?"""
)
_ASSIGN = re.compile(r"""^[ \t]*(?P<var>[A-Za-z_]\w*)\s*=\s*[rbf]?(['"])(?P<lit>[^'"\n]+)\2[ \t]*$""", re.M)
_PATHLIB = re.compile(
    r"""Path\(\s*[rf]?(['"])(?P<lit>[^'"\n]+)\1\s*\)\.(?P<op>write_text|write_bytes|read_text)"""
)


def file_uses(source: str) -> tuple[list[str], list[str], list[str]]:
    """Raw paths ``source`` reads, writes, and writes whole without reading them, in order of
    appearance (duplicates kept in the first two).

    Whole: opened ``'w'``/``'x'`` or ``Path(...).write_text``, and not read by the same source. Why: a
    script that wrote ``model_checks.py.fixed`` made a new file, and a finished task's summary listed
    it under "Files modified"; a script that reads a module and writes it back edits it."""
    reads: list[str] = []
    writes: list[str] = []
    fresh: list[str] = []
    if "open(" not in source and "Path(" not in source:
        return reads, writes, fresh
    names = {m.group("var"): m.group("lit") for m in _ASSIGN.finditer(source)}
    for m in _OPEN.finditer(source):
        raw = m.group("lit") or names.get(m.group("var") or "")
        mode = m.group("mode") or "r"
        if raw:
            (writes if any(c in mode for c in "wax+") else reads).append(raw)
            if "w" in mode or "x" in mode:
                fresh.append(raw)
    for m in _PATHLIB.finditer(source):
        (writes if m.group("op").startswith("write") else reads).append(m.group("lit"))
        if m.group("op").startswith("write"):
            fresh.append(m.group("lit"))
    whole = [p for p in dict.fromkeys(fresh) if p not in reads]
    return reads, writes, whole
