from __future__ import annotations

import gzip

import pytest

from lightmem_plugin import tokens
from lightmem_plugin.errors import TokenizerError
from lightmem_plugin.tokens import TokenCounter, count_tokens, encoding


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello world", 2),
        ("def f(x):\n    return x + 1\n", 11),
    ],
)
def test_counts_match_o200k_base(text: str, expected: int) -> None:
    assert count_tokens(text) == expected


def test_encoding_round_trips_and_is_o200k() -> None:
    enc = encoding()
    assert enc.n_vocab == 200019
    ids = enc.encode("lightmem2 keeps prompts stable ✓")
    assert enc.decode(ids) == "lightmem2 keeps prompts stable ✓"


def test_counter_memoises_and_handles_surrogates() -> None:
    c = TokenCounter()
    bad = "abc\udcff def"
    assert c.count(bad) == c.count(bad) > 0
    assert c.count("x" * 100) == c.count("x" * 100)


def test_altered_ranks_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Fake:
        def joinpath(self, *parts: str) -> Fake:
            return self

        def read_bytes(self) -> bytes:
            return gzip.compress(b"AAAA 0\n")

    monkeypatch.setattr(tokens.resources, "files", lambda _pkg: Fake())
    with pytest.raises(TokenizerError, match="sha256"):
        tokens.ranks_bytes()
