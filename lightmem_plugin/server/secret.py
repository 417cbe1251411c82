"""The per-install secret that makes the ``/sidecar`` routes ours alone.

Why a secret: loopback is not private. Every local user, and every web page the user opens, can reach
127.0.0.1; the sidecar serves archived tool outputs (which may hold credentials), session records and
commands that change the config. A random value in a file only this uid can read (0600 in a 0700 data
dir) separates "our OpenClaw plugin" from "someone else on this machine": the plugin sends it in the
``X-Lightmem2-Secret`` header and the sidecar compares it in constant time.

Why one file, created once: the plugin and ``serve`` are separate processes that may start in either
order, or both at once. The value is written whole to a private temporary file (``O_EXCL``) and then
published with ``link()``, which fails with ``EEXIST`` when another process published first; the loser
reads the winner's value. So every process agrees, and no reader ever sees a half-written file
(``O_EXCL`` on the final name alone would let a reader see it empty). On a filesystem without hard
links the final name is created with ``O_EXCL`` directly and readers wait a moment for its content.

Where: ``<data dir>/sidecar.secret`` (``$LIGHTMEM2_HOME`` or the platformdirs data dir).
``lightmem2 config secret-path`` prints the path (creating the secret if needed), which is how the
OpenClaw plugin finds it without knowing the platform's directory rules.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import os
import re
import secrets
import time
from pathlib import Path

from ..errors import SecretError
from ..store.home import SECRET_FILE, Home

FILE_NAME = SECRET_FILE
HEADER = "x-lightmem2-secret"
CHALLENGE_HEADER = "x-lightmem2-challenge"
_VALUE = re.compile(r"[0-9a-f]{64}")
_PARTIAL_WAIT_S = 1.0


def secret_path(home: Path | None = None) -> Path:
    """Where the secret lives for ``home`` (default: the data dir)."""
    return (Home(home) if home is not None else Home.default()).secret_file


def load_or_create(path: Path | None = None) -> str:
    """The secret at ``path`` (default :func:`secret_path`), created on first use; SecretError if unsafe."""
    path = path or secret_path()
    try:
        return read_secret(path)
    except FileNotFoundError:
        pass
    _create(path)
    return read_secret(path)


def read_secret(path: Path, wait_s: float = _PARTIAL_WAIT_S) -> str:
    """The secret stored at ``path``; FileNotFoundError if absent, SecretError if it is not safe to use.

    A file still being written (created with ``O_EXCL`` where links are not available) is waited for up
    to ``wait_s`` seconds.
    """
    deadline = time.monotonic() + wait_s
    while True:
        value = _read_once(path)
        if _VALUE.fullmatch(value):
            return value
        if len(value) >= 64 or time.monotonic() > deadline:
            raise SecretError(
                f"{path} does not hold a lightmem2 secret (expected 64 hex characters, got "
                f"{len(value)} characters); delete the file and restart `lightmem2 serve`"
            )
        time.sleep(0.02)  # another process created it with O_EXCL and is still writing


def proof(secret: str, challenge: str) -> str:
    """What the sidecar answers to a health challenge: shows it knows the secret without sending it."""
    return hmac.new(secret.encode(), challenge.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()


def matches(secret: str, presented: str | None) -> bool:
    """Constant-time comparison of a presented header value with the secret."""
    if presented is None:
        return False
    return hmac.compare_digest(secret.encode(), presented.encode("utf-8", "surrogateescape"))


def _read_once(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as err:
        if err.errno == errno.ENOENT:
            raise FileNotFoundError(str(path)) from None
        if err.errno == errno.ELOOP:
            raise SecretError(f"{path} is a symbolic link; delete it and restart `lightmem2 serve`") from None
        raise SecretError(f"cannot read {path}: {err.strerror}; check its owner and mode (0600)") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise SecretError(
                f"{path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}); delete it, or set "
                "LIGHTMEM2_HOME to a directory of your own"
            )
        if st.st_mode & 0o077:  # ours but readable by others: close the hole rather than refuse to start
            os.fchmod(fd, 0o600)
        return os.read(fd, 4096).decode("ascii", "replace").strip()
    finally:
        os.close(fd)


def _private_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.stat().st_uid == os.getuid() and path.stat().st_mode & 0o077:
            os.chmod(path, 0o700)
    except OSError as err:
        raise SecretError(
            f"cannot create the data dir {path}: {err.strerror}; set LIGHTMEM2_HOME to a writable directory"
        ) from None


def _create(path: Path) -> None:
    _private_dir(path.parent)
    data = (secrets.token_hex(32) + "\n").encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        _write_new(tmp, data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process published first: everyone uses its value
        except OSError as err:
            if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            with contextlib.suppress(FileExistsError):  # no hard links here: the final name, exclusively
                _write_new(path, data)
    except OSError as err:
        raise SecretError(
            f"cannot create {path}: {err.strerror}; set LIGHTMEM2_HOME to a writable directory"
        ) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
