"""Does the session record a compaction carries name the files the session changed before it?

Usage: ``python benchmarks/compaction_record.py [TRACE ...]`` (default: the Claude Code sessions under
``../shared/traces/claude-code``). Each is replayed in aggressive mode (compaction before the host's on,
as by default); at every compaction lightmem2 made, the session record in the stub that carries it is
read as the model reads it, and checked against the files changed before that call, told apart from the
extractor: the paths of ``Edit``/``Write``/``MultiEdit``/``NotebookEdit`` calls, and what a simple scan of
the shell commands writes (:func:`record_recall.regex_truth`). A file counts as named when its path, or
its path under the directory the record says its paths are relative to, is in the record's text.
Writes ``benchmarks/results/compaction_record.json`` and prints it (issue #42: >= 95% named).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from record_recall import regex_truth  # noqa: E402

from lightmem_plugin.measure.replay import LightMemPolicy, replay_trace  # noqa: E402
from lightmem_plugin.measure.traces import load_trace  # noqa: E402

TRACES = ROOT.parent / "shared" / "traces" / "claude-code"
OUT = ROOT / "benchmarks" / "results" / "compaction_record.json"
EDITING = {
    "Edit": "file_path",
    "Write": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
MARK = "[lightmem2 session record]\n"
_BASE = re.compile(r"Paths below are relative to (\S+)/")


def changed_files(messages: list[dict[str, Any]]) -> set[str]:
    """The files the agent's tool calls changed in ``messages``: editing tools' paths, and what its
    shell commands write (relative paths as the commands name them)."""
    out: set[str] = set()
    for msg in messages:
        for call in msg.get("tool_calls") or ():
            name = (call.get("function") or {}).get("name")
            if name not in EDITING:
                continue
            try:
                path = json.loads(call["function"]["arguments"]).get(EDITING[name])
            except ValueError:
                continue
            if isinstance(path, str) and path:
                out.add(path)
    return out | regex_truth(messages)


def named(path: str, record: str) -> bool:
    """Whether ``record`` names ``path`` (whole, or relative to the base directory it declares)."""
    if path in record:
        return True
    base = _BASE.search(record)
    return (
        base is not None and path.startswith(base.group(1) + "/") and path[len(base.group(1)) + 1 :] in record
    )


def record_of(policy: LightMemPolicy, key: str) -> str:
    """The session record in the stub of compaction ``key`` ('' when none was carried)."""
    for stub in policy.session.evictor.state.stubs.values():
        if key in stub and MARK in stub:
            return stub.split(MARK, 1)[1]
    return ""


def measure(paths: list[Path]) -> dict[str, Any]:
    """Per compaction: the files changed before it, those its record names, and the misses."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="lightmem2-compaction-record-") as tmp:
        for path in paths:
            trace = load_trace(path)
            if not trace.calls:
                continue
            policy = LightMemPolicy(trace, "aggressive", Path(tmp) / trace.id)
            replay_trace(trace, policy)
            for c in policy.session.evictor.state.compactions:
                before = trace.calls[c.call - 1].uncompacted
                changed = sorted(changed_files(before))
                record = record_of(policy, c.key)
                missing = [p for p in changed if not named(p, record)]
                rows.append(
                    {
                        "session": trace.id,
                        "call": c.call,
                        "changed": len(changed),
                        "named": len(changed) - len(missing),
                        "missing": missing,
                        "record_chars": len(record),
                    }
                )
    changed = sum(r["changed"] for r in rows)
    found = sum(r["named"] for r in rows)
    return {
        "compactions": len(rows),
        "changed": changed,
        "named": found,
        "recall": round(found / changed, 4) if changed else None,
        "rows": rows,
    }


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(TRACES.glob("*.jsonl.gz"))
    result = measure(paths)
    if not argv:
        OUT.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
