"""Full-text index of archived artifacts, so an agent can find "where did I see that error?" by content.

Why SQLite FTS5: it ships with Python's sqlite3, needs no service, ranks with BM25 and answers in
milliseconds over tens of thousands of artifacts. Why one row per line: a hit then names the line
numbers that ``lightmem2 recover KEY --lines A:B`` prints, so the agent recovers a few lines instead of a
whole artifact. Line numbers follow ``str.splitlines`` exactly as :meth:`Registry.recover` does.

Only what the registry stored is indexed, and the registry stores redacted bytes, so the index never
holds a credential the archive does not. The file is 0600 in a 0700 directory (DESIGN I6). An
artifact belongs to the sessions that archived it (``docs``); its lines are indexed once per key.

Two backends share :class:`IndexBase` (the interface, and the query semantics: literal terms, the
:func:`contains_all` post-filter, regex scans under a time budget, excerpts and line numbers): this
SQLite file, and, with ``store.url``, PostgreSQL tables every process of a team gateway shares
(:class:`~lightmem_plugin.store.pg_search.PgSearchIndex`). A backend supplies the rows.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Generator, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self

import regex as regex_engine  # the `regex` engine: a timeout on backtracking (re has none)

from ..errors import LightMemError, UsageError
from .home import Home
from .sqlite_store import open_private_db

if TYPE_CHECKING:
    from .registry import Registry

MAX_LINE_CHARS = 4000  # longer lines (minified JSON, base64) are indexed by their start only
REGEX_SCAN_LINES = 2_000_000  # regex mode reads at most this many indexed lines per query
REGEX_BUDGET_S = 2.0
"""Time a regex search may take in all (the ``regex`` engine's timeout; ``re`` has none)."""
EXCERPT_CHARS = 160
_SCHEMA_VERSION = 1
_CREATE = """
CREATE TABLE IF NOT EXISTS docs (key TEXT NOT NULL, session TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (key, session));
CREATE INDEX IF NOT EXISTS docs_by_session ON docs (session, key);
CREATE VIRTUAL TABLE IF NOT EXISTS lines USING fts5(text, key UNINDEXED, line_no UNINDEXED,
    tokenize = 'unicode61');
"""
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Hit:
    """One matching line: artifact ``key``, 1-based ``line``, a short ``excerpt``, higher ``score`` = better.

    ``score`` is the line's BM25 relevance (3 significant digits; FTS5 floors a term on most lines to a
    tiny weight, so it can be small, never rounded to 0); with ``store.url`` PostgreSQL's ``ts_rank``
    (normalised by the line's length); None for a regex or scan match (no rank).
    """

    key: str
    line: int
    excerpt: str
    score: float | None


def decode(data: bytes) -> str:
    """Artifact bytes as the registry's ``recover`` reads them."""
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape")


def storable(line: str) -> str:
    """``line`` clipped and made encodable (lone surrogates become "?", SQLite text must be UTF-8)."""
    return line[:MAX_LINE_CHARS].encode("utf-8", "replace").decode("utf-8")


def excerpt(line: str, at: int = 0, width: int = EXCERPT_CHARS) -> str:
    """At most ``width`` chars of ``line`` around offset ``at``, whitespace runs folded, "…" where cut."""
    start = max(0, min(at - width // 3, len(line) - width))
    piece = " ".join(line[start : start + width].split())
    head = "…" if start > 0 else ""
    tail = "…" if start + width < len(line) else ""
    room = width - len(head) - len(tail)
    return head + piece[:room] + tail


def fts_error(query: str, reason: object) -> UsageError:
    """The one-line error for a query ``--fts`` cannot read, with what to do instead."""
    return UsageError(
        f"bad search query {query!r} (FTS5 syntax, --fts): {reason}; search it without --fts to find the "
        "literal text, or pass --regex"
    )


_TOKEN = re.compile(r"[^\W_]")  # what FTS5's unicode61 tokenizer keeps (letters, digits)
FTS_KEYWORDS = ("AND", "OR", "NOT", "NEAR")


def readable(registry: Registry, key: str) -> str | None:
    """Artifact ``key`` as the index stores it (redacted, decoded), read with ``Registry.peek``
    (verified, not made recent: indexing does not reset the LRU order); None when it cannot be
    offered (removed by a concurrent gc, or corrupt)."""
    try:
        data = registry.peek(key)
    except (OSError, LightMemError):
        return None
    return decode(registry.redactor.redact_bytes(data))


def literal_terms(query: str) -> list[str]:
    """The literal pieces of a plain query: whitespace-separated terms, or one phrase when double-quoted."""
    text = query.strip()
    if len(text) > 2 and text[0] == text[-1] == '"' and '"' not in text[1:-1]:
        return [text[1:-1]]
    return text.split()


def literal_match(terms: list[str]) -> str | None:
    """The FTS5 query that finds lines holding every term (each an exact phrase, its last word a prefix).

    None when no term has a letter or digit (FTS5 cannot look for pure punctuation: the caller scans).
    Lines it finds still need :func:`contains_all`: FTS5 ignores the punctuation between words.
    """
    phrases = ['"' + t.replace('"', '""') + '"*' for t in terms if _TOKEN.search(t)]
    return " AND ".join(phrases) or None


def contains_all(text: str, terms: list[str]) -> bool:
    """True when ``text`` holds every term, ignoring case."""
    low = text.casefold()
    return all(t.casefold() in low for t in terms)


Row = tuple[str, int, str]
"""An indexed line: artifact key, 1-based line number, its (clipped, redacted) text."""


class IndexBase:
    """The search index, whichever backend holds it: what callers use, and the query semantics.

    A backend implements the storage (:meth:`add`, :meth:`keys`, :meth:`sessions`, :meth:`rebuild`,
    :meth:`ensure`, :meth:`close`) and three row sources: the match expression for literal terms and
    for ``--fts`` syntax, the lines a match expression finds (best first) and every line (in indexing
    order). Searching, the post-filter, regex scans, excerpts and scores are shared, so both backends
    answer a query with the same lines.
    """

    errors: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)
    """What a failing write raises; :func:`index_hook` lets these pass (fail open)."""

    def close(self) -> None:
        """Release what the index holds (everything is committed already)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, key: str, text: str | bytes, session: str | None = None) -> bool:
        """Index artifact ``key`` for ``session`` ('' = none); adding it again is a no-op (returns False)."""
        raise NotImplementedError

    def keys(self) -> set[str]:
        """Every indexed artifact key."""
        raise NotImplementedError

    def sessions(self) -> list[str]:
        """Session ids, the one that archived most recently first ('' not included)."""
        raise NotImplementedError

    def rebuild(self, registry: Registry, session: str | None = None) -> int:
        """Bring the index in step with every artifact in ``registry``; returns how many were added.

        Keys no longer stored are dropped; known keys keep their sessions; new ones get ``session`` (pass
        it only for a registry private to one session, as in a replay), else ''. Artifacts are read as
        :func:`readable` reads them (redacted, not made recent).
        """
        raise NotImplementedError

    def ensure(self, registry: Registry, keys: Collection[str]) -> int:
        """Index those of ``keys`` the index lacks (archived by another process of a gateway, or before
        the index existed), read from ``registry`` as :meth:`rebuild` reads them; how many were added."""
        raise NotImplementedError

    def stale(self, registry: Registry) -> int:
        """How many artifacts differ between the registry and the index (0 = in step); for doctor."""
        return len(_artifact_keys(registry) ^ self.keys())

    # -- what a backend answers a query with ---------------------------------------------------------
    def _literal_match(self, terms: list[str]) -> str | None:
        """The match expression for lines holding every term (see :func:`literal_match`); None when no
        term has a letter or digit (the caller then scans)."""
        raise NotImplementedError

    def _fts_match(self, query: str) -> str:
        """The match expression for an FTS5-syntax query; :func:`fts_error` when it cannot be read."""
        raise NotImplementedError

    def _ranked(
        self, match: str, session: str | None, within: frozenset[str] | None, limit: int | None, shown: str
    ) -> Generator[tuple[str, int, str, float]]:
        """(key, line, text, score) of the lines ``match`` finds, best (highest score) first, ties by key
        and line; at most ``limit`` (None: all, for the post-filter). ``shown`` names the query in
        errors."""
        raise NotImplementedError

    def _lines(self, session: str | None, within: frozenset[str] | None) -> Generator[Row]:
        """Every line in scope, in indexing order, at most :data:`REGEX_SCAN_LINES`."""
        raise NotImplementedError

    # -- shared --------------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        session: str | None = None,
        regex: bool = False,
        limit: int = 20,
        fts: bool = False,
        within: Collection[str] | None = None,
    ) -> list[Hit]:
        """Lines matching ``query``, best first; ``session`` None = all; ``within``: only these keys.

        By default ``query`` is literal text: every whitespace-separated term (or the one phrase of a
        double-quoted query) must appear on the line, ignoring case, starting at a word (a term with no
        letter or digit may appear anywhere). ``fts``: FTS5 query syntax; ``regex``: a Python regex.
        """
        if not query.strip():
            raise UsageError("empty search query; give words to look for, e.g. ImportError")
        if limit < 1:
            raise UsageError(f"bad limit {limit}; use a positive number of hits, e.g. 10")
        if regex and fts:
            raise UsageError("--regex and --fts exclude each other; pass one of them")
        scope = None if within is None else frozenset(within)
        if regex:
            try:
                compiled = regex_engine.compile(query)
            except regex_engine.error as err:
                raise UsageError(
                    f"bad regex {query!r}: {err}; fix it or drop --regex to search the literal text"
                ) from None
            deadline = time.monotonic() + REGEX_BUDGET_S
            return self._scan(compiled, session, scope, limit, deadline=deadline, shown=query)
        if fts:
            words = [w for w in _WORD.findall(query) if w.upper() not in FTS_KEYWORDS]
            return self._fts(self._fts_match(query), session, scope, limit, [], words, query)
        terms = literal_terms(query)
        match = self._literal_match(terms)
        if match is None:  # nothing a word index can find (e.g. "->"): scan for the text
            pattern = re.compile(re.escape(terms[0]), re.IGNORECASE)
            return self._scan(pattern, session, scope, limit, terms)
        return self._fts(match, session, scope, limit, terms, terms, query)

    def _fts(
        self,
        match: str,
        session: str | None,
        within: frozenset[str] | None,
        limit: int,
        must: list[str],
        words: list[str],
        shown: str,
    ) -> list[Hit]:
        """``match``'s lines, best first; rows must also contain every ``must`` term (literal search)."""
        hits: list[Hit] = []
        with contextlib.closing(self._ranked(match, session, within, None if must else limit, shown)) as rows:
            for key, line_no, text, score in rows:
                if must and not contains_all(text, must):
                    continue  # the index matched the words; the punctuation between them differs
                low = text.casefold()
                at = min((i for i in (low.find(w.casefold()) for w in words) if i >= 0), default=0)
                hits.append(Hit(key, line_no, excerpt(text, at), float(f"{score:.3g}")))
                if len(hits) >= limit:
                    break
        return hits

    def _scan(
        self,
        pattern: re.Pattern[str] | regex_engine.Pattern[str],
        session: str | None,
        within: frozenset[str] | None,
        limit: int,
        must: list[str] | None = None,
        deadline: float | None = None,
        shown: str = "",
    ) -> list[Hit]:
        """Lines ``pattern`` matches (and holding every ``must`` term), in indexing order; no rank.

        With a ``deadline`` (a regex from the user or the model) the whole scan is bounded in time:
        the ``regex`` engine checks its timeout while it backtracks, so ``^(a+)+$`` over a long line
        of ``a`` stops instead of hanging the tool and every call queued behind it."""
        hits: list[Hit] = []  # the first ``limit`` matches in indexing order (a scan, no sort), then by key
        with contextlib.closing(self._lines(session, within)) as rows:
            for key, line_no, text in rows:
                if deadline is None:
                    m = pattern.search(text)
                else:
                    left = deadline - time.monotonic()
                    try:
                        if left <= 0:
                            raise TimeoutError
                        m = pattern.search(text, timeout=left)  # type: ignore[call-overload]
                    except TimeoutError:
                        raise UsageError(
                            f"regex {shown!r} ran past {REGEX_BUDGET_S:g} s (catastrophic backtracking?); "
                            "simplify it, or search the literal text without --regex"
                        ) from None
                if m and (must is None or contains_all(text, must)):
                    hits.append(Hit(key, line_no, excerpt(text, m.start()), None))
                    if len(hits) >= limit:
                        break
        return sorted(hits, key=lambda h: (h.key, h.line))


class SearchIndex(IndexBase):
    """``<data dir>/search.sqlite3``; safe to share between threads, and processes through SQLite locks."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._db = open_private_db(self.path, _CREATE, _SCHEMA_VERSION)

    @classmethod
    def default(cls) -> SearchIndex:
        """The index in the data dir (``$LIGHTMEM2_HOME/search.sqlite3`` when that is set)."""
        return cls(Home.default().index_file)

    def close(self) -> None:
        """Close the connection (everything is committed already)."""
        with self._lock:
            self._db.close()

    def _insert(self, key: str, text: str, session: str) -> bool:
        """Add one artifact inside an open transaction; False when (key, session) was there already."""
        db = self._db
        if db.execute("SELECT 1 FROM docs WHERE key = ? AND session = ?", (key, session)).fetchone():
            return False
        known = db.execute("SELECT 1 FROM docs WHERE key = ? LIMIT 1", (key,)).fetchone() is not None
        seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM docs").fetchone()[0]
        db.execute("INSERT INTO docs (key, session, seq) VALUES (?, ?, ?)", (key, session, seq))
        if not known:
            rows = ((storable(t), key, n) for n, t in enumerate(text.splitlines(), 1) if t.strip())
            db.executemany("INSERT INTO lines (text, key, line_no) VALUES (?, ?, ?)", rows)
        return True

    def _write(self, work: Callable[[], int]) -> int:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                done = work()
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return done

    def add(self, key: str, text: str | bytes, session: str | None = None) -> bool:
        """Index artifact ``key`` for ``session`` ('' = none); adding it again is a no-op (returns False)."""
        body = decode(text) if isinstance(text, bytes) else text
        return bool(self._write(lambda: int(self._insert(key, body, session or ""))))

    def keys(self) -> set[str]:
        """Every indexed artifact key."""
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT DISTINCT key FROM docs")}

    def sessions(self) -> list[str]:
        """Session ids, the one that archived most recently first ('' not included)."""
        sql = "SELECT session FROM docs WHERE session != '' GROUP BY session ORDER BY MAX(seq) DESC"
        with self._lock:
            return [r[0] for r in self._db.execute(sql)]

    def rebuild(self, registry: Registry, session: str | None = None) -> int:
        """Bring the index in step with ``registry`` in one transaction (see :meth:`IndexBase.rebuild`)."""
        on_disk = _artifact_keys(registry)

        def work() -> int:
            db = self._db
            indexed = {r[0] for r in db.execute("SELECT DISTINCT key FROM docs")}
            for gone in sorted(indexed - on_disk):
                db.execute("DELETE FROM docs WHERE key = ?", (gone,))
                db.execute("DELETE FROM lines WHERE key = ?", (gone,))
            added = 0
            for key in sorted(on_disk - indexed):
                text = readable(registry, key)
                if text is not None:  # a corrupt artifact cannot be recovered: do not offer it
                    added += self._insert(key, text, session or "")
            return added

        return self._write(work)

    def ensure(self, registry: Registry, keys: Collection[str]) -> int:
        """Index those of ``keys`` the index lacks (see :meth:`IndexBase.ensure`)."""

        def work() -> int:
            indexed = {r[0] for r in self._db.execute("SELECT DISTINCT key FROM docs")}
            added = 0
            for key in sorted(set(keys) - indexed):
                text = readable(registry, key)
                if text is not None:  # collected meanwhile, or corrupt: nothing to offer
                    added += self._insert(key, text, "")
            return added

        return self._write(work)

    @staticmethod
    def _scope(session: str | None, within: frozenset[str] | None) -> tuple[str, tuple[str, ...]]:
        where = ""
        args: tuple[str, ...] = ()
        if session is not None:
            where, args = " AND key IN (SELECT key FROM docs WHERE session = ?)", (session,)
        if within is not None:  # a gateway user's search: only the keys they own
            where += " AND key IN (SELECT value FROM json_each(?))"
            args = (*args, json.dumps(sorted(within)))
        return where, args

    def _literal_match(self, terms: list[str]) -> str | None:
        return literal_match(terms)

    def _fts_match(self, query: str) -> str:
        return query  # FTS5 reads it itself; its errors come from _ranked

    def _ranked(
        self, match: str, session: str | None, within: frozenset[str] | None, limit: int | None, shown: str
    ) -> Generator[tuple[str, int, str, float]]:
        """FTS5 ``match`` ranked by BM25 (FTS5's rank is lower = better: the score is its negation)."""
        where, args = self._scope(session, within)
        sql = (
            "SELECT key, line_no, text, bm25(lines) AS rank FROM lines WHERE lines MATCH ?"
            + where
            + " ORDER BY rank, key, line_no"
            + ("" if limit is None else " LIMIT ?")
        )
        params = (match, *args) if limit is None else (match, *args, limit)
        with self._lock:
            try:
                for key, line_no, text, rank in self._db.execute(sql, params):
                    yield key, int(line_no), text, -float(rank)
            except sqlite3.OperationalError as err:
                raise fts_error(shown, err) from None

    def _lines(self, session: str | None, within: frozenset[str] | None) -> Generator[Row]:
        where, args = self._scope(session, within)
        sql = "SELECT key, line_no, text FROM lines WHERE 1" + where + " ORDER BY rowid LIMIT ?"
        with self._lock:
            for key, line_no, text in self._db.execute(sql, (*args, REGEX_SCAN_LINES)):
                yield key, int(line_no), text


def _artifact_keys(registry: Registry) -> set[str]:
    return registry.keys()  # a directory's files, or a database's rows (store.url)


Artifact = bytes | Callable[[], bytes]
"""What the registry tells its ``on_put`` of a new artifact: its redacted bytes, or how to redact them
(run when the artifact is indexed: :func:`indexing_later` may put that off)."""

_later: ContextVar[list[Callable[[], None]] | None] = ContextVar("lightmem2_index_later", default=None)


@contextlib.contextmanager
def indexing_later(into: list[Callable[[], None]]) -> Iterator[None]:
    """Within this block (this thread or task), :func:`index_hook` queues its work in ``into`` instead
    of indexing: the caller runs it later (a model call's :meth:`~lightmem_plugin.pipeline.Session.settle`,
    after the request went upstream).

    Why: indexing an archived output redacts it again (the archive is sealed, the index is not) and
    writes its lines, about 3 ms per archived output measured behind the proxy; the host waited for it
    before its request left. The session of each queued artifact is the one archiving when it was put."""
    token = _later.set(into)
    try:
        yield
    finally:
        _later.reset(token)


def index_hook(
    index: IndexBase, session: str | Callable[[], str | None] | None = None
) -> Callable[[str, Artifact], None]:
    """A ``Registry(on_put=...)`` callback that indexes each archived artifact as it is stored (or,
    inside :func:`indexing_later`, queues it).

    ``session`` is the session id, or a function returning the one being served (a registry is shared
    by the sessions of one process). Indexing fails open (the errors of ``index``'s backend: SQLite, or
    the database's): an unwritable index never stops archiving; ``lightmem2 doctor --fix`` rebuilds it.
    """

    def on_put(key: str, data: Artifact) -> None:
        sid = session() if callable(session) else session

        def add() -> None:
            with contextlib.suppress(*index.errors):  # fail open; doctor --fix rebuilds the index
                index.add(key, data() if callable(data) else data, sid)

        queue = _later.get()
        if queue is None:
            add()
        else:
            queue.append(add)

    return on_put
