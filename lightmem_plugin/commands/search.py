"""search QUERY [--session ID | --all] [--regex | --fts] [--limit N] [--json]: find lines in archived originals.

A stub names its artifact key, but "where did I see that error?" needs no key: this searches every
archived original (redacted, as stored) and prints, best first, the artifact key, the line number, a
short excerpt, the BM25 score and the exact ``lightmem2 recover KEY --lines A:B`` call that prints the
line. QUERY is literal text, punctuation included (``file.py:17``, ``foo_bar.baz``): every
space-separated term must appear on the line, ignoring case, from the start of a word; a query in
double quotes is one phrase. ``--fts`` takes FTS5 query syntax instead ("a phrase", prefix*, AND, OR,
NOT), ``--regex`` a Python regular expression (matches have no score). Without ``--session`` the
session that archived last is searched; ``--all`` searches every session. With ``store.url`` set this
searches the team gateway's index in the database (what every process archived; ranked by PostgreSQL's
``ts_rank``, and ``--fts`` without NEAR, column filters or ``^``). A user of a team gateway who sets
``LIGHTMEM2_GATEWAY_URL`` and ``LIGHTMEM2_TOKEN`` (as for ``recover``) searches there: all of their own
sessions' archives, literal text or ``--regex``.
"""

from __future__ import annotations

import argparse
import sys

from ..config import Config, config_in_force
from ..errors import RegistryError, UsageError
from ..server.gateway_client import gateway, post
from ..store import open_stores
from ..store.registry import Registry
from ..store.search_index import Hit, IndexBase, SearchIndex
from ..views.search import render, run
from .base import Command, Outcome


def remote(
    url: str,
    token: str,
    query: str,
    session: str | None = None,
    regex: bool = False,
    limit: int = 10,
    as_json: bool = False,
    fts: bool = False,
) -> str:
    """``lightmem2 search`` for a user of a team gateway (``LIGHTMEM2_GATEWAY_URL``): the gateway
    searches what that user's sessions archived, on every process of the fleet, and nobody else's.

    The gateway takes literal text or a regex over all of the user's archives: ``--session`` and
    ``--fts`` are refused here rather than silently ignored."""
    if session is not None:
        raise UsageError(
            f"--session {session[:60]} is not available through a team gateway (it searches all of your "
            "sessions); drop --session, or unset $LIGHTMEM2_GATEWAY_URL to search this machine's archives"
        )
    if fts:
        raise UsageError(
            "--fts is not available through a team gateway; search the literal text or pass --regex"
        )
    # the route checks the query and the limit itself: a 400 comes back as a UsageError with its reason
    answer = post(
        url, token, "/lightmem2/v1/search", {"query": query, "regex": regex, "limit": limit}, "search"
    )
    rows = answer.get("hits")
    if not isinstance(rows, list):
        raise RegistryError(f"the gateway {url} answered without hits: {str(answer)[:200]}")
    hits = [
        Hit(str(h["key"]), int(h["line"]), str(h["excerpt"]), h.get("score"))
        for h in rows
        if isinstance(h, dict) and {"key", "line", "excerpt"} <= h.keys()
    ]
    return render(hits, query, f"your sessions on the gateway {url}", None, regex, fts, as_json)


def fix_index(registry: Registry, index: IndexBase | None = None) -> str:
    """``doctor --fix``: rebuild the search index (the data dir's by default) when it is missing or
    stale; one status line."""
    index = index or SearchIndex.default()
    stale = index.stale(registry)
    if not stale:
        return "[pass] search index: up to date"
    count = index.rebuild(registry)
    return f"[fixed] search index: {stale} artifacts were missing or stale; re-indexed {count}"


def configure(parser: argparse.ArgumentParser) -> None:
    """``QUERY``, ``--session ID`` or ``--all``, ``--regex`` or ``--fts``, ``--limit N``, ``--json``."""
    parser.add_argument("query", metavar="QUERY")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--session", metavar="ID")
    group.add_argument("--all", action="store_true")
    syntax = parser.add_mutually_exclusive_group()
    syntax.add_argument("--regex", action="store_true", help="QUERY is a Python regular expression")
    syntax.add_argument(
        "--fts",
        action="store_true",
        help="QUERY is FTS5 query syntax (with store.url: no NEAR, column filters or ^)",
    )
    parser.add_argument("--limit", type=int, default=10, metavar="N")
    parser.add_argument("--json", action="store_true")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 search`` in the user's index (the shared one when ``store.url`` is set)."""
    found = gateway()
    if found is not None:  # a user of a team gateway: their archives live there
        return remote(*found, args.query, args.session, args.regex, args.limit, args.json, args.fts)
    config = _config_in_force()
    # with store.url the database's index (StoreUnavailable: one line naming the URL and the fix)
    stores = open_stores(config) if config.store.url else None
    try:
        index = stores.search_index() if stores is not None else SearchIndex.default()
        return run(index, args.query, args.session, args.all, args.regex, args.limit, args.json, args.fts)
    finally:
        if stores is not None:
            stores.close()


COMMAND = Command("search", __doc__, configure, main)


def _config_in_force() -> Config:
    """The config in force (the file, else the last good copy, else the defaults): a typo in the file
    never stops a read-only command; stderr says what was rejected and what runs."""
    config, rejected = config_in_force()
    if rejected:
        print(f"lightmem2: {rejected}", file=sys.stderr)
    return config
