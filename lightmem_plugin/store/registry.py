"""Content-addressed artifact store: the originals of everything lightmem2 removed from a context.

Why content addressing: the key is the xxh3-128 of the stored bytes, so the same output always gets the
same key (stubs stay byte-stable across calls and restarts, DESIGN I1/I3) and a read can verify that the
bytes are intact. Writes are atomic (temp file + rename) so a crash never leaves half an artifact.
Files are 0600 in 0700 directories (I6). Above ``maxBytes`` the least recently used artifacts are
collected, never those a live session still references.

With a :class:`~.sealing.Sealer` (the default in a plugin) artifacts are stored exactly as given and
encrypted at rest, so ``recover`` is byte-exact and no credential is readable on disk; the key stays
the hash of the plaintext. Without one (no usable archive key) they are redacted before storing, as
before sealing existed. What the search index is told (``on_put``) is always redacted.

On a team gateway each artifact also has owners: the users whose sessions archived it (``owner`` says
who is archiving now, :mod:`~.security.tenancy`). Keys stay content-addressed and stored once; ownership rows
(``owners.sqlite3`` beside the files, ``lm_artifact_owners`` in a database) decide who may read one.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

import xxhash

from ..atomic import TEMP_PREFIX, write_private_bytes
from ..errors import ArtifactCorrupt, ArtifactNotFound, RegistryError, UsageError
from ..security.redaction import Redactor
from .sealing import KEY_ENV, OVERHEAD, Sealer, sealed

KEY_RE = re.compile(r"^[0-9a-f]{32}$")
SHORT_KEY_CHARS = 12
"""A stub names its artifact by the shortest prefix of the key, from this many hex chars, that no
other artifact claimed first (:meth:`Registry.short`). Why: every stub is re-read on every later call,
and the whole key was 18.9 of its tokens on average (12 hex chars: 7.6). 48 bits: with a million
artifacts in one store the chance that any prefix is already taken is about 0.2% (that artifact's
stubs then name 13 chars), and a name once claimed is never given to another key."""
NAME_RE = re.compile(rf"^[0-9a-f]{{{SHORT_KEY_CHARS},32}}$")
ALIAS_SUFFIX = ".alias"
NAMES_DIR = "names"  # claims live apart from the artifacts (``??/KEY``): listing and gc never see them
_SHORTS_KEPT = 100_000  # the per-process memo of short names (cleared when it grows past this)
OWNERS_FILE = "owners.sqlite3"
_OWNERS_SQL = (
    "CREATE TABLE IF NOT EXISTS owners (owner TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (owner, key));"
)


def _not_a_key(name: str) -> ArtifactNotFound:
    return ArtifactNotFound(
        f'"{name[:60]}" is not an artifact key; keys are {SHORT_KEY_CHARS} to 32 hex chars from a stub'
    )


def content_key(data: bytes) -> str:
    """The registry key of ``data``: xxh3-128 as 32 lowercase hex chars."""
    return str(xxhash.xxh3_128_hexdigest(data))


def parse_line_range(spec: str) -> tuple[int, int]:
    """Parse ``"A:B"`` (1-based, inclusive; either side may be empty) into a (start, end) pair."""
    m = re.fullmatch(r"\s*(\d*)\s*:\s*(\d*)\s*", spec)
    if not m:
        raise UsageError(f'bad line range "{spec}"; use A:B with 1-based line numbers, e.g. 10:40 or 100:')
    start = int(m.group(1)) if m.group(1) else 1
    end = int(m.group(2)) if m.group(2) else 1 << 62
    if start < 1 or end < start:
        raise UsageError(f'bad line range "{spec}"; need 1 <= A <= B')
    return start, end


class Registry:
    """The artifact store under one directory."""

    def __init__(
        self,
        root: Path,
        max_bytes: int = 1 << 30,
        redactor: Redactor | None = None,
        on_put: Callable[[str, bytes | Callable[[], bytes]], None] | None = None,
        sealer: Sealer | None = None,
    ) -> None:
        self.root = Path(root)
        self.on_put = on_put  # e.g. the search index; told of each new artifact (redacted bytes)
        self.max_bytes = max_bytes
        self.redactor = redactor or Redactor()
        self.sealer = sealer
        self.owner: Callable[[], str | None] | None = None
        """Who is archiving now (a gateway user), or None: no ownership is recorded (one loopback user)."""
        self._size: int | None = None
        self._owners: sqlite3.Connection | None = None
        self._owners_lock = threading.Lock()
        self._shorts: dict[str, str] = {}

    def _ensure_root(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(self.root, 0o700)
        except OSError as err:
            raise RegistryError(f"cannot create registry dir {self.root}: {err}; set registry.dir") from None

    def path_of(self, key: str) -> Path:
        """Where the artifact ``key`` lives (it may not exist)."""
        if not KEY_RE.match(key):
            raise _not_a_key(key)
        return self.root / key[:2] / key

    def _stored_form(self, data: bytes) -> tuple[str, bytes, int]:
        """(key, the bytes to archive before sealing, their stored size): redacted without a sealer."""
        if self.sealer is None:
            data = self.redactor.redact_bytes(data)
        return content_key(data), data, len(data) + (OVERHEAD if self.sealer is not None else 0)

    def _seal(self, data: bytes) -> bytes:
        return self.sealer.seal(data) if self.sealer is not None else data

    def _indexed(self, key: str, data: bytes) -> None:
        """Tell ``on_put`` (the search index) of a new artifact, always redacted: the stored bytes
        without a sealer (redacted already), else how to redact them (the index may do it later)."""
        if self.on_put is not None:
            self.on_put(key, data if self.sealer is None else partial(self.redactor.redact_bytes, data))

    def put(self, data: bytes) -> str:
        """Store ``data`` (sealed, or redacted without a sealer) and return its key; twice is free.

        With an :attr:`owner` archiving, that user owns the key from now on (also when it was stored
        already, by another user's session)."""
        key = self._store(data)
        owner = self.owner() if self.owner is not None else None
        if owner is not None:
            self._own(owner, key)
        return key

    def put_short(self, data: bytes) -> str:
        """:meth:`put` ``data``; the short name a stub gives it (:meth:`short`)."""
        return self.short(self.put(data))

    def short(self, key: str) -> str:
        """The name of ``key`` for a stub: its shortest prefix of at least :data:`SHORT_KEY_CHARS`
        that no other key claimed, claimed now if nobody had (the whole key if all are taken).

        A claim is permanent and exclusive, also across processes sharing the store: a name in a stub
        always means the artifact it meant when the stub was written (after that artifact's gc it is
        "not found", never another artifact). Same key and store, same name: stubs stay byte-stable."""
        known = self._shorts.get(key)
        if known is not None:
            return known
        name = key
        for n in range(SHORT_KEY_CHARS, len(key)):
            if self._claim(key[:n], key) == key:
                name = key[:n]
                break
        if len(self._shorts) >= _SHORTS_KEPT:
            self._shorts.clear()
        self._shorts[key] = name
        return name

    def resolve(self, name: str) -> str:
        """The key a stub's ``name`` stands for: a whole key as it is, a short name by its claim."""
        if KEY_RE.match(name):
            return name
        if not NAME_RE.match(name):
            raise _not_a_key(name)
        key = self._claimed(name)
        if key is None:
            raise ArtifactNotFound(f"no artifact {name} in {self.where}; check the key in the stub")
        return key

    def _alias_path(self, name: str) -> Path:
        return self.root / NAMES_DIR / name[:2] / (name + ALIAS_SUFFIX)

    def _claimed(self, name: str) -> str | None:
        """The key ``name`` was claimed for, None when nobody claimed it."""
        try:
            value = self._alias_path(name).read_text(encoding="ascii").strip()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, UnicodeDecodeError) as err:
            raise RegistryError(f"cannot read the claim of {name} under {self.root}: {err}") from None
        return value if KEY_RE.match(value) and value.startswith(name) else None

    def _claim(self, name: str, key: str) -> str | None:
        """Claim ``name`` for ``key`` unless another key holds it; the key that holds it now.

        Atomic across processes: the claim is written to a temp file and hard-linked into place,
        which fails when the name exists, so a reader never sees a half-written claim."""
        held = self._claimed(name)
        if held is not None:
            return held
        path = self._alias_path(name)
        self._ensure_root()
        try:
            for folder in (path.parent.parent, path.parent):  # private, as every directory here
                folder.mkdir(mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX)
            try:
                with os.fdopen(fd, "w", encoding="ascii") as fh:
                    fh.write(key)
                os.chmod(tmp, 0o600)
                with contextlib.suppress(FileExistsError):
                    os.link(tmp, path)
            finally:
                Path(tmp).unlink(missing_ok=True)
        except OSError as err:
            raise RegistryError(f"cannot claim the name {name} under {self.root}: {err}") from None
        return self._claimed(name)

    def _store(self, data: bytes) -> str:
        """Store ``data`` once; its key."""
        key, data, size = self._stored_form(data)
        path = self.path_of(key)
        try:
            if path.stat().st_size == size:
                return key  # stored already (a torn file of another size is rewritten below)
        except OSError:
            pass  # absent, or the directory is unusable: the write below reports it as a RegistryError
        self._ensure_root()
        try:
            write_private_bytes(path, self._seal(data))
        except OSError as err:
            raise RegistryError(f"cannot write artifact {key} under {self.root}: {err}") from None
        self._indexed(key, data)
        if self._size is not None:
            self._size += size
        return key

    def peek(self, key: str) -> bytes:
        """The archived bytes of ``key`` (or its short name), verified, without making it recent
        (for index rebuilds)."""
        key = self.resolve(key)
        path = self.path_of(key)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            raise ArtifactNotFound(
                f"no artifact {key} in {self.root}; check the key in the stub or registry.dir"
            ) from None
        return self._opened(key, blob)

    def _opened(self, key: str, blob: bytes) -> bytes:
        """The plaintext of stored ``blob``, verified against ``key`` (ArtifactCorrupt if not)."""
        if (
            sealed(blob) and content_key(blob) != key
        ):  # (plaintext that merely starts like a seal hashes to its key)
            if self.sealer is None:
                raise ArtifactCorrupt(
                    f"artifact {key} is encrypted and no archive key is available; set ${KEY_ENV} "
                    "or restore the archive.key file of the lightmem2 home"
                )
            data = self.sealer.open(blob, f"artifact {key}")
        else:
            data = blob  # written before sealing, or by a registry without a key
        if content_key(data) != key:
            raise ArtifactCorrupt(
                f"artifact {key} in {self.where} is corrupt (hash mismatch); it cannot be recovered"
            )
        return data

    def get(self, key: str) -> bytes:
        """The archived bytes of ``key``, verified against the key; reading makes it recent (LRU)."""
        key = self.resolve(key)
        data = self.peek(key)
        with contextlib.suppress(OSError):
            os.utime(self.path_of(key))
        return data

    def exists(self, key: str) -> bool:
        """True when ``key`` (or its short name) is stored."""
        try:
            return self.path_of(self.resolve(key)).exists()
        except ArtifactNotFound:
            return False

    def recover(self, key: str, lines: str | tuple[int, int] | None = None) -> str:
        """The archived text of ``key``, optionally only lines ``A:B`` (1-based, inclusive)."""
        raw = self.get(key)
        try:  # the pipeline archives with surrogatepass; raw bytes from elsewhere may not be UTF-8 at all
            text = raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "surrogateescape")
        if lines is None:
            return text
        start, end = parse_line_range(lines) if isinstance(lines, str) else lines
        return "".join(text.splitlines(keepends=True)[start - 1 : end])

    # -- ownership (team gateway) -----------------------------------------------------------------
    def _owners_db(self) -> sqlite3.Connection:
        if self._owners is None:
            from .sqlite_store import open_private_db

            self._ensure_root()
            self._owners = open_private_db(self.root / OWNERS_FILE, _OWNERS_SQL, 1)
        return self._owners

    def _owners_query(self, sql: str, args: tuple[str, ...]) -> list[tuple[str, ...]]:
        try:
            with self._owners_lock:
                return list(self._owners_db().execute(sql, args))
        except (OSError, sqlite3.Error) as err:
            raise RegistryError(
                f"cannot use the artifact owners file {self.root / OWNERS_FILE}: {err}; check its "
                "permissions, or move it aside (owners are recorded again as sessions archive)"
            ) from None

    def _own(self, owner: str, key: str) -> None:
        """Record that ``owner`` archived ``key``."""
        self._owners_query("INSERT OR IGNORE INTO owners (owner, key) VALUES (?, ?)", (owner, key))

    def owns(self, owner: str, key: str) -> bool:
        """True when one of ``owner``'s sessions archived ``key`` (and it is still stored)."""
        try:
            key = self.resolve(key)
        except ArtifactNotFound:
            return False
        if not (self.root / OWNERS_FILE).exists():
            return False
        sql = "SELECT 1 FROM owners WHERE owner = ? AND key = ?"
        return bool(self._owners_query(sql, (owner, key))) and self.exists(key)

    def owned(self, owner: str) -> set[str]:
        """Every key ``owner``'s sessions archived (some may since have been collected)."""
        if not (self.root / OWNERS_FILE).exists():
            return set()
        return {r[0] for r in self._owners_query("SELECT key FROM owners WHERE owner = ?", (owner,))}

    def _disown(self, keys: list[str]) -> None:
        """Drop the ownership rows of collected ``keys``."""
        if keys and (self.root / OWNERS_FILE).exists():
            for key in keys:
                self._owners_query("DELETE FROM owners WHERE key = ?", (key,))

    @property
    def where(self) -> str:
        """Where the artifacts live, for messages."""
        return str(self.root)

    def keys(self) -> set[str]:
        """Every stored key (for the search index's rebuild and doctor)."""
        return {p.name for p in self._files() if p.parent.name == p.name[:2]}

    def _files(self) -> list[Path]:
        if not self.root.exists():
            return []
        return [p for p in self.root.glob("??/*") if KEY_RE.match(p.name)]

    def size_bytes(self) -> int:
        """Total bytes stored (computed once, then kept up to date by put/gc)."""
        if self._size is None:
            self._size = sum(p.stat().st_size for p in self._files())
        return self._size

    def count(self) -> int:
        """Number of stored artifacts."""
        return len(self._files())

    def drop_stale_temps(self, max_age_s: float = 600.0) -> int:
        """Remove temp files of writers that died mid-write (an artifact or a short name's claim;
        older than ten minutes, so never a live one: a write takes milliseconds); how many.

        Run by :meth:`gc` and when ``serve`` starts. Measured before: 30 SIGKILLs of serve mid-write left
        4 ``.tmp-*`` files that stayed (the sweep looked in the artifact folders only, after an hour,
        and only when the registry was over its size cap)."""
        import time

        if not self.root.exists():
            return 0
        cutoff = time.time() - max_age_s
        dropped = 0
        for tmp in self.root.rglob(f"{TEMP_PREFIX}*"):
            with contextlib.suppress(OSError):
                if tmp.is_file() and tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
                    dropped += 1
        return dropped

    def gc(self, live_keys: Iterable[str] = ()) -> list[str]:
        """Delete least recently used artifacts until under ``max_bytes``; never ``live_keys``."""
        live = set(live_keys)
        self.drop_stale_temps()
        total = self.size_bytes()
        if total <= self.max_bytes:
            return []
        entries = sorted(((p.stat().st_mtime, p.name, p) for p in self._files()), key=lambda e: (e[0], e[1]))
        removed: list[str] = []
        for _mtime, name, path in entries:
            if total <= self.max_bytes:
                break
            if name in live:
                continue
            size = path.stat().st_size
            path.unlink(missing_ok=True)
            total -= size
            removed.append(name)
        self._size = total
        self._disown(removed)
        return removed
