"""One line for a command its files stopped: a read-only or full data dir, a file it may not write.

Why apart from the commands: the CLI maps these OS and SQLite errors at its boundary (what failed,
where, the fix; never a traceback), and ``doctor`` words its data dir check the same way.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path

from ..store.home import Home

_FULL = (errno.ENOSPC, errno.EDQUOT)
_DENIED = (errno.EROFS, errno.EACCES, errno.EPERM)


def disk_failure(err: OSError | sqlite3.Error) -> str:
    """One line for a command stopped by its files (a read-only or full data dir, a file it may not
    write): what failed, where, and the fix. Measured before: status, report, search, doctor, mode,
    export and visual printed a traceback on a read-only data dir, and mode one on a full disk."""
    home = Home.default().root
    named = getattr(err, "filename", None)
    where = Path(named) if named else home
    if where.parent == home or not named:
        where = home  # a store or temp file of the data dir: the dir is what the user fixes
    reason = getattr(err, "strerror", None) or str(err)
    code = getattr(err, "errno", None)
    with contextlib.suppress(OSError):
        if os.statvfs(where).f_flag & os.ST_RDONLY:
            code, reason = errno.EROFS, "read-only file system"
    text = str(err).lower()
    if code in _FULL or "disk is full" in text:
        fix = f"free space on the disk that holds {where}, or set LIGHTMEM2_HOME to a dir on another disk"
    elif code in _DENIED or "readonly" in text or "unable to open" in text:
        fix = f"make {where} writable for this user, or set LIGHTMEM2_HOME to a writable dir"
    else:
        fix = f"check {where} (its disk, permissions and free space), then run the command again"
    return f"cannot use {where}: {reason}; {fix}"
