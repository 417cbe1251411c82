"""The fake provider itself: its prefix cache and its usage reports must behave like the real ones."""

from __future__ import annotations

import httpx
import pytest
from fake_upstream import BLOCK_TOKENS, CHARS_PER_TOKEN, FakeUpstream, PrefixCache, render
from server_harness import ServerThread

BLOCK_CHARS = BLOCK_TOKENS * CHARS_PER_TOKEN


@pytest.mark.parametrize("change_at", [0, 1, 63, 64, 65, 500, 1023])
def test_prefix_cache_hits_up_to_the_first_changed_block(change_at: int) -> None:
    cache = PrefixCache()
    text = "".join(chr(65 + i % 26) for i in range(1024))
    assert cache.observe(text) == (256, 0, 256)
    changed = text[:change_at] + "#" + text[change_at + 1 :]
    tokens, hit, written = cache.observe(changed)
    assert tokens == 256
    assert hit == (change_at // BLOCK_CHARS) * BLOCK_TOKENS
    assert written == 256 - hit
    assert cache.observe(text + "tail") == (257, 256, 0)


def test_render_ignores_cache_control_marks() -> None:
    a = {"system": [{"type": "text", "text": "S"}], "messages": [{"role": "user", "content": "hi"}]}
    b = {
        "system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
        "messages": a["messages"],
    }
    assert render("anthropic", a) == render("anthropic", b)


def test_anthropic_string_content_is_the_text_block_it_stands_for() -> None:
    """OpenClaw sends a message as a marked text block on one turn and as a string on the next; Anthropic
    reads both as the same prompt, and so must the fake (it reported a miss there)."""
    block = {
        "role": "user",
        "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
    }
    plain = {"role": "user", "content": "hi"}
    as_blocks = {"system": [{"type": "text", "text": "be brief"}], "messages": [block]}
    as_strings = {"system": "be brief", "messages": [plain]}
    assert render("anthropic", as_blocks) == render("anthropic", as_strings)
    assert render("anthropic", as_blocks) != render(
        "anthropic", {"system": "be brief", "messages": [{"role": "user", "content": "ho"}]}
    )


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
def test_usage_fields_like_the_real_apis(api: str) -> None:
    fake = FakeUpstream()
    body = {
        "anthropic": {"system": "x" * 400, "messages": [{"role": "user", "content": "hi"}]},
        "chat": {"messages": [{"role": "system", "content": "x" * 400}, {"role": "user", "content": "hi"}]},
        "responses": {"instructions": "x" * 400, "input": "hi"},
    }[api]
    path = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}[api]
    with ServerThread(fake.app) as up:
        first = httpx.post(up.url + path, json=body).json()["usage"]
        second = httpx.post(up.url + path, json=body).json()["usage"]
    prompt = fake.reported[0]["prompt"]
    if api == "anthropic":
        assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] > 0
        assert (
            sum(second[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
            == prompt
        )
        assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    elif api == "chat":
        assert first["prompt_tokens_details"]["cached_tokens"] == 0
        assert second["prompt_tokens"] == prompt and second["prompt_tokens_details"]["cached_tokens"] > 0
    else:
        assert first["input_tokens_details"]["cached_tokens"] == 0
        assert second["input_tokens"] == prompt and second["input_tokens_details"]["cached_tokens"] > 0
    assert fake.hit_rate(1) > 0.8
