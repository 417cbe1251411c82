"""export --format json|markdown|canvas [--session ID]: the session record and its ledger totals, as a file.

Why exports: the record (goals, decisions and what superseded them, tasks, files, open errors) is
worth keeping beyond the session, in notes or a review. ``json`` is for tools, ``markdown`` for people,
``canvas`` an Obsidian Canvas (``.canvas``) board: one column per section, an edge from each dropped
decision to the one that superseded it. The record comes from the latest snapshot ``resume`` reads (its
``full`` rendering, parsed back into sections); the totals from the ledger. Output is deterministic.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from ..errors import UsageError
from ..eviction.record_store import LEVELS, RecordStore
from ..store.home import Home
from ..store.ledger import Ledger
from ..views.format import to_json, totals_dict
from .base import Command, Outcome

FORMATS = ("json", "markdown", "canvas")
_LISTS = {
    "Open errors:": "openErrors",
    "Decisions in force:": "decisions",
    "Dropped decisions:": "droppedDecisions",
    "Earlier goals:": "earlierGoals",
}
_FILES = {
    "Files modified": "modified",
    "Files created": "created",
    "Files deleted": "deleted",
    "Files read": "read",
}
_DROPPED = re.compile(
    r"^(?P<id>\S+) (?P<text>.*?) \((?P<status>\w+) at turn (?P<turn>\d+)(?: by (?P<by>\S+))?\)$"
)
_NODE_W, _GAP = 380, 40


def sections(full: str) -> dict[str, Any]:
    """The ``full`` record rendering parsed back into its sections."""
    out: dict[str, Any] = {"goal": None, "tasks": None, "files": {}, **{v: [] for v in _LISTS.values()}}
    current: str | None = None
    for line in full.splitlines()[1:]:
        if line in _LISTS:
            current = _LISTS[line]
        elif line.startswith("- ") and current is not None:
            out[current].append(line[2:])
        elif line.startswith("Goal (turn "):
            out["goal"], current = line, None
        elif line.startswith("Tasks: "):
            out["tasks"], current = line[len("Tasks: ") :], None
        elif ": " in line and line.split(": ", 1)[0] in _FILES:
            label, paths = line.split(": ", 1)
            out["files"][_FILES[label]], current = paths.split(", "), None
    out["supersession"] = [
        {"id": m["id"], "decision": m["text"], "status": m["status"], "turn": int(m["turn"]), "by": m["by"]}
        for m in (_DROPPED.match(d) for d in out["droppedDecisions"])
        if m
    ]
    return out


def _totals(ledger: Ledger | None, session: str) -> dict[str, Any] | None:
    if ledger is None or session not in ledger.sessions():
        return None
    return totals_dict(ledger.totals(session))


def data(store: RecordStore, ledger: Ledger | None, session: str | None = None) -> dict[str, Any]:
    """The export as JSON data."""
    snap = store.snapshot(session)
    sid = str(snap["session"])
    return {
        "session": sid,
        "turn": int(snap["turn"]),
        "record": {level: snap[level] for level in LEVELS},
        "sections": sections(snap["full"]),
        "ledger": _totals(ledger, sid),
    }


def markdown(d: dict[str, Any]) -> str:
    """The export as a Markdown note."""
    full = d["record"]["full"]
    fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", full)), default=0))
    lines = [f"# lightmem2 session {d['session']}", "", f"Record at turn {d['turn']}:", "", fence + "text"]
    lines += [full, fence, ""]
    totals = d["ledger"]
    if totals is None:
        lines.append("No ledger totals recorded for this session.")
    else:
        lines += ["## Ledger totals", "", "| figure | value |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in sorted(totals.items()) if not isinstance(v, dict | list)]
    return "\n".join(lines) + "\n"


def _node(node_id: str, text: str, x: int, y: int) -> dict[str, Any]:
    height = 60 + 22 * (len(text) // 48 + text.count("\n"))
    return {"id": node_id, "type": "text", "text": text, "x": x, "y": y, "width": _NODE_W, "height": height}


def canvas(d: dict[str, Any]) -> dict[str, Any]:
    """The export as Obsidian Canvas data: a root card, one column per section, supersession edges."""
    s = d["sections"]
    root = f"**lightmem2 session {d['session']}** (turn {d['turn']})"
    if d["ledger"]:
        t = d["ledger"]
        root += f"\n{t['calls']} calls, K {t['k']} vs {t['kBaseline']} vanilla"
    nodes, edges = [_node("session", root, 0, -200)], []
    files = [f"{state}: {p}" for state, paths in s["files"].items() for p in paths]
    columns = [
        ("goals", "goals", [g for g in [s["goal"], *s["earlierGoals"]] if g]),
        ("decisions", "decisions in force", s["decisions"]),
        ("dropped", "dropped decisions", s["droppedDecisions"]),
        ("tasks", "tasks", [s["tasks"]] if s["tasks"] else []),
        ("files", "files", files),
        ("errors", "open errors", s["openErrors"]),
    ]
    ids: dict[str, str] = {}
    for col, (prefix, label, items) in enumerate(columns):
        x, y = col * (_NODE_W + _GAP), 0
        for n, text in enumerate(items, 1):
            node = _node(f"{prefix}-{n}", text, x, y)
            nodes.append(node)
            y += node["height"] + _GAP
            if n == 1:
                edges.append(
                    {"id": f"e-{prefix}", "fromNode": "session", "toNode": node["id"], "label": label}
                )
            if prefix == "dropped" and (m := _DROPPED.match(text)):
                ids[m["id"]] = node["id"]
    for link in s["supersession"]:
        if not link["by"]:
            continue
        target = ids.get(link["by"])
        if target is None:  # superseded by a decision still in force (rendered without its id)
            target = f"decision-{link['by']}"
            y = -200 - 120 * sum(1 for n in nodes if n["id"].startswith("decision-"))
            nodes.append(_node(target, f"{link['by']} (in force)", 2 * (_NODE_W + _GAP), y))
            ids[link["by"]] = target
        label = f"{link['status']} at turn {link['turn']}"
        edges.append({"id": f"e-{link['id']}", "fromNode": ids[link["id"]], "toNode": target, "label": label})
    return {"nodes": nodes, "edges": edges}


def run(
    format: str,
    session: str | None = None,
    store: RecordStore | None = None,
    ledger: Ledger | None = None,
) -> str:
    """The text ``lightmem2 export`` prints; ``store`` and ``ledger`` default to the data dir's."""
    if format not in FORMATS:
        raise UsageError(f'unknown export format "{format}"; allowed: {", ".join(FORMATS)}')
    if store is None:
        store = RecordStore(Home.default().records_dir)
    if ledger is None:
        with Ledger.default() as own:
            d = data(store, own, session)
    else:
        d = data(store, ledger, session)
    if format == "json":
        return to_json(d)
    if format == "markdown":
        return markdown(d)
    return to_json(canvas(d))


def configure(parser: argparse.ArgumentParser) -> None:
    """``--format``, ``--session ID``."""
    parser.add_argument("--format", required=True, choices=["json", "markdown", "canvas"])
    parser.add_argument("--session", metavar="ID")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 export`` of the user's records."""
    return run(args.format, args.session)


COMMAND = Command("export", __doc__, configure, main)
