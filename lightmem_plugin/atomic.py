"""Replace a small private file atomically: a unique temp file beside it, fsync, rename.

Why one writer: ``config.json`` can hold ``estimator.proxyApiKey``, so it must stay 0600 in a 0700
directory (DESIGN I6); measured before this, ``lightmem2 mode`` rewrote it 0644, created the dir
0755, every writer used the same ``config.json.tmp`` name (two writers corrupted the file), and a
full disk left a 0-byte temp file behind. Here each write gets its own temp name (``mkstemp``, created
0600), a failed write removes its temp file, and readers only ever see the old or the new file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

TEMP_PREFIX = ".tmp-"
"""Temp files start with this, so a crash leftover is recognisable (the registry's GC removes them)."""


def write_private_bytes(path: Path, data: bytes, exclusive: bool = False) -> None:
    """Make ``path`` hold ``data``, 0600 in a 0700 directory, or leave it untouched on error.

    ``exclusive``: only if ``path`` does not exist yet (``FileExistsError`` otherwise), for a file
    that two processes may race to create and the first one must win (a key)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        if exclusive:
            os.link(tmp, path)  # fails when path exists: never replaces what another process made
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_private_text(path: Path, text: str) -> None:
    """:func:`write_private_bytes` of ``text`` as UTF-8."""
    write_private_bytes(path, text.encode("utf-8"))
