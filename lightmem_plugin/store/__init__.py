"""Where sessions' state and the ledger live: the embedded default, or a shared PostgreSQL.

``store.url`` unset (the default): files and SQLite in the data dir, as always
(:class:`~lightmem_plugin.store.session_state.StateStore`, :class:`~lightmem_plugin.store.ledger.Ledger`).
``store.url = "postgresql://user@host/db"``: every ``lightmem2 serve`` process on that database serves
the same sessions as one would (:mod:`.postgres`, artifacts in :mod:`.pg_artifacts`, the search index
in :mod:`.pg_search`; needs ``pip install 'lightmem2[team]'``). The interface both implement is in
:mod:`.base`; the artifact registry's is :class:`~lightmem_plugin.store.registry.Registry` itself (the
database one subclasses it), the search index's :class:`~lightmem_plugin.store.search_index.IndexBase`.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import StoreUnavailable
from .base import CallLedger, SessionStates
from .sealed_values import StateCipher

if TYPE_CHECKING:
    from ..config import Config
    from .registry import Registry
    from .search_index import IndexBase

__all__ = [
    "CallLedger",
    "SessionStates",
    "Stores",
    "open_stores",
    "reading_registry",
    "session_lock",
    "store_trouble",
]


@dataclass
class Stores:
    """The stores of one process; ``close`` releases them (and the database pool, if any)."""

    states: SessionStates | None
    ledger: CallLedger | None
    kind: str = "embedded"
    """``embedded`` or ``postgresql``."""
    schema_version: int | None = None
    _index: IndexBase | None = field(default=None, repr=False)

    def search_index(self) -> IndexBase:
        """The search index of these stores, opened on first use: ``search.sqlite3`` in the data dir
        when embedded (``OSError``/``sqlite3.Error`` when it cannot open), the database's tables on the
        same pool otherwise (every process then searches what any of them archived)."""
        if self._index is None:
            backend = getattr(self.states, "backend", None)
            if backend is None:
                from .search_index import SearchIndex

                self._index = SearchIndex.default()
            else:
                from .pg_search import PgSearchIndex

                self._index = PgSearchIndex(backend)
        return self._index

    def registry_like(self, registry: Registry) -> Registry:
        """The artifact registry of these stores with ``registry``'s settings (size cap, redaction,
        sealer, index hook): ``registry`` itself when embedded, rows of the database otherwise."""
        backend = getattr(self.states, "backend", None)
        if backend is None:
            return registry
        from .pg_artifacts import PgRegistry

        return PgRegistry(backend, registry)

    def close(self) -> None:
        """Close the search index, the ledger, the state store and the pool behind them."""
        if self._index is not None:
            self._index.close()
        if self.ledger is not None:
            self.ledger.close()
        if self.states is not None:
            self.states.close()
        backend = getattr(self.states, "backend", None)
        if backend is not None:
            backend.close()


def open_stores(config: Config) -> Stores:
    """The stores ``config.store`` names, opened (and a database migrated).

    Embedded: a file that cannot be opened is None (the host keeps working without it, doctor says
    why), each apart from the other. A database: :class:`StoreUnavailable` (a ``sqlite3.DatabaseError``
    too) when it cannot be used, so a gateway never runs on state it does not share.
    """
    url = config.store.url
    if not url:
        from .ledger import Ledger
        from .session_state import StateStore

        try:
            ledger: Ledger | None = Ledger.default()
        except (OSError, sqlite3.Error):
            ledger = None
        try:
            states: StateStore | None = StateStore.default(
                cipher=StateCipher.from_home(config.registry.encrypt)
            )
        except (OSError, sqlite3.Error):  # without it sessions still work, they only forget on restart
            states = None
        return Stores(states, ledger)
    try:
        from .postgres import PgBackend, PgLedger, PgStateStore
    except ImportError as err:
        raise StoreUnavailable(
            f"store.url names a PostgreSQL database but psycopg is not installed ({err}); "
            "run `pip install 'lightmem2[team]'`, or remove store.url to use the embedded store"
        ) from None
    s = config.store
    backend = PgBackend(url, s.poolSize, s.connectTimeoutS, s.lockTimeoutS, s.responseTimeoutS)
    shared = PgStateStore(backend, cipher=StateCipher.from_home(config.registry.encrypt))
    return Stores(shared, PgLedger(backend), "postgresql", backend.schema_version)


@contextlib.contextmanager
def reading_registry(config: Config) -> Iterator[Registry]:
    """The registry to read archives from (recover, status, doctor): the database's when ``store.url``
    names one (opened for the block, closed after; :class:`StoreUnavailable` when it cannot be used),
    else the data dir's (:class:`~.home.Home`)."""
    from .home import Home

    local = Home.default().registry(config)
    if not config.store.url:
        yield local
        return
    stores = open_stores(config)
    try:
        yield stores.registry_like(local)
    finally:
        stores.close()


@contextlib.contextmanager
def session_lock(states: SessionStates | None, session_id: str) -> Iterator[None]:
    """Hold ``session_id`` against the other processes sharing ``states`` (nothing without a store)."""
    if states is None:
        yield
        return
    with states.lock(session_id):
        yield


def store_trouble(states: SessionStates | None) -> str | None:
    """Why the shared database cannot serve calls right now (calls then pass through unreduced), None
    when it answers or the store is embedded. May ask the database (bounded by
    ``store.responseTimeoutS / 2``): call it off the event loop."""
    backend = getattr(states, "backend", None)
    return None if backend is None else backend.trouble()
