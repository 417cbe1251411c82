"""A scripted multi-turn session whose host puts a clock in the system prompt: through the proxy
(normal mode) the fake provider reports a far higher cache hit rate than when called directly."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from client_view import body_view, stream_view
from fake_wire import Reply
from server_harness import Stack, stack

from lightmem_plugin.config import Config

TURNS = 10
RULES = "".join(
    f"Rule {i}: keep edits small, run the tests, explain each change in one line.\n" for i in range(25)
)
TOOLS_CHAT = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def system(turn: int) -> str:
    return (
        f"You are a coding agent.\nCurrent time: 2026-03-01T10:{turn:02d}:{(turn * 7) % 60:02d}Z\n"
        f"Working directory: /home/alice/proj\n{RULES}"
    )


def tool_output(turn: int) -> str:
    return "".join(f"[{turn}] test_module_{i}.py::test_case PASSED in 0.0{i % 10}s\n" for i in range(70))


class Host:
    """Keeps the conversation the way each host keeps it, and builds each call's body."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.history: list[dict[str, Any]] = []

    def body(self, turn: int, stream: bool) -> dict[str, Any]:
        first = "Fix the failing test in this repository."
        if self.api == "anthropic":
            return {
                "model": "m",
                "max_tokens": 256,
                "stream": stream,
                "system": system(turn),
                "tools": [{"name": "bash", "input_schema": {"type": "object"}}],
                "metadata": {
                    "user_id": '{"device_id":"d1","session_id":"c0ffee00-1111-4222-8333-444455556666"}'
                },
                "messages": [{"role": "user", "content": first}, *self.history],
            }
        if self.api == "chat":
            return {
                "model": "m",
                "stream": stream,
                "stream_options": {"include_usage": True},
                "tools": TOOLS_CHAT,
                "messages": [
                    {"role": "system", "content": system(turn)},
                    {"role": "user", "content": first},
                    *self.history,
                ],
            }
        return {
            "model": "m",
            "stream": stream,
            "instructions": system(turn),
            "prompt_cache_key": "thread-42",
            "tools": [{"type": "function", "name": "bash", "parameters": {"type": "object"}}],
            "input": [{"role": "user", "content": [{"type": "input_text", "text": first}]}, *self.history],
        }

    def append(self, turn: int, text: str, args: str) -> None:
        call, out = f"call_{turn}", tool_output(turn)
        if self.api == "anthropic":
            self.history += [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": text},
                        {"type": "tool_use", "id": call, "name": "bash", "input": json.loads(args)},
                    ],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": out}]},
            ]
        elif self.api == "chat":
            self.history += [
                {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [
                        {"id": call, "type": "function", "function": {"name": "bash", "arguments": args}}
                    ],
                },
                {"role": "tool", "tool_call_id": call, "content": out},
            ]
        else:
            self.history += [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]},
                {"type": "function_call", "call_id": call, "name": "bash", "arguments": args},
                {"type": "function_call_output", "call_id": call, "output": out},
            ]


def host_hit_rate(api: str, usages: list[dict[str, Any]]) -> float:
    """The hit rate as a user computes it from the usage the host received."""
    if api == "anthropic":
        hit = sum(u["cache_read_input_tokens"] for u in usages)
        total = sum(
            u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
            for u in usages
        )
    elif api == "chat":
        hit = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)
        total = sum(u["prompt_tokens"] for u in usages)
    else:
        hit = sum(u["input_tokens_details"]["cached_tokens"] for u in usages)
        total = sum(u["input_tokens"] for u in usages)
    return hit / total


def run_session(s: Stack, api: str, direct: bool) -> tuple[float, float]:
    s.fake.cache.blocks.clear()
    s.fake.reported.clear()
    host, usages = Host(api), []
    for turn in range(TURNS):
        stream = turn % 2 == 1
        s.fake.queue(
            Reply(
                text=f"Running step {turn} in <WORKDIR>." if not direct else f"Running step {turn}.",
                tool_calls=[("bash", json.dumps({"cmd": f"pytest -q tests/{turn}"}))],
            )
        )
        r = httpx.post(s.url(api, direct), json=host.body(turn, stream), timeout=20)
        assert r.status_code == 200, r.text
        v = stream_view(api, r.content) if stream else body_view(api, r.json())
        assert "<WORKDIR>" not in v.text
        usages.append(v.usage)
        host.append(turn, v.text, v.args[0])
    return s.fake.hit_rate(), host_hit_rate(api, usages)


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
def test_proxy_raises_the_real_hit_rate_with_a_clock_in_the_head(api: str) -> None:
    with stack(Config(mode="normal")) as s:
        direct, direct_seen = run_session(s, api, direct=True)
        proxied, proxied_seen = run_session(s, api, direct=False)
        assert len(s.plugin.sessions) == 1  # every turn landed in one session
    assert direct == pytest.approx(direct_seen) and proxied == pytest.approx(proxied_seen)
    print(f"{api}: hit rate direct {direct:.1%} -> through proxy {proxied:.1%}")
    assert direct < 0.15
    assert proxied > 0.6
