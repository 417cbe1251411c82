"""The FTS5 index of archived artifacts: line-level hits that recover byte-exact, and clear errors."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from search_replay import replay

from lightmem_plugin.errors import UsageError
from lightmem_plugin.registry import Registry
from lightmem_plugin.search_index import EXCERPT_CHARS, SearchIndex, excerpt, index_hook

PYTEST_LOG = (
    "============================= test session starts ==============================\n"
    "collected 12 items\n\n"
    "tests/test_config.py ....F.......\n\n"
    "E       ModuleNotFoundError: No module named 'yaml_loader'\n"
    "FAILED tests/test_config.py::test_load - ModuleNotFoundError\n"
)
GREP_OUT = "src/app.py:12:import yaml_loader\nsrc/app.py:40:    cfg = yaml_loader.load(path)\n"


@pytest.fixture
def index(tmp_path: Path) -> SearchIndex:
    idx = SearchIndex(tmp_path / "search.sqlite3")
    idx.add("a" * 32, PYTEST_LOG, "s1")
    idx.add("b" * 32, GREP_OUT, "s2")
    return idx


def test_replayed_session_line_is_found_and_recovered_byte_exact(tmp_path: Path) -> None:
    run = replay(tmp_path)
    keys = run.index.keys()
    assert len(keys) == 3 and keys == {p.name for p in (tmp_path / "artifacts").glob("??/*")}
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
    assert checked == 3


def test_session_scope_and_ranking(index: SearchIndex) -> None:
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
def test_fts_syntax(index: SearchIndex, query: str, expected: list[tuple[str, int]]) -> None:
    assert sorted((h.key[0], h.line) for h in index.search(query, fts=True)) == expected


@pytest.mark.parametrize("query", ['"unbalanced', "foo AND", "a:b(", "NEAR(", "(x"])
def test_fts_syntax_error_is_one_line_usage_error(index: SearchIndex, query: str) -> None:
    with pytest.raises(UsageError) as info:
        index.search(query, fts=True)
    msg = str(info.value)
    assert "\n" not in msg and "bad search query" in msg and "without --fts" in msg


def test_regex_mode(index: SearchIndex) -> None:
    hits = index.search(r"app\.py:\d+:", regex=True)
    assert [(h.key[0], h.line) for h in hits] == [("b", 1), ("b", 2)]
    assert hits[0].excerpt.startswith("src/app.py:12")
    assert len(index.search(r"\w", regex=True, limit=3)) == 3
    with pytest.raises(UsageError, match="bad regex"):
        index.search("(unclosed", regex=True)


def test_add_is_idempotent_and_shares_lines_across_sessions(index: SearchIndex) -> None:
    assert index.add("a" * 32, PYTEST_LOG, "s1") is False
    assert index.add("a" * 32, PYTEST_LOG, "s3") is True
    assert len(index.search('"No module named"')) == 1  # lines are stored once per key
    assert [h.line for h in index.search('"No module named"', session="s3")] == [6]


def test_rebuild_follows_the_registry_and_the_hook_indexes_on_put(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "artifacts")
    idx = SearchIndex(tmp_path / "search.sqlite3")
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


def test_hook_fails_open(tmp_path: Path) -> None:
    idx = SearchIndex(tmp_path / "search.sqlite3")
    idx.close()
    index_hook(idx, "s")("c" * 32, b"text\n")  # closed connection: no exception reaches the registry
    assert SearchIndex(tmp_path / "search.sqlite3").keys() == set()  # and nothing half-written


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
def test_literal_text_is_the_default(tmp_path: Path, query: str, lines: list[int]) -> None:
    idx = SearchIndex(tmp_path / "search.sqlite3")
    idx.add("c" * 32, PUNCTUATED, "s1")
    assert sorted(h.line for h in idx.search(query)) == lines


def test_fts_and_regex_exclude_each_other(index: SearchIndex) -> None:
    with pytest.raises(UsageError, match="--regex and --fts"):
        index.search("x", regex=True, fts=True)


def test_scores_are_bm25_and_not_rounded_to_zero(tmp_path: Path) -> None:
    idx = SearchIndex(tmp_path / "search.sqlite3")
    idx.add("d" * 32, "error here\nerror error there\nerror\nno match\n", "s1")  # "error" on most lines
    hits = idx.search("error")
    assert len(hits) == 3 and all(h.score is not None and h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score or 0 for h in hits), reverse=True)
    assert all(h.score is None for h in idx.search("err", regex=True))  # a regex match has no rank


def test_a_backtracking_regex_is_stopped_in_time(tmp_path: Path) -> None:
    """Measured before: ^(a+)+$ over 34 "a" and "!" gave no answer in 45 s and blocked the next call."""
    import time

    idx = SearchIndex(tmp_path / "i.sqlite3")
    idx.add("c" * 32, "a" * 34 + "!\n" + "a" * 60 + "!\nsomething else\n", "s")
    t0 = time.monotonic()
    assert idx.search("^(a+)+$", regex=True) == []  # the regex engine answers this one at once
    assert time.monotonic() - t0 < 5  # (was: no answer in 45 s); room for a loaded machine
    t0 = time.monotonic()
    with pytest.raises(UsageError, match=r"ran past 2 s .*simplify it"):
        idx.search("^(a|aa)+$", regex=True)  # this one still backtracks: stopped at the budget
    assert time.monotonic() - t0 < 10
    assert [h.line for h in idx.search("^some", regex=True)] == [3]  # the index still answers
