"""Provider prefix-cache models, so a replay can say what a transformed prompt would have cost.

Why simulate: the recorded usage only covers the prompts that were really sent. To price a
*transformed* history (reduced, evicted, stabilised) we replay it through a model of the provider's
cache. Every model sees the prompt as token-id chunks (one per message, in order; concatenated they
are the prompt) and keeps, per session, the set of prefixes it has cached. A prefix is named by a
chained hash over fixed-size token blocks (block ``i`` hashes block ``i - 1``'s hash with its own
tokens), so a changed token invalidates every block after it, as on the real services.

Time and luck: a call may say when it was made (``at``, seconds); a cache built with a ``ttl`` then
forgets an entry that was neither written nor read for longer than that (Anthropic keeps a prefix five
minutes after its last use, or an hour where the request asks; reading it starts the time again), and
the call says it found its cache expired (``CallUsage.cold``). Without ``at`` nothing expires (the swe
trajectories have no clock). The provider also reads short on its own: ``observe(cap=)`` limits one
call's read to what the recorded provider read, and :meth:`PrefixCache.warm` starts a session with the
head an earlier session left cached; a replay takes both from what the recorded session's provider
reported (:mod:`lightmem_plugin.measure.luck`), so every policy meets the same provider.

The models (``make_cache(name)``):

``deepseek``
    Every request caches all its full 64-token units, with the answer it generated after the prompt;
    a later request hits the longest cached run of leading units. Writes are free. (DeepSeek reports
    hits in multiples of 64; the swe traces agree, and show the answers cached.)
``openai``
    Only prompts of 1024+ tokens are cached; hits are 1024 tokens plus whole 128-token steps, so
    the model keeps 128-token blocks and counts a hit only from 1024 up. Writes are free.
``anthropic``
    Caches only where the request puts a ``cache_control`` breakpoint (``breakpoints``: prompt
    positions in tokens, each the end of a content block; at most 4 on the real API). A lookup checks
    the breakpoint and the chunk boundaries before it, 20 positions in all, and hits the longest
    cached one; then every breakpoint past the hit of at least ``min_tokens`` (1024, the Opus/Sonnet
    minimum) is written. ``write_tokens`` is the span from the hit to the last written breakpoint,
    billed 1.25x. Without breakpoints nothing is cached: use :func:`default_breakpoints`.
``vllm``
    Automatic prefix caching in 16-token blocks; every full block is cached, and the last prompt
    token is always recomputed, so a fully cached prompt still misses its last partial block.
``token``
    No provider: prefix caching in 1-token blocks. Block rounding moves a real model's figure by up
    to a block per call whenever two policies keep prompts of different lengths (on DeepSeek, tens
    of tokens a call, either way); this model prices a policy without that noise, to compare two
    policies whose difference is smaller than the rounding.

Performance: sessions have ~190 calls of up to ~100k tokens, so each call's work is proportional to
what changed. Chunks are compared with the previous call's by identity first (or by caller-given
``keys``), the block hashes of the unchanged leading chunks are reused, and only the rest is hashed.
Treat chunks as immutable once passed (tuples, or lists you never mutate): an identical object is
taken as unchanged. :class:`lightmem_plugin.metering.chat_tokens.ChatChunker` hands out such chunks.

Cost: ``K = alpha * hit + miss`` (:func:`k_cost`), with cache writes at ``write_factor`` where the
provider prices them (Anthropic). :mod:`lightmem_plugin.metering.chat_tokens` turns chat messages into chunks.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from ..errors import UsageError
from ..tokens import k_cost as k_cost  # re-exported: callers price with cachesim.k_cost

PROVIDERS = ("anthropic", "deepseek", "openai", "vllm", "token")

Chunk = Sequence[int]


@dataclass(frozen=True, slots=True)
class CallUsage:
    """What one call would have cost: all input tokens, split into cache hits and misses.

    ``miss_tokens`` includes ``write_tokens`` (tokens written to the cache are also not read from it).
    ``cold``: a cached prefix the call would have read had expired, or all the cache held had (the
    pause since its last use outlived the TTL), whatever the prompt now holds.
    """

    input_tokens: int
    hit_tokens: int
    miss_tokens: int
    write_tokens: int = 0
    cold: bool = False

    @property
    def hit_rate(self) -> float:
        """Share of the input read from the cache (0.0 for an empty prompt)."""
        return self.hit_tokens / self.input_tokens if self.input_tokens else 0.0


class _Prefix:
    """The current prompt as flat tokens plus chained block hashes, updated incrementally."""

    def __init__(self, block: int) -> None:
        self.block = block
        self.chunks: list[Chunk] = []
        self.keys: list[Hashable] | None = None
        self.flat: array[int] = array("i")  # compact: an int object per token would cost 8x the memory
        self.hashes: list[int] = []
        self.bounds: list[int] = []

    def update(self, chunks: Sequence[Chunk], keys: Sequence[Hashable] | None) -> int:
        """Make ``chunks`` the current prompt; returns how many leading tokens are unchanged."""
        if keys is not None and len(keys) != len(chunks):
            raise UsageError(
                f"observe() got {len(keys)} keys for {len(chunks)} chunks; pass one key per chunk or none"
            )
        same = 0
        common = 0
        old = self.chunks
        for i in range(min(len(old), len(chunks))):
            if keys is not None and self.keys is not None:
                equal = keys[i] == self.keys[i]
            else:
                equal = old[i] is chunks[i] or old[i] == chunks[i]
            if not equal:
                break
            same += 1
            common += len(chunks[i])
        self.chunks = list(chunks)
        self.keys = list(keys) if keys is not None else None
        del self.flat[common:]
        del self.bounds[same:]
        end = common
        for chunk in chunks[same:]:
            self.flat.extend(chunk)
            end += len(chunk)
            self.bounds.append(end)
        size = self.block
        keep = common // size
        del self.hashes[keep:]
        h = self.hashes[-1] if self.hashes else 0
        flat = self.flat
        for j in range(keep, len(flat) // size):
            h = hash((h, tuple(flat[j * size : (j + 1) * size])))
            self.hashes.append(h)
        return common

    def position_hash(self, pos: int) -> int:
        """Hash of the first ``pos`` tokens (any position, not only block ends)."""
        k = pos // self.block
        base = self.hashes[k - 1] if k else 0
        return hash((base, tuple(self.flat[k * self.block : pos]), -1))


class PrefixCache:
    """A provider's prefix cache for one session: feed it every call's prompt in order.

    ``ttl``: seconds an entry lives after it was last written or read (None: forever); it applies to
    calls that say when they were made (``at``).
    """

    name = "base"
    block = 64
    caches_output = False
    """The provider also caches what the model generated, as the continuation of its prompt: the
    caller then passes it to :meth:`generated` (a model that thinks first generated its thinking, which
    the next prompt does not hold, so there it is of no use)."""

    def __init__(self, ttl: float | None = None) -> None:
        self._prefix = _Prefix(self.block)
        self.ttl = ttl
        self._touched: dict[int, float] = {}  # prefix hash -> when last written or read (0.0: no clock)
        self._warm = 0
        self._used_at: float | None = None  # when anything was last written or read

    def _expired(self, at: float | None) -> bool:
        """True when the pause since the cache was last used outlived the TTL: all it held expired,
        so the call is cold whatever its prompt (changed or not) would have read."""
        used = self._used_at
        return at is not None and used is not None and self.ttl is not None and at - used > self.ttl

    def observe(
        self,
        chunks: Sequence[Chunk],
        breakpoints: Sequence[int] | None = None,
        keys: Sequence[Hashable] | None = None,
        at: float | None = None,
        cap: int | None = None,
    ) -> CallUsage:
        """Usage of a call with this prompt, after which its cacheable prefixes are cached.

        ``breakpoints`` (token positions) matter only to ``anthropic``; ``keys`` (one per chunk)
        replace the identity/equality test when the caller already names its chunks; ``at`` is when
        the call was made (seconds), for the TTL; ``cap``: the provider read at most this many tokens
        from its cache for this call (as recorded), whatever it held.
        """
        raise NotImplementedError

    def generated(self, chunks: Sequence[Chunk], keys: Sequence[Hashable] | None, at: float | None) -> None:
        """After a call, the prompt followed by what the model generated (``chunks``) is cached too,
        unbilled (see :attr:`caches_output`); the next prompt hits it as far as it continues with those
        tokens. Only prefix caches without breakpoints keep it."""

    def warm(self, tokens: int) -> None:
        """The next prompt's first ``tokens`` tokens are already cached (an earlier session left the
        shared head warm: the recorded first call read them)."""
        self._warm = tokens

    def expire(self) -> None:
        """Everything cached is gone (the caller knows the provider's cache went cold: a pause past its
        TTL, told by :mod:`~lightmem_plugin.eviction.cold_cache`, where this cache keeps no clock)."""
        self._touched.clear()

    def _alive(self, h: int, at: float | None) -> bool | None:
        """True when ``h`` is cached and fresh at ``at``, False when it expired, None when absent."""
        touched = self._touched.get(h)
        if touched is None:
            return None
        return at is None or self.ttl is None or at - touched <= self.ttl

    def _keep(self, h: int, at: float | None) -> None:
        """``h`` is cached (written or read) at ``at``."""
        self._touched[h] = at if at is not None else 0.0
        self._used(at)

    def _used(self, at: float | None) -> None:
        """The session used the cache at ``at`` (a call, or what it cached): a pause counts from then."""
        if at is not None and (self._used_at is None or at > self._used_at):
            self._used_at = at


class BlockCache(PrefixCache):
    """Automatic prefix caching over fixed blocks (DeepSeek, OpenAI, vLLM)."""

    min_tokens = 0
    """Prompts shorter than this are not cached, and hits shorter than this count as none."""
    recompute_last = False
    """vLLM always recomputes the last prompt token, so a full hit is capped below the prompt length."""

    def __init__(self, ttl: float | None = None) -> None:
        super().__init__(ttl)
        self._known = 0  # leading blocks of the last prompt known to be cached (and fresh)
        self._last_at: float | None = None

    def expire(self) -> None:
        super().expire()
        self._known = 0

    def observe(
        self,
        chunks: Sequence[Chunk],
        breakpoints: Sequence[int] | None = None,
        keys: Sequence[Hashable] | None = None,
        at: float | None = None,
        cap: int | None = None,
    ) -> CallUsage:
        common = self._prefix.update(chunks, keys)
        hashes = self._prefix.hashes
        size = self.block
        n = len(self._prefix.flat)
        if self._warm:
            for k in range(min(len(hashes), self._warm // size)):
                self._keep(hashes[k], at)
            self._warm = 0
        clocked = at is not None and self.ttl is not None
        if clocked and self._last_at is not None and at - self._last_at > self.ttl:  # type: ignore[operator]
            self._known = 0  # what the last call left was touched then: all of it may have expired
        j = min(self._known, common // size)
        cold = self._expired(at)
        while j < len(hashes):
            alive = self._alive(hashes[j], at) if clocked else (hashes[j] in self._touched or None)
            if not alive:
                cold = cold or alive is False
                break
            j += 1
        if cap is not None:
            j = min(j, cap // size)
        hit_blocks = min(j, (n - 1) // size) if self.recompute_last and n else j
        hit = hit_blocks * size
        if hit < self.min_tokens:
            hit = 0  # OpenAI reports nothing below 1024 even when a shorter prefix is cached
        if clocked:
            for k in range(j):  # read: their time starts again
                self._keep(hashes[k], at)
        if n >= self.min_tokens:
            for k in range(j, len(hashes)):
                self._keep(hashes[k], at)
            self._known = len(hashes)
        else:
            self._known = j
        self._last_at = at
        self._used(at)
        return CallUsage(n, hit, n - hit, 0, cold)

    def generated(self, chunks: Sequence[Chunk], keys: Sequence[Hashable] | None, at: float | None) -> None:
        self._prefix.update(chunks, keys)
        hashes = self._prefix.hashes
        for k in range(len(hashes)):
            self._keep(hashes[k], at)
        self._known = len(hashes)


class DeepSeekCache(BlockCache):
    """DeepSeek context caching: 64-token units, no minimum, free writes; the answer is cached with
    its prompt (on the swe sessions, 3,866 of 4,506 deepseek-chat calls read exactly the previous
    prompt and answer, whole 64-token units of them)."""

    name = "deepseek"
    block = 64
    caches_output = True


class OpenAICache(BlockCache):
    """OpenAI prompt caching: prompts of 1024+ tokens, hits of 1024 plus 128-token steps."""

    name = "openai"
    block = 128
    min_tokens = 1024


class VLLMCache(BlockCache):
    """vLLM automatic prefix caching: 16-token blocks, last token always recomputed."""

    name = "vllm"
    block = 16
    recompute_last = True


class TokenCache(BlockCache):
    """Idealised prefix caching by the token: a policy's cost without any provider's block rounding."""

    name = "token"
    block = 1


class AnthropicCache(PrefixCache):
    """Anthropic prompt caching: explicit breakpoints, 20-position lookback, writes billed 1.25x."""

    name = "anthropic"
    block = 16  # granularity of the reusable block hashes behind position hashes, not a cache unit

    def __init__(self, lookback: int = 20, min_tokens: int = 1024, ttl: float | None = None) -> None:
        super().__init__(ttl)
        self.lookback = lookback
        self.min_tokens = min_tokens

    def observe(
        self,
        chunks: Sequence[Chunk],
        breakpoints: Sequence[int] | None = None,
        keys: Sequence[Hashable] | None = None,
        at: float | None = None,
        cap: int | None = None,
    ) -> CallUsage:
        prefix = self._prefix
        prefix.update(chunks, keys)
        n = len(prefix.flat)
        marks = sorted(set(breakpoints or ()))
        for bp in marks:
            if not 0 < bp <= n:
                raise UsageError(
                    f"anthropic breakpoint {bp} is outside the prompt (1..{n} tokens); "
                    "pass token positions that end a content block"
                )
        if self._warm:  # a head an earlier session cached ends at a block boundary or breakpoint
            for pos in [*prefix.bounds, *marks]:
                if pos <= self._warm:
                    self._keep(prefix.position_hash(pos), at)
            self._warm = 0
        hit = 0
        cold = self._expired(at)
        read: list[int] = []
        for bp in marks:
            k = bisect_left(prefix.bounds, bp)
            earlier = prefix.bounds[max(0, k - (self.lookback - 1)) : k]
            for pos in [bp, *reversed(earlier)]:
                if pos <= hit:
                    break
                if cap is not None and pos > cap:
                    continue
                h = prefix.position_hash(pos)
                alive = self._alive(h, at)
                if alive:
                    hit = pos
                    read.append(h)
                    break
                cold = cold or alive is False
        for h in read:  # read: its time starts again
            self._keep(h, at)
        top = hit
        for bp in marks:
            if bp > hit and bp >= self.min_tokens:
                self._keep(prefix.position_hash(bp), at)
                top = bp
        self._used(at)
        return CallUsage(n, hit, n - hit, top - hit, cold and hit < n)


_MODELS: dict[str, Callable[[], PrefixCache]] = {
    "anthropic": AnthropicCache,
    "deepseek": DeepSeekCache,
    "openai": OpenAICache,
    "vllm": VLLMCache,
    "token": TokenCache,
}


def make_cache(provider: str, ttl: float | None = None) -> PrefixCache:
    """A fresh (empty) cache model for one session of ``provider``; ``ttl`` in seconds (None: what
    it cached never expires)."""
    factory = _MODELS.get(provider)
    if factory is None:
        raise UsageError(f"unknown cache provider {provider!r}; use one of {', '.join(PROVIDERS)}")
    cache = factory()
    cache.ttl = ttl
    return cache


def default_breakpoints(chunks: Sequence[Chunk], head_chunks: int = 1) -> list[int]:
    """Where Claude Code puts ``cache_control``: after each of the first ``head_chunks`` chunks (the
    head's blocks: tool definitions, system prompt) and on the last message."""
    ends: list[int] = []
    total = 0
    for chunk in chunks:
        total += len(chunk)
        ends.append(total)
    if not ends:
        return []
    marks = {ends[-1]}
    marks.update(end for end in ends[: max(0, head_chunks)] if end > 0)
    return sorted(marks)
