"""Provider prefix-cache models: exact figures on small sessions, a brute-force reference, speed."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin.errors import UsageError
from lightmem_plugin.metering.cachesim import (
    PROVIDERS,
    AnthropicCache,
    CallUsage,
    default_breakpoints,
    k_cost,
    make_cache,
)


def toks(n: int, start: int = 0) -> list[int]:
    return list(range(start, start + n))


@pytest.mark.parametrize(
    ("provider", "first", "second"),
    [
        # prompt 1: 1528 tokens; prompt 2: prompt 1 + 325 tokens (a real swe call pair)
        ("deepseek", CallUsage(1528, 0, 1528), CallUsage(1853, 1472, 381)),
        ("openai", CallUsage(1528, 0, 1528), CallUsage(1853, 1408, 445)),
        ("vllm", CallUsage(1528, 0, 1528), CallUsage(1853, 1520, 333)),
        ("token", CallUsage(1528, 0, 1528), CallUsage(1853, 1528, 325)),
    ],
)
def test_append_only_second_call_hits_whole_blocks(
    provider: str, first: CallUsage, second: CallUsage
) -> None:
    cache = make_cache(provider)
    head = toks(1528)
    assert cache.observe([head]) == first
    assert cache.observe([head, toks(325, 5000)]) == second


@pytest.mark.parametrize(
    ("provider", "expected_hit"),
    [("deepseek", 1280), ("openai", 1280), ("vllm", 1264)],
)
def test_full_repeat(provider: str, expected_hit: int) -> None:
    """The same 1280-token prompt twice; vLLM recomputes the last token, so it stops a block short."""
    cache = make_cache(provider)
    prompt = [toks(1280)]
    cache.observe(prompt)
    assert cache.observe(prompt).hit_tokens == expected_hit


def test_openai_ignores_short_prompts_and_short_hits() -> None:
    cache = make_cache("openai")
    short = toks(1000)
    cache.observe([short])
    assert cache.observe([short, toks(100, 9000)]).hit_tokens == 0  # 1000 tokens were never cached
    cache.observe([toks(1100, 50_000)])  # caches 8 blocks = 1024 tokens of this other prompt
    diverge_early = [toks(600, 50_000), toks(600, 90_000)]
    assert cache.observe(diverge_early).hit_tokens == 0  # 512 cached tokens match: below 1024, no hit


def test_change_in_the_middle_misses_everything_after() -> None:
    cache = make_cache("deepseek")
    a, b, c = toks(640), toks(640, 1000), toks(640, 2000)
    cache.observe([a, b, c])
    changed = [a, [*b[:-1], 99_999], c]
    usage = cache.observe(changed)
    assert usage.hit_tokens == 640 + 576  # a, then b's blocks up to the one that changed
    assert usage.miss_tokens == 1920 - 1216


def test_keys_replace_comparison() -> None:
    cache = make_cache("deepseek")
    cache.observe([toks(128), toks(128, 500)], keys=["a", "b"])
    # Same keys: the model trusts them and reuses the first chunk's hashes.
    assert cache.observe([toks(128), toks(128, 500)], keys=["a", "b"]).hit_tokens == 256
    with pytest.raises(UsageError, match="2 keys for 1 chunks"):
        cache.observe([toks(10)], keys=["a", "b"])


def test_anthropic_caches_only_at_breakpoints_and_bills_writes() -> None:
    cache = AnthropicCache()
    system, m1, m2 = toks(2000), toks(300, 10_000), toks(300, 20_000)
    assert cache.observe([system, m1]) == CallUsage(2300, 0, 2300, 0)  # no breakpoint: nothing cached
    assert cache.observe([system, m1], [2300]) == CallUsage(2300, 0, 2300, 2300)
    assert cache.observe([system, m1, m2], [2600]) == CallUsage(2600, 2300, 300, 300)
    assert cache.observe([system, m1, m2], [2600]) == CallUsage(2600, 2600, 0, 0)


def test_anthropic_lookback_is_twenty_positions() -> None:
    cache = AnthropicCache()
    head = toks(1200)
    cache.observe([head], [1200])
    small = [toks(5, 100_000 + 10 * i) for i in range(25)]
    # breakpoint at the end: 19 earlier boundaries are checked, the head is 25 back: miss.
    far = cache.observe([head, *small], [1200 + 125])
    assert far.hit_tokens == 0
    near = AnthropicCache()
    near.observe([head], [1200])
    assert near.observe([head, *small[:19]], [1200 + 95]).hit_tokens == 1200


def test_anthropic_minimum_and_bad_breakpoint() -> None:
    cache = AnthropicCache(min_tokens=1024)
    assert cache.observe([toks(500)], [500]).write_tokens == 0
    assert cache.observe([toks(500)], [500]).hit_tokens == 0
    with pytest.raises(UsageError, match="outside the prompt"):
        cache.observe([toks(500)], [501])


def test_default_breakpoints() -> None:
    assert default_breakpoints([toks(10), toks(5), toks(7)]) == [10, 22]
    assert default_breakpoints([toks(10)]) == [10]
    assert default_breakpoints([]) == []
    # a head sent in two blocks (the tool definitions, then the system prompt): a breakpoint after each
    assert default_breakpoints([toks(10), toks(5), toks(7)], head_chunks=2) == [10, 15, 22]


@pytest.mark.parametrize(
    ("hit", "miss", "write", "expected"),
    [(1000, 200, 0, 300.0), (0, 500, 0, 500.0), (1000, 200, 100, 100 + 125 + 100), (0, 0, 0, 0.0)],
)
def test_k_cost(hit: int, miss: int, write: int, expected: float) -> None:
    assert k_cost(hit, miss, write) == pytest.approx(expected)


def test_unknown_provider() -> None:
    with pytest.raises(UsageError, match="unknown cache provider 'gemini'; use one of anthropic"):
        make_cache("gemini")


class Reference:
    """Brute force: the cache is a set of token-tuple prefixes."""

    def __init__(self, provider: str) -> None:
        self.block = {"deepseek": 64, "openai": 128, "vllm": 16, "token": 1}[provider]
        self.minimum = 1024 if provider == "openai" else 0
        self.last = provider == "vllm"
        self.cached: set[tuple[int, ...]] = set()

    def observe(self, prompt: list[int]) -> int:
        n, size = len(prompt), self.block
        k = 0
        while (k + 1) * size <= n and tuple(prompt[: (k + 1) * size]) in self.cached:
            k += 1
        if self.last and n:
            k = min(k, (n - 1) // size)
        if n >= self.minimum:
            self.cached.update(tuple(prompt[: j * size]) for j in range(1, n // size + 1))
        hit = k * size
        return hit if hit >= self.minimum else 0


edits = st.lists(
    st.tuples(
        st.sampled_from(["append", "edit", "truncate"]),
        st.integers(0, 10_000),
        st.integers(1, 400),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(provider=st.sampled_from(["deepseek", "openai", "vllm", "token"]), steps=edits)
def test_block_models_match_brute_force(provider: str, steps: list[tuple[str, int, int]]) -> None:
    """Incremental hashing with chunk reuse gives the same hits as comparing whole prefixes."""
    cache, ref = make_cache(provider), Reference(provider)
    chunks: list[list[int]] = [toks(700)]
    for kind, where, size in steps:
        if kind == "append":
            chunks = [*chunks, toks(size, 10_000 + where)]
        elif kind == "edit":
            i = where % len(chunks)
            chunks = [*chunks[:i], [*chunks[i][:-1], -where - 1], *chunks[i + 1 :]]
        elif len(chunks) > 1:
            chunks = chunks[: 1 + where % (len(chunks) - 1)]
        flat = [t for c in chunks for t in c]
        usage = cache.observe(chunks)
        assert usage.hit_tokens == ref.observe(flat)
        assert usage.input_tokens == len(flat) == usage.hit_tokens + usage.miss_tokens


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 300), min_size=2, max_size=30))
def test_anthropic_append_only_with_last_breakpoint(sizes: list[int]) -> None:
    """Each call reads what the previous call wrote, when it is within the 20-position window."""
    cache = AnthropicCache(min_tokens=0)
    chunks: list[list[int]] = []
    for step, size in enumerate(sizes):
        chunks.append(toks(size, 1000 * step))
        end = sum(map(len, chunks))
        usage = cache.observe(chunks, [end])
        previous = end - size
        assert usage.hit_tokens == previous
        assert usage.write_tokens == size == usage.miss_tokens


@pytest.mark.parametrize("provider", PROVIDERS)
def test_long_session_is_fast(provider: str) -> None:
    """190 calls growing to ~200k tokens: incremental work keeps the whole session well under 1 s."""
    messages = [toks(300 + (i * 37) % 700, i * 1000) for i in range(380)]
    cache = make_cache(provider)
    start = time.perf_counter()
    for k in range(1, 191):
        chunks = messages[: 2 * k]
        usage = cache.observe(chunks, default_breakpoints(chunks))
    elapsed = time.perf_counter() - start
    assert usage.hit_rate > 0.99
    assert elapsed < 1.0, f"{provider}: {elapsed:.2f}s"
