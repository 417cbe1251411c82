"""The search index in PostgreSQL: every process of a team gateway searches what any of them archived.

Same contract as the SQLite index (:class:`~lightmem_plugin.store.search_index.SearchIndex`, whose query
semantics it inherits from :class:`~lightmem_plugin.store.search_index.IndexBase`): one row per non-blank
line (``lm_search_lines``), numbered as ``str.splitlines`` numbers them and clipped to
``MAX_LINE_CHARS``, redacted; an artifact belongs to the sessions that archived it
(``lm_search_docs``) and its lines are stored once per key (``lm_search_keys``, whose insert decides
which process writes them when two index the same key at once).

Matching is PostgreSQL's built-in full text search, no extension: a ``tsvector`` per line under a GIN
index, ``@@`` a ``tsquery``, ``:*`` for a prefix, ``<->`` for a phrase, ranked by ``ts_rank`` (length
normalised, higher is better; not BM25, so scores differ from the SQLite index's, the order of clear
cases does not). The lexemes are not PostgreSQL's parser's: it keeps ``path/to/file.py``, ``a-b`` and
``x.y.z`` as single tokens (file, hyphenated word, host), so ``file.py`` or ``lattice`` would miss
lines FTS5 finds. Both sides are built here instead, by FTS5's own rule (runs of letters and digits,
case-folded) and sent as ``tsvector`` / ``tsquery`` literals, so a query finds the lines the SQLite
index finds.

``--fts`` (FTS5 query syntax) is translated to a ``tsquery``: bare words and "quoted phrases", ``*``
prefixes, ``+`` joins, ``AND``, ``OR``, ``NOT`` and parentheses, with FTS5's precedence (NOT, then AND,
then OR). ``NEAR(...)``, column filters (``col:``) and ``^`` have no equivalent here: they are a
:class:`~lightmem_plugin.errors.UsageError` saying to drop ``--fts`` or use ``--regex``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Collection, Generator
from typing import TYPE_CHECKING, Any

import psycopg

from ..errors import StoreError
from .postgres import PgBackend
from .search_index import (
    REGEX_SCAN_LINES,
    IndexBase,
    Row,
    decode,
    fts_error,
    readable,
    storable,
)

if TYPE_CHECKING:
    from .registry import Registry

_LEXEME = re.compile(r"[^\W_]+")  # FTS5 unicode61's tokens: runs of letters and digits
MAX_LEXEME_CHARS = 500
"""Longer runs (base64, hex dumps) are indexed by their start (PostgreSQL caps a lexeme at 2047 bytes);
a query term that long matches as a prefix of it, and the literal post-filter keeps it exact."""


def lexemes(text: str) -> list[str]:
    """``text``'s words as both sides of a match see them: case-folded, clipped."""
    return [w[:MAX_LEXEME_CHARS] for w in _LEXEME.findall(text.casefold())]


def tsvector(text: str) -> str:
    """The ``tsvector`` literal of a line: each lexeme with its positions (phrases need them)."""
    at: dict[str, list[str]] = {}
    for n, word in enumerate(lexemes(text), 1):
        at.setdefault(word, []).append(str(min(n, 16383)))
    return " ".join(f"'{w}':{','.join(p)}" for w, p in at.items())


def phrase(text: str, prefix: bool) -> str | None:
    """The ``tsquery`` of ``text``'s words one after another (the last a prefix when ``prefix``);
    None when it has no word. Lexemes are letters and digits only: nothing to quote."""
    words = lexemes(text)
    if not words:
        return None
    last = "'" + words[-1] + "'" + (":*" if prefix or len(words[-1]) == MAX_LEXEME_CHARS else "")
    return " <-> ".join([*(f"'{w}'" for w in words[:-1]), last])


def literal_tsquery(terms: list[str]) -> str | None:
    """Lines holding every term, each as a phrase whose last word is a prefix (as the SQLite index's
    :func:`~lightmem_plugin.store.search_index.literal_match`); None when no term has a letter or digit."""
    parts = [p for p in (phrase(t, prefix=True) for t in terms) if p is not None]
    return " & ".join(f"({p})" for p in parts) or None


_FTS_TOKEN = re.compile(r'"((?:[^"]|"")*)("?)|([()*+])|([\w\u0080-\U0010ffff]+)|(\S)')


def fts_tsquery(query: str) -> str:
    """FTS5 query syntax as a ``tsquery`` (see the module docstring); :func:`fts_error` if it cannot."""
    tokens: list[tuple[str, str]] = []  # (kind, text): str, op, word
    for m in _FTS_TOKEN.finditer(query):
        string, closed, op, word, other = m.groups()
        if string is not None:
            if not closed:
                raise fts_error(query, "unterminated string")
            tokens.append(("str", string.replace('""', '"')))
        elif op is not None:
            tokens.append(("op", op))
        elif word is not None:
            tokens.append(("word", word))
        elif other in (":", "^"):
            raise fts_error(query, f"{other!r}: column filters and ^ are not supported with store.url")
        else:
            raise fts_error(query, f"syntax error near {other!r}")
    pos = 0

    def peek() -> tuple[str, str] | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> tuple[str, str]:
        nonlocal pos
        tok = peek()
        if tok is None:
            raise fts_error(query, "the query ends too early")
        pos += 1
        return tok

    def keyword(tok: tuple[str, str] | None, *names: str) -> bool:
        return tok is not None and tok[0] == "word" and tok[1] in names

    def item() -> tuple[str, bool]:
        kind, text = take()
        if keyword((kind, text), "NEAR") and peek() == ("op", "("):
            raise fts_error(query, "NEAR(...) is not supported with store.url")
        if kind == "op" or keyword((kind, text), "AND", "OR", "NOT"):
            raise fts_error(query, f"syntax error near {text!r}")
        star = peek() == ("op", "*")
        if star:
            take()
        return text, star

    def primary() -> str:
        if peek() == ("op", "("):
            take()
            inner = or_expr()
            if take() != ("op", ")"):
                raise fts_error(query, "unbalanced parenthesis")
            return f"({inner})"
        parts = [item()]
        while peek() == ("op", "+"):
            take()
            parts.append(item())
        built = [phrase(text, star) for text, star in parts]
        if any(b is None for b in built):
            raise fts_error(query, "a term has no letter or digit to look for")
        return "(" + " <-> ".join(b for b in built if b) + ")"

    def not_expr() -> str:
        left = primary()
        while keyword(peek(), "NOT"):
            take()
            left = f"({left} & !{primary()})"
        return left

    def and_expr() -> str:
        left = not_expr()
        while True:
            tok = peek()
            if keyword(tok, "AND"):
                take()
            elif tok is None or tok == ("op", ")") or keyword(tok, "OR", "NOT"):
                return left
            left = f"({left} & {not_expr()})"  # "a b": an implicit AND

    def or_expr() -> str:
        left = and_expr()
        while keyword(peek(), "OR"):
            take()
            left = f"({left} | {and_expr()})"
        return left

    built = or_expr()
    if pos < len(tokens):
        raise fts_error(query, f"syntax error near {tokens[pos][1]!r}")
    return built


def _line_text(line: str) -> str:
    """A line as stored: clipped and encodable, and no NUL (PostgreSQL text cannot hold one)."""
    return storable(line).replace("\x00", "?")


class PgSearchIndex(IndexBase):
    """:class:`~lightmem_plugin.store.search_index.IndexBase` in PostgreSQL, on the stores' pool."""

    errors = (psycopg.Error, StoreError, OSError)

    def __init__(self, backend: PgBackend) -> None:
        self.backend = backend

    @property
    def where(self) -> str:
        """The database URL, password hidden."""
        return self.backend.where

    def close(self) -> None:
        """Nothing of its own to close: the backend's pool is closed by its owner."""

    def _insert(self, key: str, text: str, session: str) -> bool:
        """Add one artifact in one transaction; False when (key, session) was there already."""

        def work(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                new = conn.execute(
                    "INSERT INTO lm_search_keys VALUES (%s) ON CONFLICT DO NOTHING RETURNING key", (key,)
                ).fetchone()
                added = conn.execute(
                    "INSERT INTO lm_search_docs VALUES (%s, %s, nextval('lm_search_clock')) "
                    "ON CONFLICT DO NOTHING RETURNING key",
                    (key, session),
                ).fetchone()
                if new is not None:  # the first to index this key writes its lines
                    rows = [
                        (key, n, stored, tsvector(stored))
                        for n, line in enumerate(text.splitlines(), 1)
                        if line.strip()
                        for stored in (_line_text(line),)
                    ]
                    with conn.cursor() as cur:
                        cur.executemany(
                            "INSERT INTO lm_search_lines (key, line_no, text, words) "
                            "VALUES (%s, %s, %s, %s::tsvector)",
                            rows,
                        )
            return added is not None

        return self.backend.run(None, work)

    def add(self, key: str, text: str | bytes, session: str | None = None) -> bool:
        """Index artifact ``key`` for ``session`` ('' = none); adding it again is a no-op (returns False)."""
        return self._insert(key, decode(text) if isinstance(text, bytes) else text, session or "")

    def keys(self) -> set[str]:
        """Every indexed artifact key."""
        rows = self.backend.run(None, lambda c: c.execute("SELECT key FROM lm_search_keys").fetchall())
        return {str(r[0]) for r in rows}

    def sessions(self) -> list[str]:
        """Session ids, the one that archived most recently first ('' not included)."""
        sql = "SELECT session FROM lm_search_docs WHERE session <> '' GROUP BY session ORDER BY MAX(seq) DESC"
        return [str(r[0]) for r in self.backend.run(None, lambda c: c.execute(sql).fetchall())]

    def rebuild(self, registry: Registry, session: str | None = None) -> int:
        """Bring the index in step with ``registry`` (see :meth:`IndexBase.rebuild`); one transaction per
        artifact, so processes indexing meanwhile are not held up."""
        stored = registry.keys()
        indexed = self.keys()
        gone = sorted(indexed - stored)
        if gone:
            sql = "DELETE FROM lm_search_keys WHERE key = ANY(%s)"  # their docs and lines cascade
            self.backend.run(None, lambda c: c.execute(sql, (gone,)))
        return self._add_from(registry, sorted(stored - indexed), session or "")

    def ensure(self, registry: Registry, keys: Collection[str]) -> int:
        """Index those of ``keys`` the index lacks (see :meth:`IndexBase.ensure`); one query when none."""
        sql = (
            "SELECT k FROM unnest(%s::text[]) AS k WHERE NOT EXISTS "
            "(SELECT 1 FROM lm_search_keys s WHERE s.key = k) ORDER BY k"
        )
        wanted = sorted(set(keys))
        missing = self.backend.run(None, lambda c: c.execute(sql, (wanted,)).fetchall()) if wanted else []
        return self._add_from(registry, [str(r[0]) for r in missing], "")

    def _add_from(self, registry: Registry, keys: list[str], session: str) -> int:
        added = 0
        for key in keys:  # read, then write: never two pooled connections at once
            text = readable(registry, key)
            if text is not None:  # collected meanwhile, or corrupt: nothing to offer
                added += self._insert(key, text, session)
        return added

    @staticmethod
    def _scope(session: str | None, within: frozenset[str] | None) -> tuple[str, list[Any]]:
        where = ""
        args: list[Any] = []
        if session is not None:
            where += " AND l.key IN (SELECT key FROM lm_search_docs WHERE session = %s)"
            args.append(session)
        if within is not None:  # a gateway user's search: only the keys they own
            where += " AND l.key = ANY(%s)"
            args.append(sorted(within))
        return where, args

    def _literal_match(self, terms: list[str]) -> str | None:
        return literal_tsquery(terms)

    def _fts_match(self, query: str) -> str:
        return fts_tsquery(query)

    def _ranked(
        self, match: str, session: str | None, within: frozenset[str] | None, limit: int | None, shown: str
    ) -> Generator[tuple[str, int, str, float]]:
        """``match`` (a tsquery) over the GIN index, by ``ts_rank`` normalised by length (flag 1)."""
        where, args = self._scope(session, within)
        sql = (
            "SELECT l.key, l.line_no, l.text, ts_rank(l.words, m.q, 1) AS rank "
            "FROM lm_search_lines l, (SELECT %s::tsquery AS q) m WHERE l.words @@ m.q"
            + where
            + " ORDER BY rank DESC, l.key, l.line_no"
            + ("" if limit is None else " LIMIT %s")
        )
        params = [match, *args, *([] if limit is None else [limit])]
        with contextlib.closing(self.backend.stream(sql, params)) as rows:
            for key, line_no, text, rank in rows:
                yield str(key), int(line_no), str(text), float(rank)

    def _lines(self, session: str | None, within: frozenset[str] | None) -> Generator[Row]:
        where, args = self._scope(session, within)
        sql = (
            "SELECT l.key, l.line_no, l.text FROM lm_search_lines l WHERE true"
            + where
            + " ORDER BY l.id LIMIT %s"
        )
        with contextlib.closing(self.backend.stream(sql, [*args, REGEX_SCAN_LINES])) as rows:
            for key, line_no, text in rows:
                yield str(key), int(line_no), str(text)
