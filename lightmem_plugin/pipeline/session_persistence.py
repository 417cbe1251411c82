"""When and how a session's decisions reach the session store and come back (DESIGN "Restarts change nothing").

:mod:`.session_snapshot` knows *what* a session persists (the fields); this module knows *when*: the
load as a session is created (also after it was dropped from memory, or another process wrote it), the
save after every call, and the two repairs a dead process calls for: a ledger row written with no
decisions saved after it (:meth:`SessionPersistence._take_unsaved_call`), and a request sent again
after its process died before the host had the answer (:meth:`SessionPersistence._take_retry`).

Why apart from :class:`~lightmem_plugin.pipeline.Session`: the session coordinates a call (the chain,
the recorder, settling); the journal, the retry start and the version of the eviction state last
written are a job of their own, and every one of them is touched only here.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from typing import Protocol

from ..config import Config
from ..errors import ArtifactCorrupt
from ..faults import FailOpen
from ..store import CallLedger, SessionStates
from ..store.session_state import Journal, StoredSession, retry_start
from . import session_snapshot


class PluginStores(Protocol):
    """What the store side reads of the plugin (a :class:`~lightmem_plugin.pipeline.LightMem` is one):
    read at each use, as a test or a process may set them after the session was created."""

    ledger: CallLedger | None
    states: SessionStates | None

    @property
    def config(self) -> Config: ...


class Persisted(session_snapshot.Decisions, Protocol):
    """A session as its persistence sees it: its decisions, and the writer its ledger rows carry."""

    writer: str


def recorded_calls(ledger: CallLedger | None, session_id: str) -> int:
    """Calls the ledger already holds for this session (0 when there is no usable ledger)."""
    if ledger is None:
        return 0
    try:
        return max((r.call_index for r in ledger.calls(session_id)), default=0)
    except (OSError, sqlite3.Error):
        return 0


class SessionPersistence:
    """One session's link to the session store: its journal, what was loaded, the request in flight."""

    def __init__(self, plugin: PluginStores, session_id: str, fail: FailOpen) -> None:
        self.plugin = plugin
        self.id = session_id
        self.fail = fail
        self.journal: Journal | None = None
        self.saved_batch_check: tuple[int, ...] | None = None  # eviction state version on disk
        self.loaded: StoredSession | None = None  # as loaded, until the first call (retry_start)
        self.request_key: str | None = None

    def load(self, session: Persisted) -> None:
        """Continue ``session`` from the store, when there is one (fail-open: a new session)."""
        if self.plugin.states is not None:
            store = self.plugin.states
            self.fail.run("state", lambda: self._load_state(session, store), None)

    def _load_state(self, session: Persisted, store: SessionStates) -> None:
        """Continue the session from what was saved (a restart, or dropped from memory): same bytes."""
        try:
            loaded = store.load(self.id)
        except ArtifactCorrupt:  # sealed with a key no longer at hand: unreadable, so start over
            store.forget(self.id)
            self.journal = Journal(store, self.id)
            raise
        recorded = session.calls
        try:
            if not loaded.empty:
                session_snapshot.restore(session, loaded, self.plugin.config.stabilizer)
                self.saved_batch_check = session.evictor.state.version
                stored = int((loaded.blobs.get("core") or {}).get("calls", 0))
                if recorded == stored + 1:
                    self._take_unsaved_call(session, stored)
        except Exception:
            store.forget(self.id)  # a damaged or outdated state: start the session over, cleanly
            self.journal = Journal(store, self.id)
            raise
        self.journal = Journal(store, self.id, loaded)
        self.loaded = loaded

    def _take_unsaved_call(self, session: Persisted, stored: int) -> None:
        """The ledger holds one call more than the saved decisions: its process wrote the row and died
        before it saved them (the window between the two writes), so the model never had that call.
        Number the next call as the decisions say, and let its row replace the dead one's; numbered
        from the ledger instead, the session's eviction batches would run one call late from then on."""
        last = self.plugin.ledger.calls(self.id)[-1:] if self.plugin.ledger is not None else []
        if last and last[0].call_index == stored + 1:
            session.calls = stored
            session.writer = last[0].writer

    def begin(self, session: Persisted, request_key: str | None) -> None:
        """A call starts: a retry of the stored last call starts from before it; the request's key
        is kept for the save (the store recognises the retry by it)."""
        if request_key is not None and self.loaded is not None:
            self.fail.run("state", lambda: self._take_retry(session, request_key), None)
        self.loaded = None
        self.request_key = request_key

    def _take_retry(self, session: Persisted, request_key: str) -> None:
        """A session just loaded from the store whose last call was this same request (its process
        died before the host had the answer, and the host or a load balancer sent it again): start
        from the decisions as they were before that call, so it is sent as it was, and its ledger row
        is replaced rather than doubled."""
        loaded, self.loaded = self.loaded, None
        blobs = retry_start(loaded, request_key) if loaded is not None else None
        if loaded is None or blobs is None:
            return
        session_snapshot.restore(session, replace(loaded, blobs=blobs), self.plugin.config.stabilizer)
        session.calls = int((blobs.get("core") or {}).get("calls", 0))
        self.saved_batch_check = None
        last = self.plugin.ledger.calls(self.id)[-1:] if self.plugin.ledger is not None else []
        if last and last[0].call_index == session.calls + 1:
            session.writer = last[0].writer  # the retried call's row is this row

    def save(self, session: Persisted) -> None:
        """Write what this call decided (new entries and changed documents only); fail-open."""
        journal = self.journal
        if journal is None:
            return
        version = session.evictor.state.version
        maps, blobs = session_snapshot.snapshot(session, with_eviction=version != self.saved_batch_check)

        def save() -> bool:
            journal.save(maps, blobs, self.request_key)
            return True

        if self.fail.run("state", save, False):  # a failed write is retried with the next call
            self.saved_batch_check = version
