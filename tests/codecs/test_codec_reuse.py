"""A session's codec Reuse: a proxy decodes and encodes only what changed, with the very same results."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from lightmem_plugin import wire
from lightmem_plugin.codecs._common import Reuse
from lightmem_plugin.model import Message


def _anthropic(turns: int) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "fix the test"}]
    for i in range(turns):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"step {i}"},
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": f"ls {i}"}},
                ],
            }
        )
        msgs.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"out {i}"}],
            }
        )
    return {"model": "m", "system": [{"type": "text", "text": "be brief"}], "messages": msgs, "max_tokens": 9}


def _chat(turns: int) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "go"},
    ]
    for i in range(turns):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "sh", "arguments": json.dumps({"n": i})},
        }
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"out {i}"},
        ]
    return {"model": "m", "messages": msgs}


def _responses(turns: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "input_text", "text": "go"}]}]
    for i in range(turns):
        items += [
            {"type": "function_call", "call_id": f"c{i}", "name": "sh", "arguments": json.dumps({"n": i})},
            {"type": "function_call_output", "call_id": f"c{i}", "output": f"out {i}"},
        ]
    return {"model": "m", "instructions": "be brief", "input": items}


BUILD = {
    "anthropic": (_anthropic, "messages"),
    "chat": (_chat, "messages"),
    "responses": (_responses, "input"),
}


@pytest.mark.parametrize("api", sorted(BUILD))
def test_a_growing_conversation_decodes_and_encodes_as_without_reuse(api: str) -> None:
    build, key = BUILD[api]
    codec, reuse = wire.get(api), Reuse()
    last: list[Message] = []
    for turns in range(4):
        payload = json.loads(json.dumps(build(turns)))  # a fresh parse each call, as the proxy's
        req = codec.decode(payload, reuse)
        assert req == codec.decode(copy.deepcopy(payload))
        same = [new is old for new, old in zip(req.messages, last, strict=False)]
        assert len(same) == len(last) and all(same[1:]), same  # unchanged items: last call's objects
        last = req.messages
        assert codec.encode(req, reuse) == payload == codec.encode(req)
    items = copy.deepcopy(payload[key])
    items[1] = {**items[1], "extra_field": 1} if api != "anthropic" else {**items[1], "content": "edited"}
    edited = {**payload, key: items}
    req = codec.decode(edited, reuse)
    assert req == codec.decode(copy.deepcopy(edited)) and req.messages[-1] is last[-1]
    assert codec.encode(req, reuse) == codec.encode(req) == edited
    shorter = {**payload, key: copy.deepcopy(payload[key][:2])}  # a host that compacted
    req = codec.decode(shorter, reuse)
    assert codec.encode(req, reuse) == shorter == codec.encode(req)


def test_a_changed_message_object_is_encoded_again() -> None:
    codec, reuse = wire.get("chat"), Reuse()
    req = codec.decode(_chat(1), reuse)
    first = codec.encode(req, reuse)
    other = _chat(1)
    other["messages"][-1]["content"] = "shorter"
    req.messages[-1] = codec.decode(other).messages[-1]  # what a pass made of it: another object
    again = codec.encode(req, reuse)
    assert again["messages"][-1]["content"] == "shorter" and again["messages"][:-1] == first["messages"][:-1]


def test_an_api_switch_never_hands_on_another_codecs_decoding() -> None:
    reuse = Reuse()
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    a = wire.get("anthropic").decode(body, reuse)
    c = wire.get("chat").decode(copy.deepcopy(body), reuse)
    assert a.messages[0] is not c.messages[0]
