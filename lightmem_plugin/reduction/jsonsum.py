"""JSON summary: the shape of a large JSON document, its keys, array lengths and first items verbatim.

Why: API replies and dumps are mostly repetition (hundreds of records with the same keys). The agent
needs to know the structure and see a few real records; the rest is archived. The pass runs only on
text that is one valid JSON value (no NaN/Infinity, nothing before or after it), so logs or code
that merely look like JSON are left to the other passes.

The summary is rendered at decreasing levels of detail until it fits the budget: fewer array items,
shorter strings, shallower nesting. Object keys keep document order, so the output is deterministic.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .spec import PassSpec
from .work import Piece, Work

if TYPE_CHECKING:
    from .base import PassContext

MAX_JSON_CHARS = 8_000_000
"""Above this the parse itself is too costly for a pass; truncation handles such outputs."""

# (items shown per array, max string length, max depth expanded, max keys shown per object)
LEVELS: tuple[tuple[int, int, int, int], ...] = (
    (3, 160, 8, 40),
    (2, 80, 6, 25),
    (1, 60, 4, 15),
    (1, 40, 3, 8),
    (1, 24, 2, 5),
)
INLINE = 100
"""A subtree whose compact form is at most this long is shown on one line."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not valid JSON: {name}")


def parse(text: str) -> Any | None:
    """The JSON value in ``text`` (strict: no NaN/Infinity), or None when it is not one JSON document."""
    s = text.strip()
    if len(s) < 2 or len(s) > MAX_JSON_CHARS or s[0] not in "{[" or s[-1] not in "}]":
        return None
    try:
        return json.loads(s, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _prune(value: Any, items: int, strlen: int, depth: int, keys: int) -> Any:
    """A copy of ``value`` cut to the level's limits, with markers saying what was cut."""
    if isinstance(value, str):
        return value if len(value) <= strlen else value[:strlen] + f"…(+{len(value) - strlen} chars)"
    if isinstance(value, list):
        if depth <= 0 and value:
            return f"…[array of {len(value)}]"
        head = [_prune(v, items, strlen, depth - 1, keys) for v in value[:items]]
        if len(value) > items:
            head.append(f"…({len(value) - items} more items, {len(value)} in all)")
        return head
    if isinstance(value, dict):
        if depth <= 0 and value:
            return f"…{{object with {len(value)} keys}}"
        out: dict[str, Any] = {}
        for n, (k, v) in enumerate(value.items()):
            if n >= keys:
                out["…"] = f"{len(value) - keys} more keys"
                break
            out[k] = _prune(v, items, strlen, depth - 1, keys)
        return out
    return value


def _render(value: Any, indent: int, out: list[str], prefix: str, suffix: str) -> None:
    """Pretty-print ``value`` as lines, keeping small subtrees on one line."""
    pad = "  " * indent
    compact = _dumps(value)
    if len(compact) <= INLINE or not isinstance(value, dict | list) or not value:
        out.append(f"{pad}{prefix}{compact}{suffix}")
        return
    opener, closer = ("{", "}") if isinstance(value, dict) else ("[", "]")
    out.append(f"{pad}{prefix}{opener}")
    entries = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
    for n, (k, v) in enumerate(entries):
        comma = "," if n < len(entries) - 1 else ""
        key = "" if k is None else _dumps(k) + ": "
        _render(v, indent + 1, out, key, comma)
    out.append(f"{pad}{closer}{suffix}")


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"JSON object with {len(value)} keys"
    return f"JSON array of {len(value)} items"


def summarize(text: str, budget: int) -> str | None:
    """A summary of the JSON document ``text`` in at most ``budget`` chars, or None.

    None when ``text`` is not valid JSON or no level of detail fits. The first line says what the
    document is and that arrays and strings were cut.
    """
    value = parse(text)
    if not isinstance(value, dict | list):
        return None
    header = f"{_describe(value)} (summary: arrays cut to their first items, long strings shortened)"
    for items, strlen, depth, keys in LEVELS:
        try:
            pruned = _prune(value, items, strlen, depth, keys)
            if len(_dumps(pruned)) + len(header) > budget:
                continue  # the pretty form is never shorter than the compact one
            lines: list[str] = [header]
            _render(pruned, 0, lines, "", "")
        except (RecursionError, ValueError):
            return None
        result = "\n".join(lines)
        if len(result) <= budget:
            return result
    return None


WHAT = "chars of JSON"


def select(work: Work, ctx: PassContext) -> list[Piece] | None:
    """The summary and one stub, when the whole work text is one JSON document."""
    if work.origin is None:
        return None
    summary = summarize("\n".join(work.lines), ctx.table.capChars)
    return None if summary is None else [summary, work.whole(WHAT)]


PASS = PassSpec("json", "select", False, "one JSON document becomes a summary of its shape", select, WHAT)
