"""The whole lightmem2 exception tree.

Every error we raise on purpose derives from :class:`LightMemError`, so callers (the CLI, the host
adapters, the fail-open runner) can catch ours apart from bugs. Messages say what was wrong, the bad
value, and the fix, on one line::

    LightMemError
    ├── UsageError              bad CLI arguments or API use            (CLI exit code 2)
    │   └── ConfigError         a config file or value that fails validation
    ├── PayloadError            a host/provider payload a codec cannot read
    ├── RegistryError           artifact store problems
    │   ├── ArtifactNotFound    unknown key                              (CLI exit code 2)
    │   └── ArtifactCorrupt     stored bytes no longer match their key
    ├── TokenizerError          the shipped ranks file is missing or altered
    ├── TraceError              a recorded session that cannot be read  (CLI exit code 2)
    ├── EstimatorError          an eviction estimator reply that fails validation or transport
    ├── PassError               a reduction pass failed; the pipeline passes the original through
    ├── StoreError              a private SQLite store is damaged (also a sqlite3.DatabaseError)
    │   └── StoreUnavailable    the database ``store.url`` names cannot be used (unreachable, login
    │                           refused, a schema newer than this lightmem2)
    ├── StaleState              a session state write that another process overtook (it is refused)
    ├── SecretError             the sidecar secret file cannot be created or read safely
    └── AccessDenied            a request to ``serve`` refused (Host, Origin, secret, content type,
        └── CommandRefused      a chat command that names a file or starts a process)  (HTTP 4xx)
"""

from __future__ import annotations

import sqlite3


class LightMemError(Exception):
    """Base of every error lightmem2 raises on purpose."""

    exit_code: int = 1


class UsageError(LightMemError):
    """Bad arguments or API use; the message names the value and the allowed ones."""

    exit_code = 2


class ConfigError(UsageError):
    """A config file or value that fails validation (file, key path, bad value, allowed values)."""


class PayloadError(LightMemError):
    """A host or provider payload that a codec cannot read; the pipeline passes it through."""

    exit_code = 2


class RegistryError(LightMemError):
    """Artifact registry problem (I/O, permissions)."""


class ArtifactNotFound(RegistryError):
    """No artifact stored under the given key."""

    exit_code = 2


class ArtifactCorrupt(RegistryError):
    """Stored bytes no longer hash to their key."""


class TokenizerError(LightMemError):
    """The shipped tokenizer ranks file is missing or does not match its checksum."""


class TraceError(LightMemError):
    """A recorded session file that cannot be read as any supported trace format."""

    exit_code = 2


class EstimatorError(LightMemError):
    """An eviction estimator failed (transport, timeout, or a reply that fails validation)."""


class PassError(LightMemError):
    """A reduction pass failed; the pipeline counts it and keeps the original.

    ``pass_name`` names the pass, so ``doctor`` and ``status`` can say which one (``proxy/reduction/html``).
    """

    def __init__(self, message: str, pass_name: str | None = None) -> None:
        super().__init__(message)
        self.pass_name = pass_name


class StoreError(LightMemError, sqlite3.DatabaseError):
    """A private SQLite store (ledger, session state, search index, faults) is not a usable database.

    Also a :class:`sqlite3.DatabaseError`, so the fail-open paths that already pass a broken store by
    (the host keeps working without a ledger) keep doing so; the CLI prints its one line instead of a
    traceback, and ``doctor --fix`` moves the damaged file aside.
    """


class StoreUnavailable(StoreError):
    """The shared database (``store.url``) cannot be reached or used; the message names the URL
    (password hidden), what failed and what to check. A :class:`StoreError` (so also a
    ``sqlite3.DatabaseError``): every fail-open path that passes a broken store by passes this one by."""


class StaleState(LightMemError):
    """A session state write that expected another version than the store holds: another process
    wrote the session since this one read it. Nothing is written; the next call reloads the session."""


class SecretError(LightMemError):
    """A per-install secret (the sidecar secret, the archive key) cannot be created or read safely."""


class AccessDenied(LightMemError):
    """A request ``lightmem2 serve`` refuses; ``status`` is the HTTP status to answer with."""

    exit_code = 2

    def __init__(self, message: str, status: int = 403) -> None:
        super().__init__(message)
        self.status = status


class CommandRefused(AccessDenied):
    """A command that may only run from a terminal (it names a file, or starts or installs something)."""
