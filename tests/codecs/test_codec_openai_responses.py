"""OpenAI Responses codec: Codex shaped requests decode to the neutral model and back exactly."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.errors import PayloadError
from lightmem_plugin.model import (
    SERVER_CALL_IDS,
    ImagePart,
    Message,
    OpaquePart,
    Request,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from lightmem_plugin.wire.responses import codec as openai_responses

CODEX: dict[str, Any] = json.loads(
    (Path(__file__).parent / "payloads" / "openai_responses_codex.json").read_text(encoding="utf-8")
)


def canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


SMALL = [
    {"model": "gpt-4.1", "input": "Tell me a three sentence bedtime story about a unicorn."},
    {"model": "gpt-4.1", "instructions": "Talk like a pirate.", "input": ""},
    {"model": "m", "instructions": None, "input": [], "tools": []},
    {"model": "m", "input": [{"type": "message", "role": "user", "content": []}]},
    {"model": "m", "input": [{"role": "system", "content": [{"type": "input_text", "text": "x", "zz": 1}]}]},
]


@pytest.mark.parametrize("payload", [CODEX, *SMALL], ids=["codex", *map(str, range(len(SMALL)))])
def test_round_trip_is_exact(payload: dict[str, Any]) -> None:
    before = canon(payload)
    assert canon(openai_responses.encode_request(openai_responses.decode_request(payload))) == before
    assert canon(payload) == before


def test_codex_request_maps_to_neutral_parts() -> None:
    req = openai_responses.decode_request(CODEX)
    head = req.messages[0]
    assert head.role == "system" and head.hints["instructions"] is True
    assert head.text().startswith("You are Codex")
    assert [m.role for m in req.messages[1:4]] == ["developer", "user", "user"]
    text, image, by_file = req.messages[3].parts
    assert isinstance(text, TextPart) and text.extra == {"type": "input_text"}
    assert (
        isinstance(image, ImagePart) and image.media_type == "image/png" and image.extra == {"detail": "auto"}
    )
    assert isinstance(by_file, OpaquePart) and by_file.raw["file_id"].startswith("file-")
    reasoning = req.messages[4]
    assert reasoning.role == "assistant" and reasoning.hints["item"] == "opaque"
    assert isinstance(reasoning.parts[0], OpaquePart) and reasoning.parts[0].raw["encrypted_content"]
    (call,) = req.messages[5].parts
    assert isinstance(call, ToolCallPart) and (call.id, call.name) == ("call_P1uV2", "shell")
    assert call.arguments == CODEX["input"][4]["arguments"]
    assert call.extra == {"type": "function_call", "id": "fc_68e5f0a1", "status": "completed"}
    (result,) = req.messages[6].parts
    assert req.messages[6].role == "tool" and isinstance(result, ToolResultPart)
    assert result.tool_call_id == call.id and "AssertionError" in result.text()
    patch, patched = req.messages[7].parts[0], req.messages[8].parts[0]
    assert isinstance(patch, ToolCallPart) and patch.arguments.startswith("*** Begin Patch")
    assert isinstance(patched, ToolResultPart) and patched.text().startswith("Success.")
    shot = req.messages[10].parts[0]
    assert isinstance(shot, ToolResultPart) and isinstance(shot.content[1], ImagePart)
    assert (
        req.messages[11].role == "assistant" and req.messages[11].hints["item"] == "opaque"
    )  # local_shell_call
    answer = req.messages[12]
    assert answer.extra == {"type": "message", "id": "msg_68e5f0", "status": "completed"}
    assert answer.parts == [TextPart("The route now matches `/users/<id>`; tests pass.",
                                     {"type": "output_text", "annotations": [], "logprobs": []})]  # fmt: skip
    assert req.messages[13].extra == {} and req.messages[13].hints["content"] == "string"
    assert req.extra["prompt_cache_key"] == "0199a4c2-7b1e-7d30-a1f2-5c3e8f9b2d41"
    assert "instructions" not in req.extra and "input" not in req.extra


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (6, "short"),
        (8, "short"),
        (10, [{"type": "input_text", "text": "short"}]),
    ],
)
def test_editing_one_tool_output_changes_exactly_that_item(message: int, expected: Any) -> None:
    req = openai_responses.decode_request(CODEX)
    result = req.messages[message].parts[0]
    assert isinstance(result, ToolResultPart)
    result.content = [TextPart("short")]
    want = copy.deepcopy(CODEX)
    want["input"][message - 1]["output"] = expected
    assert canon(openai_responses.encode_request(req)) == canon(want)


def test_string_input_stays_a_string_until_a_pass_adds_messages() -> None:
    req = openai_responses.decode_request(SMALL[0])
    assert [m.role for m in req.messages] == ["user"] and req.hints == {
        "input": "string",
        SERVER_CALL_IDS: True,
    }
    req.messages[0].parts[0] = TextPart("Tell me a story.")
    assert openai_responses.encode_request(req)["input"] == "Tell me a story."
    req.messages.append(Message("assistant", [TextPart("Once upon a time...")]))
    out = openai_responses.encode_request(req)
    assert out["input"] == [
        {"type": "message", "role": "user", "content": "Tell me a story."},
        {"type": "message", "role": "assistant", "content": "Once upon a time..."},
    ]


def test_messages_built_by_the_pipeline_encode_to_items() -> None:
    req = Request(
        messages=[
            Message("system", [TextPart("Be brief.")], hints={"instructions": True}),
            Message("assistant", [TextPart("Checking."), ToolCallPart("c1", "shell", '{"command":["ls"]}')]),
            Message("tool", [ToolResultPart("c1", [TextPart("a"), ImagePart(url="https://x/y.png")])]),
        ],
        extra={"model": "gpt-5"},
    )
    assert openai_responses.encode_request(req) == {
        "model": "gpt-5",
        "instructions": "Be brief.",
        "input": [
            {"type": "message", "role": "assistant", "content": "Checking."},
            {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"command":["ls"]}'},
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": [
                    {"type": "input_text", "text": "a"},
                    {"type": "input_image", "image_url": "https://x/y.png"},
                ],
            },
        ],
    }


BAD = [
    (None, "the payload", "a JSON object"),
    ({"model": "m"}, "input", "the key is missing"),
    ({"input": 42}, "input", "a string or a list of input items"),
    ({"input": ["hi"]}, "input[0]", "an input item object"),
    ({"input": [{"content": "hi"}]}, "input[0].type", "or a role"),
    ({"input": [{"type": 7}]}, "input[0].type", "got 7"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role", "one of user, assistant"),
    ({"input": [{"role": "user", "content": 1}]}, "input[0].content", "a string or a list of content items"),
    ({"input": [{"role": "user", "content": [[]]}]}, "input[0].content[0]", "a content item object"),
    (
        {"input": [{"role": "user", "content": [{"type": "input_text"}]}]},
        "input[0].content[0].text",
        "a string",
    ),
    ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].call_id", "a string"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]}, "input[0].arguments", "a string"),
    ({"input": [{"type": "function_call_output", "call_id": "c"}]}, "input[0].output", "the key is missing"),
    ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id", "the call it answers"),
    ({"input": [], "tools": [None]}, "tools[0]", "a tool definition object"),
]


@pytest.mark.parametrize(("payload", "path", "detail"), BAD)
def test_bad_payloads_raise_one_line_payload_errors(payload: Any, path: str, detail: str) -> None:
    with pytest.raises(PayloadError) as info:
        openai_responses.decode_request(payload)
    text = str(info.value)
    assert text.startswith("OpenAI Responses request: ") and "\n" not in text
    assert f"{path}: got" in text and detail in text and "expected" in text


@pytest.mark.parametrize(
    "message",
    [
        Message("system", [ImagePart(url="u")], hints={"instructions": True}),
        Message("tool", [TextPart("x")]),
        Message("user", [ImagePart(data="AA")]),
    ],
)
def test_messages_responses_cannot_express_raise_payload_errors(message: Message) -> None:
    with pytest.raises(PayloadError, match=r"^OpenAI Responses request: messages\[0\]"):
        openai_responses.encode_request(Request(messages=[message]))


def test_tools_listed_in_an_additional_tools_item_are_named_in_a_hint() -> None:
    """Codex's code mode sends no ``tools``: its JavaScript ``exec`` tool sits in an ``additional_tools``
    input item, inside a ``functions`` namespace. Before, the pipeline saw no tool, so stubs named
    ``lightmem2_recover(...)``, which the model's script cannot call (the e2e checks the stub)."""
    from lightmem_plugin.model import LISTED_TOOLS

    item = {
        "type": "additional_tools",
        "role": "developer",
        "tools": [{"type": "namespace", "name": "functions", "tools": [{"type": "custom", "name": "exec"}]}],
    }
    payload = {"model": "m", "input": [item, {"type": "message", "role": "user", "content": "go"}]}
    req = openai_responses.decode_request(payload)
    assert req.hints[LISTED_TOOLS] == ["exec"]
    assert json.loads(json.dumps(openai_responses.encode_request(req))) == payload
    assert LISTED_TOOLS not in openai_responses.decode_request({"model": "m", "input": "go"}).hints
