"""Where each host session keeps its transcript, as the hooks saw it (``transcript_path``).

Why keep it: ``report``/``replay`` can then read the transcript of a session that ran without
lightmem2 in the request path and show what it would have saved. The index is a small JSON object
``{session_id: {"host": ..., "path": ...}}`` in the data dir, written atomically, newest
``MAX_ENTRIES`` kept.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..config import data_dir

MAX_ENTRIES = 500
INDEX = "transcripts.json"


def index_path() -> Path:
    """The index file."""
    return data_dir() / INDEX


def load() -> dict[str, dict[str, str]]:
    """The index (empty when absent or unreadable)."""
    try:
        data: Any = json.loads(index_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(k): {"host": str(v.get("host", "")), "path": str(v.get("path", ""))}
        for k, v in data.items()
        if isinstance(v, dict) and isinstance(v.get("path"), str)
    }


def record(session_id: str, host: str, path: str) -> bool:
    """Remember ``path`` for ``session_id``; False when it was already known (nothing written)."""
    entries = load()
    entry = {"host": host, "path": path}
    if entries.get(session_id) == entry:
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
