"""Where each host session keeps its transcript, as the hooks saw it (``transcript_path``).

Why keep it: ``report``/``replay`` can then read the transcript of a session that ran without
lightmem2 in the request path and show what it would have saved. The index is a small JSON object
``{session_id: {"host": ..., "path": ..., "history": N}}`` in the data dir, written atomically, newest
``MAX_ENTRIES`` kept. ``history`` counts the times the host dropped the session's history (a compact
or a clear): the hooks compare a new output only with outputs the model can still read.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ...store.home import Home

MAX_ENTRIES = 500


def index_path() -> Path:
    """The index file."""
    return Home.default().transcripts_file


def load() -> dict[str, dict[str, str]]:
    """The index (empty when absent or unreadable)."""
    try:
        data: Any = json.loads(index_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, dict[str, str]] = {}
    for k, v in data.items():
        if isinstance(v, dict) and isinstance(v.get("path"), str):
            out[str(k)] = {"host": str(v.get("host", "")), "path": str(v.get("path", ""))}
            if str(v.get("history", "")).isdigit():
                out[str(k)]["history"] = str(v["history"])
    return out


def history(session_id: str) -> int:
    """How many times the host dropped ``session_id``'s history so far (0: never, or not known)."""
    return int(load().get(session_id, {}).get("history", "0"))


def record(session_id: str, host: str, path: str, dropped: bool = False) -> bool:
    """Remember ``path`` for ``session_id`` (``dropped``: the host just compacted or cleared its
    history); False when nothing changed (nothing written)."""
    entries = load()
    known = entries.get(session_id, {})
    entry = {"host": host, "path": path}
    count = int(known.get("history", "0")) + (1 if dropped else 0)
    if count:
        entry["history"] = str(count)
    if known == entry:
        return False
    entries.pop(session_id, None)
    entries[session_id] = entry
    keep = dict(list(entries.items())[-MAX_ENTRIES:])
    target = index_path()
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".transcripts-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(keep, fh, indent=1)
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def transcript_for(session_id: str) -> Path | None:
    """The transcript a hook saw for ``session_id``, if it still exists."""
    entry = load().get(session_id)
    if not entry:
        return None
    path = Path(entry["path"])
    return path if path.is_file() else None
