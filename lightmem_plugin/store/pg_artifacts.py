"""The artifact registry in PostgreSQL: every process of a gateway recovers what any of them archived.

Same contract as the file registry (:class:`~lightmem_plugin.store.registry.Registry`, whose policy it
reuses): the key is the xxh3-128 of the archived plaintext, the bytes are stored sealed (or redacted
without an archive key) and verified against the key on every read, so ``recover`` is byte-exact.
Storing a key twice is free. Least recently used goes first when the store is over ``maxBytes``; what
"recent" means is a database sequence (``lm_artifacts_clock``), one order for the whole fleet, never a
clock. Every process must share the archive key (``$LIGHTMEM2_ARCHIVE_KEY``) to open what another
sealed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg

from ..errors import ArtifactNotFound
from .postgres import PgBackend
from .registry import Registry

GC_LOCK = 0x6C6D3267  # one collector at a time across the fleet


class PgRegistry(Registry):
    """:class:`Registry` whose artifacts are rows of ``lm_artifacts`` instead of files."""

    def __init__(self, backend: PgBackend, like: Registry) -> None:
        super().__init__(like.root, like.max_bytes, like.redactor, like.on_put, like.sealer)
        self.owner = like.owner
        self.backend = backend

    @property
    def where(self) -> str:
        """The database URL, password hidden."""
        return self.backend.where

    def _store(self, data: bytes) -> str:
        """Store ``data`` (sealed, or redacted without a sealer) once; its key."""
        key, data, size = self._stored_form(data)
        blob = self._seal(data)
        sql = (
            "INSERT INTO lm_artifacts VALUES (%s, %s, %s, nextval('lm_artifacts_clock')) "
            "ON CONFLICT (key) DO NOTHING RETURNING key"
        )
        added = self.backend.run(None, lambda conn: conn.execute(sql, (key, blob, size)).fetchone())
        if added is not None:
            self._indexed(key, data)
        return key

    def _own(self, owner: str, key: str) -> None:
        """Record that ``owner`` archived ``key`` (one row per user and key, for the fleet)."""
        sql = "INSERT INTO lm_artifact_owners VALUES (%s, %s) ON CONFLICT DO NOTHING"
        self.backend.run(None, lambda conn: conn.execute(sql, (owner, key)))

    def _claimed(self, name: str) -> str | None:
        """The key ``name`` was claimed for (``lm_artifact_names``), None when nobody claimed it."""
        sql = "SELECT key FROM lm_artifact_names WHERE name = %s"
        row = self.backend.run(None, lambda conn: conn.execute(sql, (name,)).fetchone())
        return str(row[0]) if row is not None else None

    def _claim(self, name: str, key: str) -> str | None:
        """Claim ``name`` for ``key`` unless another key holds it (the primary key decides between
        processes); the key that holds it now."""
        sql = "INSERT INTO lm_artifact_names VALUES (%s, %s) ON CONFLICT (name) DO NOTHING"
        self.backend.run(None, lambda conn: conn.execute(sql, (name, key)))
        return self._claimed(name)

    def owns(self, owner: str, key: str) -> bool:
        """True when one of ``owner``'s sessions archived ``key`` and it is still stored."""
        try:
            key = self.resolve(key)
        except ArtifactNotFound:
            return False
        sql = (
            "SELECT 1 FROM lm_artifact_owners o JOIN lm_artifacts a USING (key) "
            "WHERE o.owner = %s AND o.key = %s"
        )
        return self.backend.run(None, lambda conn: conn.execute(sql, (owner, key)).fetchone()) is not None

    def owned(self, owner: str) -> set[str]:
        """Every stored key ``owner``'s sessions archived."""
        sql = "SELECT key FROM lm_artifact_owners JOIN lm_artifacts USING (key) WHERE owner = %s"
        rows = self.backend.run(None, lambda conn: conn.execute(sql, (owner,)).fetchall())
        return {str(r[0]) for r in rows}

    def _read(self, key: str, touch: bool) -> bytes:
        key = self.resolve(key)  # ArtifactNotFound for what is not a key or a claimed name
        if touch:
            sql = (
                "UPDATE lm_artifacts SET last_used = nextval('lm_artifacts_clock') WHERE key = %s "
                "RETURNING data"
            )
        else:
            sql = "SELECT data FROM lm_artifacts WHERE key = %s"
        row = self.backend.run(None, lambda conn: conn.execute(sql, (key,)).fetchone())
        if row is None:
            raise ArtifactNotFound(f"no artifact {key} in {self.where}; check the key in the stub")
        return self._opened(key, bytes(row[0]))

    def peek(self, key: str) -> bytes:
        """The archived bytes of ``key``, verified, without making it recent."""
        return self._read(key, touch=False)

    def get(self, key: str) -> bytes:
        """The archived bytes of ``key``, verified; reading makes it recent (LRU)."""
        return self._read(key, touch=True)

    def exists(self, key: str) -> bool:
        """True when ``key`` (or its short name) is stored."""
        try:
            key = self.resolve(key)
        except ArtifactNotFound:
            return False
        sql = "SELECT 1 FROM lm_artifacts WHERE key = %s"
        return self.backend.run(None, lambda conn: conn.execute(sql, (key,)).fetchone()) is not None

    def keys(self) -> set[str]:
        """Every stored key."""
        rows = self.backend.run(None, lambda conn: conn.execute("SELECT key FROM lm_artifacts").fetchall())
        return {str(r[0]) for r in rows}

    def size_bytes(self) -> int:
        """Total bytes stored, across the fleet."""
        sql = "SELECT COALESCE(SUM(size), 0) FROM lm_artifacts"
        row = self.backend.run(None, lambda conn: conn.execute(sql).fetchone())
        return int(row[0]) if row else 0

    def count(self) -> int:
        """Number of stored artifacts."""
        row = self.backend.run(
            None, lambda conn: conn.execute("SELECT COUNT(*) FROM lm_artifacts").fetchone()
        )
        return int(row[0]) if row else 0

    def gc(self, live_keys: Iterable[str] = ()) -> list[str]:
        """Delete least recently used artifacts until under ``max_bytes``; never ``live_keys``."""
        live = set(live_keys)

        def work(conn: psycopg.Connection[Any]) -> list[str]:
            removed: list[str] = []
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (GC_LOCK,))
                row = conn.execute("SELECT COALESCE(SUM(size), 0) FROM lm_artifacts").fetchone()
                total = int(row[0]) if row else 0
                if total <= self.max_bytes:
                    return removed
                for key, size in conn.execute("SELECT key, size FROM lm_artifacts ORDER BY last_used, key"):
                    if total <= self.max_bytes:
                        break
                    if key in live:
                        continue
                    removed.append(str(key))
                    total -= int(size)
                conn.execute("DELETE FROM lm_artifacts WHERE key = ANY(%s)", (removed,))
                conn.execute("DELETE FROM lm_artifact_owners WHERE key = ANY(%s)", (removed,))
                # the search index in the same database stays in step (docs and lines cascade)
                conn.execute("DELETE FROM lm_search_keys WHERE key = ANY(%s)", (removed,))
            return removed

        return self.backend.run(None, work)
