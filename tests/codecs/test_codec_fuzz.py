"""Random and mutated payloads: a codec either refuses with PayloadError or round-trips exactly.

Both halves are the codec contract: nothing but PayloadError may escape ``decode_request`` (the proxy
passes such payloads through untouched), and whatever it accepts must come back JSON-equal.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lightmem_plugin.errors import PayloadError
from lightmem_plugin.wire.anthropic import codec as anthropic
from lightmem_plugin.wire.chat import codec as openai_chat
from lightmem_plugin.wire.responses import codec as openai_responses

PAYLOADS = Path(__file__).parent / "payloads"
CODECS = [
    (anthropic, "anthropic_claude_code.json"),
    (openai_chat, "openai_chat_agent.json"),
    (openai_responses, "openai_responses_codex.json"),
]
IDS = ["anthropic", "openai_chat", "openai_responses"]

# Keys and strings the codecs look at, so random payloads often get deep before they fail.
KEYS = [
    "model", "messages", "input", "instructions", "system", "tools", "role", "content", "type", "text",
    "tool_calls", "tool_call_id", "id", "function", "custom", "name", "arguments", "image_url", "url",
    "detail", "source", "media_type", "data", "tool_use_id", "is_error", "cache_control", "call_id",
    "output", "file_id", "status",
]  # fmt: skip
WORDS = [
    "user", "assistant", "system", "developer", "tool", "function", "text", "image_url", "image",
    "tool_use", "tool_result", "thinking", "base64", "url", "message", "function_call",
    "function_call_output", "custom_tool_call", "custom_tool_call_output", "reasoning", "input_text",
    "output_text", "input_image", "custom", "data:image/png;base64,AAAA", "{}", '{"a":1}', "x",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(WORDS),
    st.text(max_size=8),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=6))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=25,
)


def canon(value: Any) -> str:
    """JSON-equality that tells true from 1 and 1.0 from 1 (Python's == does not)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def check(codec: ModuleType, payload: Any) -> bool:
    """The contract: PayloadError, or an exact round trip. Returns whether it decoded."""
    before = canon(payload)
    try:
        req = codec.decode_request(payload)
    except PayloadError as exc:
        assert "\n" not in str(exc)
        return False
    assert canon(codec.encode_request(req)) == before
    assert canon(payload) == before  # decoding never mutates its input
    return True


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (tuple of keys/indexes) into ``value``, the root included."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, (*prefix, i))
    return out


def mutate(payload: Any, path: tuple[Any, ...], action: str, value: Any) -> Any:
    """Replace, delete, or add a key beside the node at ``path`` in a copy of ``payload``."""
    out = copy.deepcopy(payload)
    if not path:
        return value if action == "replace" else out
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "delete":
        del parent[last]
    elif isinstance(parent, dict):
        parent["zz_unknown_" + str(last)] = value
    else:
        parent.insert(last, value)
    return out


@pytest.mark.parametrize("codec", [c for c, _ in CODECS], ids=IDS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=json_values)
def test_random_json_only_raises_payload_error(codec: ModuleType, payload: Any) -> None:
    check(codec, payload)


@pytest.mark.parametrize("codec", [c for c, _ in CODECS], ids=IDS)
@settings(max_examples=300, deadline=None)
@given(messages=st.lists(json_values, max_size=4), extra=json_values)
def test_random_messages_only_raise_payload_error(codec: ModuleType, messages: Any, extra: Any) -> None:
    key = "input" if codec is openai_responses else "messages"
    check(codec, {"model": "m", key: messages, "zz": extra})


@pytest.mark.parametrize(("codec", "name"), CODECS, ids=IDS)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_real_payloads_round_trip_or_refuse(
    codec: ModuleType, name: str, data: st.DataObject
) -> None:
    payload = json.loads((PAYLOADS / name).read_text(encoding="utf-8"))
    path = data.draw(st.sampled_from(paths(payload)))
    action = data.draw(st.sampled_from(["replace", "delete", "add"]))
    value = data.draw(json_values)
    check(codec, mutate(payload, path, action, value))


@pytest.mark.parametrize(("codec", "name"), CODECS, ids=IDS)
def test_mutations_still_decode_often(codec: ModuleType, name: str) -> None:
    """Unknown keys are fine at every level: adding one to any object keeps the payload readable."""
    payload = json.loads((PAYLOADS / name).read_text(encoding="utf-8"))
    objects = 0
    for path in paths(payload):
        node = payload
        for key in path:
            node = node[key]
        if isinstance(node, dict):
            objects += 1
            assert check(codec, mutate(payload, (*path, "k"), "add", {"unknown": [1, "x"]})), path
    assert objects > 20
