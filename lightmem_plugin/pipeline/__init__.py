"""The pipeline: hook points every host adapter calls, and the fail-open runner around them.

    ingest_tool_result   reduce a tool output ONCE as it enters the history (memoised, DESIGN I3)
    before_model_call    stabilise the head, apply the memoised reductions, (aggressive) evict in batches
    after_model_call     restore placeholders in what the model wrote, record real cache usage

:class:`LightMem` (here) is one process: the config in force, the archive and stores, and the sessions
it holds in memory. A :class:`Session` (:mod:`.session`) coordinates one conversation's calls; its
parts are modules of their own: the transformer chain (:mod:`.session_chain`, :attr:`Session.STEPS`:
reduce, evict, stabilise, call ids), the decisions it took (:mod:`.session_snapshot`, saved and loaded
by :mod:`.session_persistence` through :mod:`~.store.session_state`), the chat adapter
(:mod:`~lightmem_plugin.wire.chat.adapter`) and the recorder (:mod:`~.metering.recorder`).

Why fail-open (I5): we sit between an agent and its model. Any exception inside a pass returns the
original payload, is counted per pass and shown by ``status``/``doctor``; the host never breaks.
Why memoise by (tool call id, content hash): the reduced form of an output must never change later in
the session, even if the mode changes (mode switches apply to new content only).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Self

from ..config import Config, ConfigHolder
from ..eviction.record_store import RecordStore
from ..faults import FaultSink, open_sink, report
from ..security import tenancy
from ..store import CallLedger, SessionStates, Stores, open_stores
from ..store.home import Home
from ..store.registry import Registry
from ..store.search_index import IndexBase, SearchIndex, index_hook
from ..tokens import TokenCounter
from .config_in_force import CONFIG_IN_FORCE as CONFIG_IN_FORCE  # when each section applies
from .session import Session as Session  # the public name stays lightmem_plugin.pipeline.Session


class LightMem:
    """The plugin for one process: config, artifact registry and the sessions it serves."""

    def __init__(
        self,
        config: Config | None = None,
        registry: Registry | None = None,
        ledger: CallLedger | None = None,
        states: SessionStates | None = None,
        faults: FaultSink | None = None,
    ) -> None:
        self._holder = None if config is not None else ConfigHolder()
        self.ledger = ledger
        self.faults = faults  # where failures are reported for status/doctor (None: counted only)
        self.states = states  # where sessions persist their decisions (None: in memory only)
        self.records: RecordStore | None = None
        self.search_index: IndexBase | None = None  # what archiving indexes into (attach_search_index)
        self.counter = TokenCounter()
        self._fixed = config
        cfg = self.config
        # without an archive key where sealing is on, archives are redacted instead; the failure is
        # reported (doctor, status) and never stops the host
        self.registry = registry or Home.default().registry(
            cfg, on_key_error=lambda err: report(self.faults, "registry", err)
        )
        self.sessions: OrderedDict[str, Session] = OrderedDict()
        self._active = threading.local()  # whose outputs this thread archives (search index, owners)
        self.registry.owner = lambda: tenancy.owner_of(self.active_session)
        self.max_sessions: int | None = None
        """Sessions kept in memory (None: ``server.maxSessions``). Why above the sessions served at
        once: at 64, 100 concurrent host sessions reloaded on almost every call (measured: a fifth of
        the proxy's CPU, and every memo of the pipeline lost)."""
        self.expired = 0  # sessions dropped for idleness so far (serve gives their memory back)
        self._sessions_lock = threading.Lock()

    @property
    def active_session(self) -> str | None:
        """The session whose outputs are being archived in this thread (sessions of one process run
        in several threads at once: an artifact must never be credited to another one's user)."""
        return getattr(self._active, "session", None)

    @active_session.setter
    def active_session(self, session_id: str | None) -> None:
        self._active.session = session_id

    @classmethod
    def from_config(cls, stores: Stores | None = None) -> Self:
        """A plugin that follows the user's config file (reloaded when it changes) and keeps a ledger
        and session state in ``stores`` (default: those ``store.url`` names, see :mod:`.store`)."""
        if stores is None:
            try:
                stores = open_stores(ConfigHolder().current)
            except (OSError, sqlite3.Error):  # an unusable database must not break the host; doctor says why
                stores = None
        ledger, states = (stores.ledger, stores.states) if stores else (None, None)
        plugin = cls(ledger=ledger, states=states, faults=open_sink())
        if stores is not None:  # a shared database keeps the artifacts too
            plugin.registry = stores.registry_like(plugin.registry)
        plugin.attach_search_index(stores)
        plugin.records = RecordStore(Home.default().records_dir, plugin.registry.redactor)
        return plugin

    @property
    def config(self) -> Config:
        """The config in force (the last good one if the file turned bad)."""
        if self._fixed is not None:
            return self._fixed
        assert self._holder is not None
        return self._holder.reload()

    @property
    def config_error(self) -> str | None:
        """Why the config file was rejected, if it was."""
        return self._holder.last_error if self._holder else None

    def attach_search_index(self, stores: Stores | None = None) -> None:
        """Index every new artifact for ``lightmem2 search`` into ``stores``' index (the data dir's when
        None; the database's with ``store.url``); skipped if the index cannot open."""
        try:
            index = stores.search_index() if stores is not None else SearchIndex.default()
        except (OSError, sqlite3.Error):
            return  # search is a convenience: archiving works without it
        self.search_index = index
        self.registry.on_put = index_hook(index, lambda: self.active_session)

    @contextlib.contextmanager
    def searching(self) -> Iterator[IndexBase]:
        """The index archiving fills (:meth:`attach_search_index`: the stores' one), or, when it could
        not be opened then, the data dir's, opened for this search and closed after it."""
        if self.search_index is not None:
            yield self.search_index
            return
        with SearchIndex.default() as index:
            yield index

    def session(self, session_id: str) -> Session:
        """The session with this id (created on first use, or reloaded from the session store, also
        when another process sharing the store wrote it since this one did)."""
        stale = self._stale(self.sessions.get(session_id))
        with self._sessions_lock:
            now = time.monotonic()
            self._expire_idle(now)
            found = self.sessions.get(session_id)
            if found is not None and found is stale:
                del self.sessions[session_id]
                found.settle()
                found = None
            if found is None:
                found = self.sessions[session_id] = Session(self, session_id)
                cap = self.max_sessions or self.config.server.maxSessions
                while len(self.sessions) > cap:  # least recently used first
                    self.sessions.popitem(last=False)[1].settle()
            else:
                self.sessions.move_to_end(session_id)
            found.last_used = now
            return found

    def _stale(self, session: Session | None) -> Session | None:
        """``session`` when the store holds a newer version of it than it last read or wrote."""
        journal = session.journal if session is not None else None
        if journal is None or self.states is None:
            return None
        try:
            return session if self.states.version(journal.session_id) != journal.version else None
        except (OSError, sqlite3.Error) as err:  # fail-open: keep serving what this process holds
            report(self.faults, "state", err, journal.session_id)
            return None

    def settle(self) -> None:
        """Every session's bookkeeping still pending (:meth:`Session.settle`): before a process stops."""
        with self._sessions_lock:
            held = list(self.sessions.values())
        for session in held:
            session.settle()

    def expire_idle(self) -> int:
        """Drop the sessions idle past ``server.sessionIdleS`` now; how many (``serve`` sweeps)."""
        with self._sessions_lock:
            return self._expire_idle(time.monotonic())

    def _expire_idle(self, now: float) -> int:
        """Drop sessions unused for ``server.sessionIdleS`` (oldest first), when a store keeps their
        decisions: a long-running proxy's memory then follows its active sessions, not all it ever saw
        (measured before: ~5-6x each session's last request, never released)."""
        if self.states is None:
            return 0
        idle = self.config.server.sessionIdleS
        dropped = 0
        while self.sessions:
            sid, oldest = next(iter(self.sessions.items()))
            if now - oldest.last_used < idle or oldest._in_call:
                break
            del self.sessions[sid]
            oldest.settle()
            dropped += 1
        self.expired += dropped
        return dropped
