"""Session identity of proxied requests (lightmem_plugin.server.identity)."""

from __future__ import annotations

from typing import Any

import pytest

from lightmem_plugin.server.identity import claude_session, head_id, session_identity

UID = "5f0c7a1e-0000-4000-8000-000000000001"


@pytest.mark.parametrize(
    ("user_id", "expected"),
    [
        (f"user_{'a' * 64}_account_{'b' * 8}-1111-2222-3333-444444444444_session_{UID}", UID),
        (f'{{"device_id":"d1","account_uuid":"a1","session_id":"{UID}"}}', UID),
        ('{"device_id":"d1"}', None),
        ("user_abc", None),
        ("{not json", None),
        (42, None),
    ],
)
def test_claude_code_session_from_metadata(user_id: object, expected: str | None) -> None:
    assert claude_session(user_id) == expected


def _anthropic(system: str, user: str = "fix it", **extra: Any) -> dict[str, Any]:
    return {"system": system, "messages": [{"role": "user", "content": user}], **extra}


@pytest.mark.parametrize(
    ("api", "payload", "headers", "expected"),
    [
        ("anthropic", _anthropic("s", metadata={"user_id": f"x_session_{UID}"}), {}, UID),
        (
            "anthropic",
            _anthropic("s", metadata={"user_id": f"x_session_{UID}"}),
            {"x-lightmem2-session": "h1"},
            "h1",
        ),
        ("responses", {"input": "hi", "prompt_cache_key": "codex-7"}, {}, "codex-7"),
        ("chat", {"messages": [{"role": "user", "content": "hi"}], "prompt_cache_key": "k9"}, {}, "k9"),
        ("chat", {"messages": []}, {"x-lightmem2-session": "h1"}, None),  # nothing to work on
        ("responses", {"model": "m"}, {}, None),
        ("anthropic", {"messages": "oops"}, {}, None),
    ],
)
def test_identity_order(
    api: str, payload: dict[str, Any], headers: dict[str, str], expected: str | None
) -> None:
    assert session_identity(api, payload, headers) == expected


def test_head_hash_ignores_clocks_and_counters_but_not_content() -> None:
    a = _anthropic("You are helpful. Now: Monday 2026-03-02 10:00:01 UTC. Call #17 of session 9f1c2e.")
    b = _anthropic("You are helpful. Now: Tuesday 2026-03-03 11:22:33 UTC. Call #18 of session 0a7d3b.")
    c = _anthropic(
        "You are helpful. Now: Monday 2026-03-02 10:00:01 UTC. Call #17 of session 9f1c2e.", "other task"
    )
    assert head_id("anthropic", a) == head_id("anthropic", b)
    assert head_id("anthropic", a) != head_id("anthropic", c)
    assert str(head_id("anthropic", a)).startswith("head-")


def test_head_hash_reads_each_api_head() -> None:
    chat = {
        "messages": [
            {"role": "system", "content": "S"},
            {"role": "user", "content": [{"type": "text", "text": "U"}]},
        ]
    }
    resp = {
        "instructions": "S",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "U"}]}],
    }
    later = {**chat, "messages": [*chat["messages"], {"role": "assistant", "content": "A"}]}
    assert head_id("chat", chat) == head_id("chat", later)  # later turns do not move the session
    assert head_id("responses", resp) == head_id(
        "responses", {**resp, "input": [*resp["input"], {"role": "user", "content": "more"}]}
    )
    assert str(head_id("responses", resp)).startswith("head-")
    assert head_id("chat", {"messages": [{"role": "user", "content": "X"}]}) != head_id("chat", chat)
