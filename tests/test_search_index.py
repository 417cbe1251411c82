"""The index of archived artifacts: line-level hits that recover byte-exact, and clear errors.

The behaviour tests run on both backends (``make_index``): the SQLite FTS5 file and, marked
``postgres`` (``make pg``), the PostgreSQL tables a team gateway shares. Each call of the fixture's
factory is another handle on the same index (another connection, as another process would have).
"""

from __future__ import annotations

import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from search_replay import replay

from lightmem_plugin.errors import UsageError
from lightmem_plugin.store.registry import Registry
from lightmem_plugin.store.search_index import EXCERPT_CHARS, IndexBase, SearchIndex, excerpt, index_hook

PYTEST_LOG = (
    "============================= test session starts ==============================\n"
    "collected 12 items\n\n"
    "tests/test_config.py ....F.......\n\n"
    "E       ModuleNotFoundError: No module named 'yaml_loader'\n"
    "FAILED tests/test_config.py::test_load - ModuleNotFoundError\n"
)
GREP_OUT = "src/app.py:12:import yaml_loader\nsrc/app.py:40:    cfg = yaml_loader.load(path)\n"


BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
Make = Callable[[], IndexBase]


@pytest.fixture(params=BACKENDS)
def make_index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Make]:
    """A factory of handles on one empty index of the backend (each PostgreSQL one its own pool)."""
    closing: list[Callable[[], None]] = []
    if request.param == "sqlite":

        def make() -> IndexBase:
            idx = SearchIndex(tmp_path / "search.sqlite3")
            closing.append(idx.close)
            return idx

    else:
        from lightmem_plugin.store.pg_search import PgSearchIndex
        from lightmem_plugin.store.postgres import PgBackend

        url = request.getfixturevalue("pg_url")

        def make() -> IndexBase:
            backend = PgBackend(url, pool_size=2)
            closing.append(backend.close)
            return PgSearchIndex(backend)

    try:
        yield make
    finally:
        for close in closing:
            close()


@pytest.fixture
def index(make_index: Make) -> IndexBase:
    idx = make_index()
    idx.add("a" * 32, PYTEST_LOG, "s1")
    idx.add("b" * 32, GREP_OUT, "s2")
    return idx


def test_replayed_session_line_is_found_and_recovered_byte_exact(tmp_path: Path, make_index: Make) -> None:
    run = replay(tmp_path, make_index())
    keys = run.index.keys()
    assert len(keys) == 2 and keys == {p.name for p in (tmp_path / "artifacts").glob("??/*")}
    checked = 0
    for key in sorted(keys):
        text = run.registry.recover(key)
        for n, line in enumerate(text.splitlines(keepends=True), 1):
            words = re.findall(r"[A-Za-z_]{8,}", line)
            if not words:
                continue
            hits = run.index.search(f'"{line.strip()}"', limit=50)
            assert any(h.key == key and h.line == n for h in hits), (key, n, line)
            assert run.registry.recover(key, (n, n)) == line
            checked += 1
            break
    assert checked == 2


def test_session_scope_and_ranking(index: IndexBase) -> None:
    hits = index.search("yaml_loader")
    assert [(h.key[0], h.line) for h in hits] == sorted((h.key[0], h.line) for h in hits)  # tie-broken
    assert {(h.key[0], h.line) for h in hits} == {("a", 6), ("b", 1), ("b", 2)}
    assert [h.line for h in index.search("yaml_loader", session="s1")] == [6]
    assert index.search("yaml_loader", session="nobody") == []
    assert index.sessions() == ["s2", "s1"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('"No module named"', [("a", 6)]),
        ("FAILED AND test_load", [("a", 7)]),
        ("collect*", [("a", 2)]),
        ("cfg OR collected", [("a", 2), ("b", 2)]),
    ],
)
def test_fts_syntax(index: IndexBase, query: str, expected: list[tuple[str, int]]) -> None:
    assert sorted((h.key[0], h.line) for h in index.search(query, fts=True)) == expected


@pytest.mark.parametrize("query", ['"unbalanced', "foo AND", "a:b(", "NEAR(", "(x"])
def test_fts_syntax_error_is_one_line_usage_error(index: IndexBase, query: str) -> None:
    with pytest.raises(UsageError) as info:
        index.search(query, fts=True)
    msg = str(info.value)
    assert "\n" not in msg and "bad search query" in msg and "without --fts" in msg


def test_regex_mode(index: IndexBase) -> None:
    hits = index.search(r"app\.py:\d+:", regex=True)
    assert [(h.key[0], h.line) for h in hits] == [("b", 1), ("b", 2)]
    assert hits[0].excerpt.startswith("src/app.py:12")
    assert len(index.search(r"\w", regex=True, limit=3)) == 3
    with pytest.raises(UsageError, match="bad regex"):
        index.search("(unclosed", regex=True)


def test_add_is_idempotent_and_shares_lines_across_sessions(index: IndexBase) -> None:
    assert index.add("a" * 32, PYTEST_LOG, "s1") is False
    assert index.add("a" * 32, PYTEST_LOG, "s3") is True
    assert len(index.search('"No module named"')) == 1  # lines are stored once per key
    assert [h.line for h in index.search('"No module named"', session="s3")] == [6]


def test_rebuild_follows_the_registry_and_the_hook_indexes_on_put(tmp_path: Path, make_index: Make) -> None:
    registry = Registry(tmp_path / "artifacts")
    idx = make_index()
    hook = index_hook(idx, lambda: "live")
    key = registry.put(
        b"Traceback (most recent call last):\n  ValueError: bad token sk-ant-api03-" + b"x" * 40
    )
    hook(key, registry.get(key))
    assert idx.stale(registry) == 0 and [h.key for h in idx.search("ValueError")] == [key]
    assert "sk-ant-api03-xxxx" not in idx.search("ValueError")[0].excerpt  # redacted before storing
    other = registry.put(b"second artifact\n")
    assert idx.stale(registry) == 1 and idx.rebuild(registry) == 1 and idx.stale(registry) == 0
    registry.path_of(key).unlink()
    assert idx.rebuild(registry) == 0 and idx.keys() == {other} and idx.search("ValueError") == []
    assert idx.sessions() == []  # the live session's only artifact is gone


def test_index_file_is_private(tmp_path: Path) -> None:
    SearchIndex(tmp_path / "d" / "search.sqlite3").close()
    assert stat.S_IMODE((tmp_path / "d" / "search.sqlite3").stat().st_mode) == 0o600


def test_hook_fails_open(make_index: Make) -> None:
    idx = make_index()
    backend = getattr(idx, "backend", None)
    (backend.pool if backend is not None else idx).close()  # the connection, or the pool, is gone
    index_hook(idx, "s")("c" * 32, b"text\n")  # no exception reaches the registry
    assert make_index().keys() == set()  # and nothing half-written


def test_what_one_connection_indexes_another_finds(tmp_path: Path, make_index: Make) -> None:
    """Two processes of a gateway: one archives (the registry's hook), the other searches, no ensure."""
    archiving, searching = make_index(), make_index()
    registry = Registry(tmp_path / "artifacts", on_put=index_hook(archiving, "s1"))
    key = registry.put(PYTEST_LOG.encode())
    assert searching.keys() == {key} and searching.sessions() == ["s1"]
    assert [(h.key, h.line) for h in searching.search("yaml_loader")] == [(key, 6)]
    assert searching.search("yaml_loader", within={"0" * 32}) == []  # another user's keys only
    assert [h.line for h in searching.search(r"^FAILED", regex=True, within={key})] == [7]


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=0, max_size=600), st.integers(min_value=0, max_value=700))
def test_excerpt_is_bounded_and_one_line(line: str, at: int) -> None:
    out = excerpt(line.replace("\n", " "), at)
    assert len(out) <= EXCERPT_CHARS and "\n" not in out.replace("\u2028", "")


PUNCTUATED = (
    "step 1: build quasar-lattice\n"
    "quasar lattice is not the same\n"
    "value = foo_bar.baz(2)\n"
    "see path/to/file.py line 3\n"
    "path/to/file.py:17: AssertionError\n"
    "a -> b\n"
)


@pytest.mark.parametrize(
    ("query", "lines"),
    [
        ("quasar-lattice", [1]),
        ("foo_bar.baz", [3]),
        ("foo_bar.baz(2)", [3]),
        ("path/to/file.py", [4, 5]),
        ("file.py:17", [5]),
        ("FILE.PY:17 assertionerror", [5]),  # case-insensitive; every term on the line, any order
        ('"quasar lattice"', [2]),  # a double-quoted query is one literal phrase
        ("->", [6]),  # no word characters at all: a scan
        ("quasar-lat", [1]),  # a term matches from the start of a word
        ("AND", []),  # FTS5 operators are plain words here
        ('"unbalanced', []),
    ],
)
def test_literal_text_is_the_default(make_index: Make, query: str, lines: list[int]) -> None:
    idx = make_index()
    idx.add("c" * 32, PUNCTUATED, "s1")
    assert sorted(h.line for h in idx.search(query)) == lines


def test_fts_and_regex_exclude_each_other(index: IndexBase) -> None:
    with pytest.raises(UsageError, match="--regex and --fts"):
        index.search("x", regex=True, fts=True)


def test_scores_are_ranks_and_not_rounded_to_zero(make_index: Make) -> None:
    idx = make_index()
    idx.add("d" * 32, "error here\nerror error there\nerror\nno match\n", "s1")  # "error" on most lines
    hits = idx.search("error")
    assert len(hits) == 3 and all(h.score is not None and h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score or 0 for h in hits), reverse=True)
    assert all(h.score is None for h in idx.search("err", regex=True))  # a regex match has no rank


def test_a_backtracking_regex_is_stopped_in_time(make_index: Make) -> None:
    """Measured before: ^(a+)+$ over 34 "a" and "!" gave no answer in 45 s and blocked the next call."""
    import time

    idx = make_index()
    idx.add("c" * 32, "a" * 34 + "!\n" + "a" * 60 + "!\nsomething else\n", "s")
    t0 = time.monotonic()
    assert idx.search("^(a+)+$", regex=True) == []  # the regex engine answers this one at once
    assert time.monotonic() - t0 < 5  # (was: no answer in 45 s); room for a loaded machine
    t0 = time.monotonic()
    with pytest.raises(UsageError, match=r"ran past 2 s .*simplify it"):
        idx.search("^(a|aa)+$", regex=True)  # this one still backtracks: stopped at the budget
    assert time.monotonic() - t0 < 10
    assert [h.line for h in idx.search("^some", regex=True)] == [3]  # the index still answers


PARITY_QUERIES = [
    ("yaml_loader", {}),
    ("module named", {}),
    ('"No module"', {}),
    ("test_config.py", {}),
    ("path/to/file.py", {}),
    ("quasar", {}),
    ("->", {}),
    ("ModuleNot", {}),
    ("cfg OR collected FAILED", {"fts": True}),
    ("yaml_loader NOT src", {"fts": True}),
    ("(yaml OR quasar) NOT src", {"fts": True}),
    ("(yaml OR quasar) AND NOT src", {"fts": True}),  # an error in FTS5 syntax: on both
    ("a OR", {"fts": True}),
    ("mod* + named", {"fts": True}),
    ('"quasar lattice" OR "foo_bar"', {"fts": True}),
    ("import NOT cfg OR step", {"fts": True}),
    (r"\d+:", {"regex": True}),
]


@pytest.mark.postgres
@pytest.mark.parametrize(("query", "kwargs"), PARITY_QUERIES)
def test_both_backends_find_the_same_lines(
    tmp_path: Path, pg_url: str, query: str, kwargs: dict[str, bool]
) -> None:
    from lightmem_plugin.store.pg_search import PgSearchIndex
    from lightmem_plugin.store.postgres import PgBackend

    backend = PgBackend(pg_url, pool_size=2)
    try:
        found: list[object] = []
        for idx in (SearchIndex(tmp_path / "search.sqlite3"), PgSearchIndex(backend)):
            for key, text in (("a", PYTEST_LOG), ("b", GREP_OUT), ("c", PUNCTUATED)):
                idx.add(key * 32, text, "s")
            try:
                hits = idx.search(query, limit=50, **kwargs)
            except UsageError as err:
                found.append(str(err).split(":")[0])  # "bad search query '...' (FTS5 syntax, --fts)"
                continue
            found.append(sorted((h.key[0], h.line, h.excerpt) for h in hits))
        assert found[0] == found[1] and found[0]
    finally:
        backend.close()


def test_without_store_url_the_stores_index_is_the_data_dirs(isolated_home: Path) -> None:
    from lightmem_plugin.config import Config
    from lightmem_plugin.store import open_stores

    stores = open_stores(Config())
    try:
        index = stores.search_index()
        assert type(index).__name__ == "SearchIndex" and stores.search_index() is index
        assert (isolated_home / "search.sqlite3").exists()
    finally:
        stores.close()
