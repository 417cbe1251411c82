"""Anthropic Messages codec: Claude Code shaped requests decode to the neutral model and back exactly."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.errors import PayloadError
from lightmem_plugin.model import ImagePart, Message, OpaquePart, TextPart, ToolCallPart, ToolResultPart
from lightmem_plugin.wire.anthropic import codec as anthropic

CLAUDE_CODE: dict[str, Any] = json.loads(
    (Path(__file__).parent / "payloads" / "anthropic_claude_code.json").read_text(encoding="utf-8")
)


def canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def msg(role: str, content: Any) -> dict[str, Any]:
    return {"role": role, "content": content}


SMALL = [
    {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [msg("user", "Hello, Claude")]},
    {"model": "m", "max_tokens": 8, "system": "You are terse.", "messages": [msg("user", [])]},
    {"model": "m", "system": [], "messages": [], "tools": []},
    {"model": "m", "messages": [msg("assistant", ""), msg("system", [{"type": "text", "text": "x"}])]},
    {
        "model": "m",
        "messages": [
            msg(
                "assistant",
                [{"type": "tool_use", "id": "t1", "name": "f", "input": {"b": [1, 2.0], "a": None}}],
            ),
            msg("user", [{"type": "tool_result", "tool_use_id": "t1", "content": [], "is_error": False}]),
        ],
    },
]


@pytest.mark.parametrize("payload", [CLAUDE_CODE, *SMALL], ids=["claude_code", *map(str, range(len(SMALL)))])
def test_round_trip_is_exact(payload: dict[str, Any]) -> None:
    before = canon(payload)
    assert canon(anthropic.encode_request(anthropic.decode_request(payload))) == before
    assert canon(payload) == before


def test_claude_code_request_maps_to_neutral_parts() -> None:
    req = anthropic.decode_request(CLAUDE_CODE)
    system = req.messages[0]
    assert system.role == "system" and system.hints["system_field"] is True
    assert [p.extra for p in system.parts] == [
        {"cache_control": {"type": "ephemeral"}},
        {"cache_control": {"type": "ephemeral", "ttl": "1h"}},
    ]
    image = req.messages[1].parts[2]
    assert isinstance(image, ImagePart) and image.media_type == "image/png" and image.data
    thinking, text, call = req.messages[2].parts
    assert isinstance(thinking, OpaquePart) and thinking.raw["signature"].startswith("EqQB")
    assert isinstance(text, TextPart) and text.text == "I'll run the failing test first."
    assert isinstance(call, ToolCallPart) and call.name == "Bash"
    assert call.arguments == (
        '{"command":"pytest tests/test_api.py -q","description":"Run the API tests","timeout":120000}'
    )
    assert call.extra["caller"] == {"type": "direct"}
    result_msg = req.messages[3]
    (result,) = result_msg.parts
    assert result_msg.role == "user" and isinstance(result, ToolResultPart)
    assert result.tool_call_id == call.id and result.is_error is True
    assert result.text().endswith("1 failed, 1 passed in 0.12s")
    grep = req.messages[4].parts[2]
    assert isinstance(grep, ToolCallPart) and "café" in grep.arguments  # ensure_ascii=False
    listed = req.messages[5].parts[1]
    assert isinstance(listed, ToolResultPart) and listed.extra == {"cache_control": {"type": "ephemeral"}}
    assert (
        isinstance(listed.content[1], ImagePart)
        and listed.content[1].url == "https://example.com/diagram.png"
    )
    inline_system = req.messages[6]
    assert inline_system.role == "system" and "system_field" not in inline_system.hints
    assert isinstance(req.messages[7].parts[1], OpaquePart)  # server_tool_use
    assert req.tools[-1]["cache_control"] == {"type": "ephemeral"}
    assert set(req.extra) == {"model", "max_tokens", "stream", "temperature", "metadata", "thinking",
                              "context_management", "tool_choice"}  # fmt: skip


def result_parts(req: Any) -> list[ToolResultPart]:
    return [p for m in req.messages for p in m.parts if isinstance(p, ToolResultPart)]


@pytest.mark.parametrize(
    ("index", "message", "block", "expected"),
    [
        (0, 2, 0, "short"),  # string content stays a string
        (1, 4, 0, [{"type": "text", "text": "short"}]),  # list content stays a list
        (3, 7, 0, [{"type": "text", "text": "short"}]),  # absent content: new parts need a list
    ],
)
def test_editing_one_tool_result_changes_exactly_that_block(
    index: int, message: int, block: int, expected: Any
) -> None:
    req = anthropic.decode_request(CLAUDE_CODE)
    result_parts(req)[index].content = [TextPart("short")]
    want = copy.deepcopy(CLAUDE_CODE)
    want["messages"][message]["content"][block]["content"] = expected
    assert canon(anthropic.encode_request(req)) == canon(want)


def test_tool_use_input_is_restored_or_reparsed() -> None:
    req = anthropic.decode_request(CLAUDE_CODE)
    calls = [p for m in req.messages for p in m.parts if isinstance(p, ToolCallPart)]
    out = anthropic.encode_request(req)
    original = CLAUDE_CODE["messages"][1]["content"][2]["input"]
    assert out["messages"][1]["content"][2]["input"] is original  # the very object, not a re-parse
    calls[0].arguments = '{"command": "pytest -x", "timeout": 5}'
    out = anthropic.encode_request(req)
    assert out["messages"][1]["content"][2]["input"] == {"command": "pytest -x", "timeout": 5}
    assert "input" not in json.dumps(out["messages"][1]["content"][2]["caller"])


def test_parts_added_by_a_pass_pick_a_valid_layout() -> None:
    req = anthropic.decode_request(SMALL[1])
    req.messages[0].parts.append(TextPart(" Cite sources.", extra={"cache_control": {"type": "ephemeral"}}))
    req.messages.append(Message("user", [ToolResultPart("t9", [TextPart("ok")])]))
    out = anthropic.encode_request(req)
    assert out["system"] == [
        {"type": "text", "text": "You are terse."},
        {"type": "text", "text": " Cite sources.", "cache_control": {"type": "ephemeral"}},
    ]
    assert out["messages"][-1] == msg("user", [{"type": "tool_result", "tool_use_id": "t9", "content": "ok"}])


BAD = [
    ([], "the payload", "a JSON object"),
    ({"model": "m"}, "messages", "a list of message objects"),
    ({"messages": [msg("bot", "hi")]}, "messages[0].role", '"bot"'),
    ({"messages": [{"role": "user"}]}, "messages[0].content", "the key is missing"),
    ({"messages": [msg("user", 5)]}, "messages[0].content", "a string or a list"),
    ({"messages": [msg("user", ["hi"])]}, "messages[0].content[0]", "a content block object"),
    ({"messages": [msg("user", [{"type": "text", "text": 3}])]}, "messages[0].content[0].text", "a string"),
    (
        {"messages": [msg("user", [{"type": "tool_result"}])]},
        "messages[0].content[0].tool_use_id",
        "tool_use",
    ),
    (
        {"messages": [msg("user", [{"type": "tool_result", "tool_use_id": "a", "is_error": "yes"}])]},
        "messages[0].content[0].is_error",
        "true or false",
    ),
    (
        {"messages": [msg("user", [{"type": "tool_result", "tool_use_id": "a", "content": 7}])]},
        "messages[0].content[0].content",
        "7",
    ),
    (  # found by the fuzz test: decoded, then refused on the way out
        {
            "messages": [
                msg("user", [{"type": "image", "source": {"type": "base64", "media_type": "", "data": "x"}}])
            ]
        },
        "messages[0].content[0].source.media_type",
        "a media type",
    ),
    (
        {"messages": [msg("user", [{"type": "tool_result", "tool_use_id": "a"}] * 2)]},
        "messages[0].content[1].tool_use_id",
        "one tool_result per message",
    ),
    (
        {"messages": [msg("assistant", [{"type": "tool_use", "id": "t", "name": "f"}])]},
        "content[0].input",
        "input",
    ),
    ({"messages": [msg("user", [{"type": "image", "source": "x"}])]}, "messages[0].content[0].source", '"x"'),
    (
        {"messages": [msg("user", [{"type": "image", "source": {"type": "base64", "data": "AA"}}])]},
        "messages[0].content[0].source.media_type",
        "image/png",
    ),
    ({"system": 5, "messages": []}, "system", "a string or a list of text blocks"),
    ({"messages": [], "tools": {"name": "x"}}, "tools", "a list of tool definition objects"),
    ({"messages": [], "tools": [1]}, "tools[0]", "a tool definition object"),
]


@pytest.mark.parametrize(("payload", "path", "detail"), BAD)
def test_bad_payloads_raise_one_line_payload_errors(payload: Any, path: str, detail: str) -> None:
    with pytest.raises(PayloadError) as info:
        anthropic.decode_request(payload)
    text = str(info.value)
    assert text.startswith("Anthropic Messages request: ") and "\n" not in text
    assert path in text and detail in text and "expected" in text


def test_bad_values_are_truncated_in_the_message() -> None:
    with pytest.raises(PayloadError, match=r"messages\[0\]\.role: got \"bbbb.*\.\.\., expected") as info:
        anthropic.decode_request({"messages": [msg("b" * 5000, "hi")]})
    assert len(str(info.value)) < 200


def test_encoding_arguments_that_are_not_json_is_a_payload_error() -> None:
    req = anthropic.decode_request(SMALL[4])
    call = req.messages[0].parts[0]
    assert isinstance(call, ToolCallPart)
    call.arguments = '{"a": '
    with pytest.raises(PayloadError, match=r"messages\[0\]\.content\[0\]\.arguments: got"):
        anthropic.encode_request(req)
