"""On a Claude model that binds each thinking block to its prefix, every request lightmem2 sends asks the
API to drop, not reject, a block whose earlier history changed (wire/anthropic/binding.py): over real
loopback HTTP, what the fake provider received, call after call, and nothing on other models."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from server_harness import stack

from lightmem_plugin.config import Config
from lightmem_plugin.server.proxy import with_token
from lightmem_plugin.wire.anthropic import binding

AUTH = {"x-api-key": "sk-ant-secret", "anthropic-version": "2023-06-01", "anthropic-beta": "x-2025,y-2026"}
SIGNED = {"type": "thinking", "thinking": "The listing shows a.py; read it next.", "signature": "c2lnbmVk"}


def _body(model: str, turns: int, thinking: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Claude Code-shaped session after ``turns`` tool calls, each answer thinking first."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the parser."}]
    for k in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    SIGNED,
                    {
                        "type": "tool_use",
                        "id": f"toolu_{k:03d}",
                        "name": "Bash",
                        "input": {"command": f"cat f{k}.py"},
                    },
                ],
            }
        )
        out = "".join(f"def f{k}_{i}(x):\n    return x + {i}\n" for i in range(200))
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{k:03d}", "content": out}],
            }
        )
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": 100,
        "metadata": {"user_id": '{"session_id":"5f0c7a1e-0000-4000-8000-00000000b1nd"}'},
        "messages": messages,
    }
    if thinking is not None:
        body["thinking"] = thinking
    return body


@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-fable-5-1", "claude-sonnet-5-5-20261001"])
def test_a_binding_model_gets_drop_block_and_the_beta_on_every_call(model: str) -> None:
    with stack() as s:
        for turns in (1, 2, 3):
            r = httpx.post(s.url("anthropic"), json=_body(model, turns), headers=AUTH, timeout=10)
            assert r.status_code == 200, r.text
        got = s.fake.received[-3:]
        for req in got:
            assert req.body["thinking"] == {
                "type": "adaptive",
                "block_binding": {"prefix_mismatch_behavior": "drop_block"},
            }
            assert req.headers["anthropic-beta"] == "x-2025,y-2026," + binding.BETA  # the host's betas kept
            assert req.headers["x-api-key"] == "sk-ant-secret"
        # the parameter is the same bytes on every call: it never breaks the cache itself
        assert len({json.dumps(req.body["thinking"], sort_keys=True) for req in got}) == 1
        # the thinking blocks the host sent go out as they came (the API decides which fail)
        assert all(m["content"][0] == SIGNED for m in got[-1].body["messages"] if m["role"] == "assistant")


def test_the_host_s_own_thinking_setting_is_kept_and_extended() -> None:
    own = {"type": "enabled", "budget_tokens": 4000}
    with stack() as s:
        httpx.post(s.url("anthropic"), json=_body("claude-opus-5-5", 1, own), headers=AUTH, timeout=10)
        sent = s.fake.received[-1].body["thinking"]
    assert sent == {**own, "block_binding": {"prefix_mismatch_behavior": "drop_block"}}


@pytest.mark.parametrize(
    "model", ["claude-opus-4-5-20251101", "claude-sonnet-4-20250514", "claude-opus-5", "m"]
)
def test_other_models_get_neither(model: str) -> None:
    with stack() as s:
        httpx.post(s.url("anthropic"), json=_body(model, 2), headers=AUTH, timeout=10)
        req = s.fake.received[-1]
    assert "thinking" not in req.body and req.headers["anthropic-beta"] == "x-2025,y-2026"


@pytest.mark.parametrize(
    ("setting", "model", "bound"), [("always", "m", True), ("never", "claude-opus-5-5", False)]
)
def test_the_setting_overrides_the_model_list(setting: str, model: str, bound: bool) -> None:
    cfg = Config.model_validate({"stabilizer": {"thinkingBinding": setting}})
    with stack(cfg) as s:
        httpx.post(s.url("anthropic"), json=_body(model, 2), headers=AUTH, timeout=10)
        req = s.fake.received[-1]
    assert ("thinking" in req.body) is bound
    assert (binding.BETA in req.headers["anthropic-beta"]) is bound


def test_the_pieces() -> None:
    assert binding.wanted("auto", "anthropic/claude-mythos-5-2") and not binding.wanted("auto", None)
    assert binding.binds_thinking("claude-opus-6") and not binding.binds_thinking("claude-haiku-4-5")
    assert binding.allow_drop({"thinking": {"type": "disabled"}}) == {"thinking": {"type": "disabled"}}
    kept = binding.allow_drop({"thinking": {"type": "adaptive", "block_binding": {"other": 1}}})
    assert kept["thinking"]["block_binding"] == {"other": 1, "prefix_mismatch_behavior": "drop_block"}
    # the beta joins the host's comma-separated betas, once, after them
    host = [("x-api-key", "k"), ("Anthropic-Beta", f"a, {binding.BETA}")]
    assert with_token(host, "anthropic-beta", binding.BETA) == [
        ("x-api-key", "k"),
        ("anthropic-beta", f"a,{binding.BETA}"),
    ]
    assert with_token([("x-api-key", "k")], "anthropic-beta", binding.BETA)[-1] == (
        "anthropic-beta",
        binding.BETA,
    )
