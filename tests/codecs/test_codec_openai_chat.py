"""OpenAI Chat codec: agent-loop requests (tool calls, tool results, images) round-trip exactly."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.errors import PayloadError
from lightmem_plugin.model import (
    ImagePart,
    Message,
    OpaquePart,
    Request,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from lightmem_plugin.wire.chat import codec as openai_chat
from lightmem_plugin.wire.chat.codec import chat_to_message, message_to_chat

AGENT: dict[str, Any] = json.loads(
    (Path(__file__).parent / "payloads" / "openai_chat_agent.json").read_text(encoding="utf-8")
)


def canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


SMALL = [
    {"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hello!"}]},
    {"model": "m", "messages": [], "tools": []},
    {
        "model": "m",
        "messages": [{"role": "assistant"}, {"role": "assistant", "content": None, "tool_calls": None}],
    },
    {"model": "m", "messages": [{"role": "tool", "tool_call_id": "c", "content": None}]},
    {"model": "m", "messages": [{"role": "tool", "tool_call_id": "c", "content": []}]},
    {"model": "m", "messages": [{"role": "user", "content": [], "tool_calls": [1]}]},  # unknown field on user
]


@pytest.mark.parametrize("payload", [AGENT, *SMALL], ids=["agent", *map(str, range(len(SMALL)))])
def test_round_trip_is_exact(payload: dict[str, Any]) -> None:
    before = canon(payload)
    assert canon(openai_chat.encode_request(openai_chat.decode_request(payload))) == before
    assert canon(payload) == before


def test_agent_request_maps_to_neutral_parts() -> None:
    req = openai_chat.decode_request(AGENT)
    roles = "system developer user assistant tool tool assistant tool tool assistant user"
    assert [m.role for m in req.messages] == roles.split()
    user = req.messages[2]
    assert user.extra == {"name": "alice"}
    text, web, inline, audio = user.parts
    assert isinstance(text, TextPart) and text.text.startswith("<pr_description>")
    assert isinstance(web, ImagePart) and web.url and web.data is None
    assert web.extra == {"image_url": {"detail": "high"}}
    assert isinstance(inline, ImagePart) and inline.media_type == "image/jpeg"
    assert inline.data == "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBD" and inline.url is None
    assert isinstance(audio, OpaquePart) and audio.raw["type"] == "input_audio"
    first, second = req.messages[3].parts
    assert isinstance(first, ToolCallPart) and first.id == "call_00_kH2N9aQ"
    assert first.arguments == '{"command": "cd /testbed && grep -rn \'def lambdify\' sympy/ | head"}'
    assert isinstance(second, ToolCallPart) and second.extra == {"type": "function", "index": 1}
    (result,) = req.messages[4].parts
    assert isinstance(result, ToolResultPart) and result.tool_call_id == first.id
    assert result.content == [TextPart(AGENT["messages"][4]["content"])]
    patch = req.messages[6].parts[1]
    assert isinstance(patch, ToolCallPart) and patch.name == "apply_patch"
    assert patch.arguments.startswith("*** Begin Patch")
    assert req.messages[6].extra == {"reasoning_content": "The Max printer is missing."}
    assert isinstance(req.messages[8].parts[0], OpaquePart)  # legacy role "function"
    assert req.tools == AGENT["tools"]
    assert set(req.extra) == {
        "model",
        "temperature",
        "stream",
        "stream_options",
        "parallel_tool_calls",
        "tool_choice",
    }


@pytest.mark.parametrize(
    ("message", "expected"),
    [(4, "short"), (5, [{"type": "text", "text": "short"}]), (7, "short")],
)
def test_editing_one_tool_result_changes_exactly_that_message(message: int, expected: Any) -> None:
    req = openai_chat.decode_request(AGENT)
    result = req.messages[message].parts[0]
    assert isinstance(result, ToolResultPart)
    result.content = [TextPart("short")]
    want = copy.deepcopy(AGENT)
    want["messages"][message]["content"] = expected
    assert canon(openai_chat.encode_request(req)) == canon(want)


@pytest.mark.parametrize("index", range(len(AGENT["messages"])))
def test_single_messages_round_trip(index: int) -> None:
    d = AGENT["messages"][index]
    assert canon(message_to_chat(chat_to_message(d))) == canon(d)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            Message("tool", [ToolResultPart("call_1", [TextPart("out")])]),
            {"role": "tool", "tool_call_id": "call_1", "content": "out"},
        ),
        (
            Message("assistant", [ToolCallPart("call_1", "bash", '{"command":"ls"}')]),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "type": "function",
                        "id": "call_1",
                        "function": {"name": "bash", "arguments": '{"command":"ls"}'},
                    }
                ],
            },
        ),
        (
            Message("user", [TextPart("see"), ImagePart(media_type="image/png", data="AAAA")]),
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            },
        ),
        (Message("system", [TextPart("a"), TextPart("b")]), {"role": "system", "content": "ab"}),
    ],
)
def test_messages_built_by_the_pipeline_encode_to_valid_chat(
    message: Message, expected: dict[str, Any]
) -> None:
    assert message_to_chat(message) == expected


BAD = [
    ("x", "the payload", "a JSON object"),
    ({"model": "m"}, "messages", "the key is missing"),
    ({"messages": {"role": "user"}}, "messages", "a list of message objects"),
    ({"messages": [3]}, "messages[0]", "a message object"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", "one of system, developer"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id", "the id of the tool call"),
    (
        {"messages": [{"role": "tool", "tool_call_id": 5, "content": "x"}]},
        "messages[0].tool_call_id",
        "got 5",
    ),
    ({"messages": [{"role": "user", "content": {"text": "x"}}]}, "messages[0].content", "a string, a list"),
    (
        {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
        "messages[0].content[0].text",
        "a string",
    ),
    (
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "http://x"}]}]},
        "messages[0].content[0].image_url",
        "an object with a url",
    ),
    (
        {"messages": [{"role": "assistant", "tool_calls": {}}]},
        "messages[0].tool_calls",
        "a list of tool call",
    ),
    (
        {"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "web"}]}]},
        "messages[0].tool_calls[0].type",
        '"function" or "custom"',
    ),
    (
        {
            "messages": [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}
                    ],
                }
            ]
        },
        "messages[0].tool_calls[0].function.arguments",
        "JSON text",
    ),
    ({"messages": [], "tools": "bash"}, "tools", "a list of tool definition objects"),
]


@pytest.mark.parametrize(("payload", "path", "detail"), BAD)
def test_bad_payloads_raise_one_line_payload_errors(payload: Any, path: str, detail: str) -> None:
    with pytest.raises(PayloadError) as info:
        openai_chat.decode_request(payload)
    text = str(info.value)
    assert text.startswith("OpenAI Chat request: ") and "\n" not in text
    assert f"{path}: got" in text and detail in text and "expected" in text


def test_chat_to_message_names_its_path() -> None:
    with pytest.raises(
        PayloadError, match=r"^message\.role: got nothing \(the key is missing\), expected one of"
    ):
        chat_to_message({"content": "hi"})


@pytest.mark.parametrize(
    "message",
    [
        Message("tool", [ToolResultPart("a", []), ToolResultPart("b", [])]),
        Message("tool", [TextPart("x")]),
        Message("user", [ToolResultPart("a", [])]),
        Message("user", [ImagePart()]),
    ],
)
def test_messages_chat_cannot_express_raise_payload_errors(message: Message) -> None:
    with pytest.raises(PayloadError, match=r"^OpenAI Chat request: messages\[0\]"):
        openai_chat.encode_request(Request(messages=[message]))
