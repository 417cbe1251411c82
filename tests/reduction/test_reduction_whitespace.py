from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lightmem_plugin.reduction.whitespace import clean, split_lines, strip_ansi


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("\x1b[31mERROR\x1b[0m: boom", "ERROR: boom"),
        ("\x1b[1;32m===== 3 passed =====\x1b[0m", "===== 3 passed ====="),
        ("\x1b]0;title\x07prompt$ ls", "prompt$ ls"),
        ("\x1b[2K\x1b[1Gprogress 50%", "progress 50%"),
        ("no escapes <class 'bytes'>", "no escapes <class 'bytes'>"),
    ],
)
def test_strip_ansi(raw: str, expected: str) -> None:
    assert strip_ansi(raw) == expected


def test_clean_keeps_bytes_and_drops_only_blank_runs_and_carets() -> None:
    lines = ["first   ", "", "", "   ", "\x1b[33mwarn\x1b[0m\t", "    x = y[0]", "        ^^^^", "", "last"]
    out, origin = clean(lines)
    assert out == ["first   ", "", "\x1b[33mwarn\x1b[0m\t", "    x = y[0]", "", "last"]
    assert origin == [0, 1, 4, 5, 7, 8]


def test_split_lines_numbers_like_the_registry() -> None:
    text = "a\r\nb\rc\n\nd"
    assert split_lines(text) == ["a", "b", "c", "", "d"]
    assert len(split_lines(text)) == len(text.splitlines(keepends=True))


@given(st.lists(st.text(max_size=30), max_size=40))
def test_clean_keeps_every_line_byte_exact(lines: list[str]) -> None:
    out, origin = clean(lines)
    assert len(out) == len(origin)
    assert origin == sorted(set(origin))
    for line, i in zip(out, origin, strict=True):
        assert line == lines[i]  # DESIGN I4: a kept line is the original line, whitespace included
    assert all(not (a.strip() == "" and b.strip() == "") for a, b in pairwise(out))
