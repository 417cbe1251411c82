"""Small, format-keeping edits of a TOML file as text (Codex's ``config.toml``).

Why text and not a TOML round trip: the user's comments, order and spacing must survive install and
uninstall byte for byte. We only ever (1) replace or insert one top-level ``key = value`` line and (2)
append one block between marker comments at the end, and every result is checked with ``tomllib``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

BEGIN = "# >>> lightmem2 (added by `lightmem2 install codex`; removed by `--uninstall`)"
END = "# <<< lightmem2"
_TABLE = re.compile(r"^\s*\[")

Value = str | bool | int | Sequence[str] | Mapping[str, str]


def value(v: Value) -> str:
    """``v`` as a TOML value (strings use JSON escapes, which TOML basic strings share)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + " }"
    return "[" + ", ".join(value(x) for x in v) + "]"


def table(name: str, items: Mapping[str, Value]) -> str:
    """``[name]`` followed by one ``key = value`` line per item."""
    return f"[{name}]\n" + "".join(f"{k} = {value(v)}\n" for k, v in items.items())


def _top_end(lines: list[str]) -> int:
    """Index of the first table header line (the end of the top-level keys)."""
    return next((i for i, line in enumerate(lines) if _TABLE.match(line)), len(lines))


def top_key_line(text: str, key: str) -> str | None:
    """The top-level line that sets ``key`` (without its newline), None when there is none."""
    lines = text.splitlines()
    pat = re.compile(rf"^\s*{re.escape(key)}\s*=")
    return next((ln for ln in lines[: _top_end(lines)] if pat.match(ln)), None)


def set_top_key(text: str, key: str, line: str) -> str:
    """``text`` with the top-level ``key`` line replaced by ``line`` (inserted before the first table)."""
    lines = text.splitlines(keepends=True)
    end = _top_end(lines)
    pat = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for i in range(end):
        if pat.match(lines[i]):
            newline = "\n" if lines[i].endswith("\n") else ""
            lines[i] = line + newline
            return "".join(lines)
    if end and not lines[end - 1].endswith("\n"):
        lines[end - 1] += "\n"
    lines.insert(end, line + "\n")
    return "".join(lines)


def drop_top_line(text: str, line: str) -> str:
    """``text`` without the top-level line equal to ``line``."""
    lines = text.splitlines(keepends=True)
    end = _top_end(lines)
    for i in range(end):
        if lines[i].rstrip("\r\n") == line:
            del lines[i]
            break
    return "".join(lines)


OURS = ("model_providers.lightmem2", "mcp_servers.lightmem2")
"""The tables our block holds; any other table found inside it is the host's."""
_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?")


def _ours(header: str) -> bool:
    name = header.replace('"', "").replace("'", "").replace(" ", "")
    return any(name == o or name.startswith(o + ".") for o in OURS)


def foreign_sections(block: str) -> str:
    """The tables inside ``block`` that are not ours, verbatim and in order.

    Why: Codex writes trust entries (``[tui]``, ``[hooks.state."..."]``, ``[projects."..."]``) where its
    TOML editor puts them, which can be inside our markers; dropping them with our block made the TUI
    ask for trust again after every reinstall."""
    out: list[str] = []
    keep = False
    for line in block.splitlines(keepends=True):
        m = _HEADER.match(line)
        if m:
            keep = not _ours(m.group(1))
        elif line.strip() in (BEGIN, END):
            continue
        if keep:
            out.append(line)
    return "".join(out)


def strip_block(text: str) -> str:
    """``text`` without our marked block (and the one blank line we put before it); tables the host
    wrote inside it stay where the block was."""
    start = text.find(BEGIN)
    if start < 0:
        return text
    stop = text.find(END, start)
    stop = len(text) if stop < 0 else stop + len(END)
    if text[stop : stop + 1] == "\n":
        stop += 1
    kept = foreign_sections(text[start:stop])
    if kept and not kept.endswith("\n"):
        kept += "\n"
    if text[:start].endswith("\n\n") and not kept:
        start -= 1
    return text[:start] + kept + text[stop:]


def append_block(text: str, body: str) -> str:
    """``text`` with ``body`` appended between our markers (after one blank line)."""
    base = strip_block(text)
    if base and not base.endswith("\n"):
        base += "\n"
    sep = "\n" if base else ""
    return f"{base}{sep}{BEGIN}\n{body}{END}\n"
