"""The note lightmem2 put in the context after each host compaction, kept so it never changes.

Why keep it: on OpenClaw the note is added to the compaction summary in every ``assemble`` after the
compaction, and must be byte-identical each time (the prefix cache, DESIGN I2), while the session
record it quotes goes on changing; on Claude Code the ``PreCompact`` hook writes it (it still sees
the history) and the ``SessionStart`` hook that follows the compaction hands it to the model. One
JSON line per note in ``<data dir>/records/compactions/<session>.jsonl``, 0600 in a 0700 directory,
sealed with the archive key like the records (a note quotes the user's goals), redacted without one.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..errors import LightMemError
from ..security.redaction import Redactor
from .sealing import Sealer, home_sealer, open_text, seal_text

MAX_NOTES = 200
"""Notes kept per session file (the oldest dropped beyond it): one per compaction of the session."""


def _file_name(session_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", session_id)[:80] + ".jsonl"


class CompactionNotes:
    """Notes by (session, compaction id); the id is the host's: a summary's hash, a compaction count."""

    def __init__(self, root: Path, sealer: Sealer | None = None, redactor: Redactor | None = None) -> None:
        self.root = Path(root)
        self.sealer = sealer if sealer is not None else home_sealer()
        self.redactor = redactor or Redactor()

    def _path(self, session_id: str) -> Path:
        return self.root / _file_name(session_id)

    def _rows(self, session_id: str) -> list[dict[str, str]]:
        try:
            text = self._path(session_id).read_text(encoding="utf-8")
        except OSError:
            return []
        rows = []
        for line in text.splitlines():
            try:
                row = json.loads(open_text(self.sealer, line, "a compaction note"))
            except (ValueError, LightMemError):
                continue  # a torn line after a crash, or one sealed with a lost key
            if isinstance(row, dict) and row.get("session") == session_id:
                rows.append({"id": str(row.get("id", "")), "note": str(row.get("note", ""))})
        return rows

    def get(self, session_id: str, compaction: str) -> str | None:
        """The note of that compaction, None when none was kept."""
        found = [r["note"] for r in self._rows(session_id) if r["id"] == compaction]
        return found[0] if found else None

    def put(self, session_id: str, compaction: str, note: str) -> str:
        """Keep ``note`` for that compaction unless one is kept already; the note kept (first wins, so
        two processes that raced store and answer the same text)."""
        known = self.get(session_id, compaction)
        if known is not None:
            return known
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        row = json.dumps({"session": session_id, "id": compaction, "note": note}, sort_keys=True)
        line = seal_text(self.sealer, row) if self.sealer is not None else self.redactor.redact(row)
        rows = self._path(session_id)
        fd = os.open(rows, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
        self._trim(rows)
        return self.get(session_id, compaction) or note

    def _trim(self, path: Path) -> None:
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_NOTES:
            tmp = path.with_suffix(".tmp")
            tmp.write_text("\n".join(lines[-MAX_NOTES:]) + "\n", encoding="utf-8")
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
