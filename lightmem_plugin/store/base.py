"""The storage interface: what the pipeline needs of each store, whatever holds it.

Two backends implement it: the embedded default (files and SQLite in the data dir:
:class:`~lightmem_plugin.store.session_state.StateStore`, :class:`~lightmem_plugin.store.ledger.Ledger`) and
PostgreSQL (:mod:`.postgres`), chosen by ``store.url``. The pipeline and the proxy see only these
protocols, so a backend never leaks into what the model is sent (DESIGN I1): both must return the same
values for the same writes, which the tests check on both.

Sessions and concurrency: a session's state carries a version, bumped by every write. A process checks
it before each call and reloads a session another process wrote since (:meth:`SessionStates.version`);
:meth:`SessionStates.lock` holds one session against every other process sharing the store for the
whole load, call and save, and a write that expects an older version is refused
(:class:`~lightmem_plugin.errors.StaleState`): two processes' decisions never interleave.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .ledger import CallRecord, SessionTotals

APPEND_ONLY = ("memo", "images", "dedup_first", "dedup_repeats", "dedup_spellings", "lines")
"""The insert-only maps of a session's state (see :mod:`lightmem_plugin.store.session_state`)."""


@dataclass
class StoredSession:
    """One session as read back: insert-only maps in insertion order, and the blobs by name."""

    maps: dict[str, dict[str, Any]] = field(default_factory=lambda: {ns: {} for ns in APPEND_ONLY})
    blobs: dict[str, Any] = field(default_factory=dict)
    version: int = 0
    """The session's write count in the store when it was read (0: never written)."""

    @property
    def empty(self) -> bool:
        """True when nothing was ever saved for the session."""
        return not self.blobs and not any(self.maps.values())


class SessionStates(Protocol):
    """The persisted decisions of every session (see :mod:`lightmem_plugin.store.session_state`)."""

    prefix: str
    shared: bool
    """True when processes on other machines share it (work on it may block on the network)."""

    @property
    def where(self) -> str:
        """Where the state lives, for messages (a path, or a URL without its password)."""
        ...

    def load(self, session_id: str) -> StoredSession:
        """Everything saved for ``session_id``, read at one version (empty when nothing was)."""
        ...

    def version(self, session_id: str) -> int:
        """How many writes the session has had (0: none)."""
        ...

    def write(
        self,
        session_id: str,
        entries: Mapping[str, list[tuple[str, Any, int]]],
        blobs: Mapping[str, str],
        expect: int | None = None,
    ) -> int:
        """New map entries and changed blobs in one transaction; the new version (StaleState when the
        stored version is not ``expect``)."""
        ...

    def lock(self, session_id: str) -> AbstractContextManager[None]:
        """Hold ``session_id`` against every other process sharing this store."""
        ...

    def forget(self, session_id: str) -> None:
        """Drop everything saved for a session."""
        ...

    def sessions(self) -> list[str]:
        """Ids of this writer's sessions with saved state (without the prefix), sorted."""
        ...

    def close(self) -> None:
        """Release the connection (the store is unusable afterwards)."""
        ...


class CallLedger(Protocol):
    """Per-call accounting rows (see :mod:`lightmem_plugin.store.ledger`)."""

    where: str

    def record_call(self, rec: CallRecord) -> None:
        """Store one call; the same (session, writer, call index) again replaces it."""
        ...

    def forget(self, session_id: str) -> int:
        """Delete every row of ``session_id``; how many there were."""
        ...

    def sessions(self) -> list[str]:
        """Session ids, in the order their first call was recorded."""
        ...

    def last_session(self) -> str | None:
        """The session of the most recently recorded call."""
        ...

    def calls(self, session_id: str) -> list[CallRecord]:
        """The calls of one session, by call index."""
        ...

    def totals(self, session_id: str) -> SessionTotals:
        """One session summed over its calls."""
        ...

    def recent_calls(self, limit: int = 200) -> list[CallRecord]:
        """The last ``limit`` calls recorded, across sessions, oldest first."""
        ...

    def resolve(self, session_id: str | None) -> str | None:
        """``session_id`` if recorded (UsageError if not); else the last session."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...
