"""Snapshots of each session's record on disk, so ``lightmem2 resume`` can hand it to a new session.

Why snapshots of the rendering rather than the messages: the record is what a new session needs, it is
small, and storing it (redacted, and sealed with the archive key: the record quotes the user's goals word
for word, and a credential folded into one line escapes the patterns that need its line breaks) keeps
conversation text off the disk. One JSON line per snapshot,
taken every ``eviction.batchTurns`` calls when the record changed; ``--at-turn N`` reads the last
snapshot taken at or before message N, i.e. what was believed then.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import LightMemError, UsageError
from ..security.redaction import Redactor
from ..store.sealing import Sealer, home_sealer, open_text, seal_text
from .record_render import RecordLevel

LEVELS: tuple[RecordLevel, ...] = ("critical", "standard", "full")


def _file_name(session_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", session_id)[:80]
    return f"{safe}.jsonl"


class RecordStore:
    """``<data dir>/records/<session>.jsonl``, 0600 files in a 0700 directory."""

    def __init__(self, root: Path, redactor: Redactor | None = None, sealer: Sealer | None = None) -> None:
        """``sealer``: the archive's (default: this home's key; lines are then only redacted when no key
        can be had)."""
        self.root = Path(root)
        self.redactor = redactor or Redactor()
        self.sealer = sealer if sealer is not None else home_sealer()

    def append(self, session_id: str, turn: int, renders: Mapping[str, str]) -> None:
        """Store one snapshot (credentials redacted)."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.root / _file_name(session_id)
        row: dict[str, object] = {"session": session_id, "turn": turn}
        row.update({k: self.redactor.redact(renders[k]) for k in LEVELS})
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            text = json.dumps(row, sort_keys=True)
            fh.write((seal_text(self.sealer, text) if self.sealer is not None else text) + "\n")

    def sessions(self) -> list[str]:
        """Session ids with snapshots, most recently written first."""
        if not self.root.exists():
            return []
        files = sorted(self.root.glob("*.jsonl"), key=lambda p: (-p.stat().st_mtime, p.name))
        out = []
        for f in files:
            rows = self._rows(f)
            if rows:
                out.append(str(rows[-1]["session"]))
        return out

    def _rows(self, path: Path) -> list[dict[str, Any]]:
        rows = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(open_text(self.sealer, line, f"a line of {path.name}")))
            except (json.JSONDecodeError, LightMemError):
                continue  # a torn last line after a crash, or sealed with a lost key: skip it, keep the rest
        return rows

    def snapshot(self, session_id: str | None = None, at_turn: int | None = None) -> dict[str, Any]:
        """The snapshot to resume from: the session's latest, or the last one at or before ``at_turn``."""
        known = self.sessions()
        if not known:
            raise UsageError("no session record yet; records are kept once a session has made a few calls")
        sid = session_id or known[0]
        if sid not in known:
            raise UsageError(f'unknown session "{sid}"; known: {", ".join(known[:10])}')
        rows = self._rows(self.root / _file_name(sid))
        if at_turn is not None:
            rows = [r for r in rows if int(r["turn"]) <= at_turn]
            if not rows:
                raise UsageError(f"session {sid} has no record at or before turn {at_turn}; try a later turn")
        return rows[-1]
