"""Chat messages as chunks, and the calibration of the deepseek model against the real swe usage."""

from __future__ import annotations

from pathlib import Path

import pytest

from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.metering.cachesim import make_cache
from lightmem_plugin.metering.chat_tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    REQUEST_OVERHEAD_TOKENS,
    ChatChunker,
    chat_tokens,
    head_chunk,
)
from lightmem_plugin.tokens import TokenCounter

SWE = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces" / "swe"
DATA = Path(__file__).parent / "data"


def fake_encode(text: str) -> list[int]:
    return [ord(c) for c in text]


@pytest.mark.parametrize(
    ("message", "text_tokens"),
    [
        ({"role": "user", "content": "hello"}, 5),
        ({"role": "tool", "content": [{"type": "text", "text": "ab"}, {"type": "text", "text": "c"}]}, 3),
        (
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "bash", "arguments": '{"command":"ls"}'}}],
            },
            4 + 16,
        ),
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_7", "function": {"name": "bash", "arguments": "{}"}}],
            },
            6 + 4 + 2,  # the id is sent and read like any text
        ),
        ({"role": "tool", "tool_call_id": "call_7", "content": "ok"}, 6 + 2),
        ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:x"}}]}, 1),
        ({"role": "assistant", "content": None}, 0),
    ],
)
def test_chat_tokens_counts_text_plus_overhead(message: dict[str, object], text_tokens: int) -> None:
    ids = chat_tokens(message, fake_encode)
    assert len(ids) == MESSAGE_OVERHEAD_TOKENS + text_tokens
    assert all(i < 0 for i in ids[:MESSAGE_OVERHEAD_TOKENS])


def test_roles_and_images_stay_distinct() -> None:
    user = chat_tokens({"role": "user", "content": "same"}, fake_encode)
    tool = chat_tokens({"role": "tool", "content": "same"}, fake_encode)
    assert user != tool
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:a"}}]}
    other = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:b"}}]}
    assert chat_tokens(image, fake_encode) != chat_tokens(other, fake_encode)
    assert chat_tokens(image, fake_encode) == chat_tokens(dict(image), fake_encode)


def test_chunker_memoises_per_message_object() -> None:
    chunker = ChatChunker(fake_encode, overhead=2, head=3)
    first = {"role": "user", "content": "x"}
    chunks = chunker.chunks([first])
    assert chunks[0] == head_chunk(3)
    assert chunker.chunks([first, {"role": "tool", "content": "y"}])[1] is chunks[1]
    assert ChatChunker(fake_encode, head=0).chunks([first])[0][-1] == ord("x")


def test_replay_of_a_small_real_session() -> None:
    """The shipped swe session replays with a hit rate close to what DeepSeek reported."""
    trace = load_trace(DATA / "deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz")
    chunker = ChatChunker(TokenCounter().encode)
    cache = make_cache("deepseek")
    hit = total = rec_hit = rec_total = 0
    for call in trace.calls:
        usage = cache.observe(chunker.chunks(call.prompt))
        hit, total = hit + usage.hit_tokens, total + usage.input_tokens
        rec_hit, rec_total = rec_hit + call.cached_tokens, rec_total + call.prompt_tokens
    assert abs(hit / total - rec_hit / rec_total) < 0.03
    assert abs(total / rec_total - 1) < 0.10  # a reasoner session: reasoning re-sent, not recorded


@pytest.mark.skipif(not SWE.is_dir(), reason="needs ../shared/traces/swe")
def test_calibration_on_all_swe_sessions() -> None:
    """Vanilla replay through the deepseek model matches the recorded usage (targets: 2 points, 3%).

    Measured: recorded hit rate 98.22%, simulated 97.77%; prompt tokens +0.06% (4655 calls), counting call ids.
    """
    encode = TokenCounter().encode
    hit = total = rec_hit = rec_total = 0
    for path in sorted(SWE.glob("*.json.gz")):
        trace = load_trace(path)
        chunker = ChatChunker(encode, MESSAGE_OVERHEAD_TOKENS, REQUEST_OVERHEAD_TOKENS)
        cache = make_cache("deepseek")
        for call in trace.calls:
            usage = cache.observe(chunker.chunks(call.prompt))
            hit, total = hit + usage.hit_tokens, total + usage.input_tokens
            rec_hit, rec_total = rec_hit + call.cached_tokens, rec_total + call.prompt_tokens
    assert rec_total > 50_000_000
    assert abs(hit / total - rec_hit / rec_total) < 0.02
    assert abs(total / rec_total - 1) < 0.03
