"""Reversible edits of a host's config files: backup once, write atomically, print the change.

Why this shape: ``install`` must be idempotent and ``install --uninstall`` must put every file back.
The first install of a file copies it to ``<name>.lightmem2.bak`` (or records that it did not exist)
and keeps a small state file ``<name>.lightmem2.json`` beside it: the hash of what we wrote and the
facts an undo needs (values we replaced). A re-install never touches the backup, so it always holds
the user's original. Uninstall restores the backup byte for byte when the file is still exactly what
we wrote; when the user (or the host) changed it since, a surgical undo removes only our entries and
the backup is kept for the user to compare.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import UsageError

Undo = Callable[[str, dict[str, Any]], str | None]
"""(current text, recorded facts) -> the text without our entries; None to delete the file."""


def backup_path(path: Path) -> Path:
    """Where the original of ``path`` is kept."""
    return path.with_name(path.name + ".lightmem2.bak")


def state_path(path: Path) -> Path:
    """Where the facts of our edit of ``path`` are kept."""
    return path.with_name(path.name + ".lightmem2.json")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_text(path: Path) -> str | None:
    """The file's text, None when it does not exist; UsageError when it cannot be read."""
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot read {path}: {err}; fix its permissions or encoding and rerun") from None


def _write(path: Path, data: bytes, mode: int | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode if mode is not None else 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    """Write ``text`` atomically, keeping the file's mode (0600 for a new file)."""
    _write(path, text.encode("utf-8"), _mode(path))


def _mode(path: Path) -> int | None:
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return None


def load_state(path: Path) -> dict[str, Any] | None:
    """The recorded facts of our edit of ``path``; None when we never edited it."""
    try:
        data = json.loads(state_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def diff(path: Path, before: str | None, after: str | None) -> str:
    """The change as unified-diff lines without context (so unrelated lines, keys, stay unprinted)."""
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        (after or "").splitlines(keepends=True),
        fromfile=str(path) if before is not None else "/dev/null",
        tofile=str(path) if after is not None else "/dev/null",
        n=0,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def apply(path: Path, new_text: str, facts: dict[str, Any]) -> str:
    """Write ``new_text`` to ``path`` (backing it up the first time); a report of the change.

    ``facts`` are kept for the undo; on a re-install the facts of the first install win, so the
    values recorded are always the user's own, never ours.
    """
    before = read_text(path)
    state = load_state(path)
    if before == new_text and state is not None:
        return f"unchanged: {path}"
    mode = _mode(path)
    if state is None:
        created = [str(p) for p in reversed(path.parents) if not p.exists()]
        if before is not None:
            _write(backup_path(path), before.encode("utf-8"), 0o600)
        state = {"existed": before is not None, "facts": {}, "created_dirs": created}
    elif before is not None and _sha(before.encode("utf-8")) != state.get("written_sha256"):
        # someone else (the user, the host recording trust) edited it since our last write: a restore
        # of the backup would undo their edits, so every later uninstall is the surgical one
        state["edited_since"] = True
    state["facts"] = {**facts, **state.get("facts", {})}
    data = new_text.encode("utf-8")
    _write(path, data, mode)
    state["written_sha256"] = _sha(data)
    _write(state_path(path), (json.dumps(state, indent=1, sort_keys=True) + "\n").encode(), 0o600)
    where = f" (original saved as {backup_path(path).name})" if state["existed"] else " (new file)"
    return f"updated: {path}{where}\n" + diff(path, before, new_text)


def facts_of(path: Path) -> dict[str, Any]:
    """The facts recorded by the first install of ``path`` (empty when none)."""
    state = load_state(path) or {}
    facts = state.get("facts")
    return facts if isinstance(facts, dict) else {}


def restore(path: Path, undo: Undo) -> str:
    """Put ``path`` back as it was before install; a report of what was done."""
    state = load_state(path)
    if state is None:
        return f"not installed: {path} (nothing to restore)"
    current = read_text(path)
    facts = facts_of(path)
    backup = backup_path(path)
    exact = (
        current is not None
        and _sha(current.encode("utf-8")) == state.get("written_sha256")
        and not state.get("edited_since")
    )
    if exact:
        if state.get("existed"):
            original = backup.read_bytes()
            _write(path, original, _mode(path))
            after: str | None = original.decode("utf-8")
        else:
            path.unlink(missing_ok=True)
            after = None
        backup.unlink(missing_ok=True)
        note = "restored exactly"
    else:
        after = undo(current, facts) if current is not None else None
        if after is not None and not state.get("existed") and after.strip() in ("", "{}"):
            after = None  # we created it and nothing of the user's is left in it
        if after is None:
            path.unlink(missing_ok=True)
        else:
            _write(path, after.encode("utf-8"), _mode(path))
        kept = f"; your original stays in {backup.name}" if backup.exists() else ""
        note = f"changed since install, removed only lightmem2's entries{kept}"
    state_path(path).unlink(missing_ok=True)
    for folder in reversed(state.get("created_dirs") or []):
        with contextlib.suppress(OSError):
            Path(folder).rmdir()  # only when empty: what the user put there stays
    return f"{note}: {path}\n" + diff(path, current, after)
