"""OpenAI Responses request <-> neutral model.

Why these choices: Codex speaks only this API. Its requests carry ``instructions``, a ``prompt_cache_key``
(the session id we key on), encrypted ``reasoning`` items that must come back untouched, and tool traffic
as separate ``function_call`` / ``function_call_output`` items (``custom_tool_call`` and its output for
free-form tools such as apply_patch). Every input item becomes its own Message, so item order and
grouping are kept exactly and each tool output is one ToolResultPart the passes can reduce.

Mapping:

- ``instructions`` (a string) -> a leading Message(role="system") with hint ``instructions``.
- ``input`` as a string -> one user Message (hints ``input: "string"`` on the request and
  ``input_string`` on the message); written back as a string while it is still that one plain message.
- message items (``type: "message"`` or a bare ``role``) -> Message with that role; ``input_text`` /
  ``output_text`` -> TextPart (``type`` kept in ``extra``), ``input_image`` with an ``image_url`` ->
  ImagePart, other content -> OpaquePart.
- ``function_call`` / ``custom_tool_call`` -> an assistant Message with one ToolCallPart (``call_id`` is
  the part id; the item ``id`` and ``type`` travel in ``extra``).
- ``function_call_output`` / ``custom_tool_call_output`` -> a tool Message with one ToolResultPart
  (``output`` a string or a list of content items; hint ``output`` keeps which).
- ``reasoning`` and every other item type -> an OpaquePart in its own Message (hint ``item: "opaque"``;
  role "tool" for ``*_output`` items, else "assistant").
"""

from __future__ import annotations

from collections.abc import Sequence

from ...codecs._common import (
    MISSING,
    Reuse,
    as_obj,
    at,
    decode_tools,
    decoded_items,
    encode_tools,
    encoded_items,
    fail,
    image_from_url,
    image_url,
    layout_of,
    pack,
    plain_text,
    req_str,
    rest,
    wrap_errors,
)
from ...model import (
    JSON,
    LISTED_TOOLS,
    SERVER_CALL_IDS,
    ImagePart,
    Message,
    OpaquePart,
    Part,
    Request,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

API = "OpenAI Responses request"
ROLES = ("user", "assistant", "system", "developer")
_CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
_OUTPUTS = ("function_call_output", "custom_tool_call_output")

ContentPart = TextPart | ImagePart | OpaquePart


def decode_request(payload: object, reuse: Reuse | None = None) -> Request:
    """Responses API request body -> Request. Raises PayloadError on a payload it cannot read.
    ``reuse``: the session's :class:`~lightmem_plugin.codecs._common.Reuse` (a proxy's), to decode only what changed."""
    return wrap_errors(API, lambda: _decode_request(payload, reuse))


def encode_request(req: Request, reuse: Reuse | None = None) -> JSON:
    """Request -> Responses API request body; the inverse of :func:`decode_request`."""
    return wrap_errors(API, lambda: _encode_request(req, reuse))


def _decode_request(payload: object, reuse: Reuse | None = None) -> Request:
    obj = as_obj(payload, "", "a JSON object (the request body)")
    messages: list[Message] = []
    extra = rest(obj, "input", "tools")
    instructions = obj.get("instructions")
    if isinstance(instructions, str):  # null or other forms stay in extra untouched
        messages.append(Message("system", [TextPart(instructions)], hints={"instructions": True}))
        del extra["instructions"]
    raw = obj.get("input", MISSING)
    hints: JSON = {}
    if isinstance(raw, str):
        hints["input"] = "string"
        messages.append(Message("user", [TextPart(raw)], hints={"input_string": True}))
    elif isinstance(raw, list):
        messages += decoded_items(reuse, API, raw, _decode_item, "input")
    else:
        fail("input", raw, "a string or a list of input items")
    tools, tool_hints = decode_tools(obj)
    listed = _additional_tool_names(raw)
    if listed:
        hints[LISTED_TOOLS] = listed
    hints[SERVER_CALL_IDS] = True  # an output may answer a call stored upstream (previous_response_id)
    return Request(messages=messages, tools=tools, extra=extra, hints={**hints, **tool_hints})


def _additional_tool_names(raw: object) -> list[str]:
    """Tool names of the ``additional_tools`` input items (each holds a ``tools`` list)."""
    if not isinstance(raw, list):
        return []
    names: list[str] = []
    for item in raw:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            _collect_names(item.get("tools"), names)
    return names


def _collect_names(tools: object, into: list[str]) -> None:
    """Names of ``tools``, a namespace's own tools included (Codex nests ``exec`` in ``functions``)."""
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict):
            if isinstance(tool.get("name"), str) and tool.get("type") != "namespace":
                into.append(tool["name"])
            _collect_names(tool.get("tools"), into)


def _encode_request(req: Request, reuse: Reuse | None = None) -> JSON:
    out = dict(req.extra)
    for i, msg in enumerate(req.messages):
        if msg.hints.get("instructions"):
            text = plain_text(msg.parts)
            if text is None:
                fail(at(at("messages", i), "parts"), _kinds(msg.parts), "plain TextParts for instructions")
            out["instructions"] = text
    items = [(i, m) for i, m in enumerate(req.messages) if not m.hints.get("instructions")]
    out["input"] = _encode_input(req, items, reuse)
    encode_tools(req, out)
    return out


def _encode_input(
    req: Request, items: list[tuple[int, Message]], reuse: Reuse | None = None
) -> str | list[JSON]:
    """``input`` as a string while it is still the one plain user message it was, else a list of items."""
    if req.hints.get("input") == "string" and len(items) == 1:
        msg = items[0][1]
        text = plain_text(msg.parts)
        if text is not None and msg.role == "user" and msg.hints.get("input_string") and not msg.extra:
            return text
    return [
        item for encoded in encoded_items(reuse, API, items, _encode_message, "messages") for item in encoded
    ]


def _kinds(parts: Sequence[Part]) -> list[str]:
    return [type(p).__name__ for p in parts]


def _decode_item(value: object, path: str) -> Message:
    obj = as_obj(value, path, "an input item object")
    kind = obj.get("type", MISSING)
    if kind == "message" or (kind is MISSING and "role" in obj):
        return _decode_message_item(obj, path)
    if not isinstance(kind, str):
        fail(at(path, "type"), kind, "an item type (message, function_call, reasoning, ...) or a role")
    if kind in _CALLS:
        args_key = _CALLS[kind]
        arguments = req_str(obj, args_key, path)
        part = ToolCallPart(req_str(obj, "call_id", path), req_str(obj, "name", path), arguments)
        part.extra = rest(obj, "call_id", "name", args_key)
        return Message("assistant", [part], hints={"item": "call"})
    if kind in _OUTPUTS:
        output = obj.get("output", MISSING)
        layout = layout_of(
            output, at(path, "output"), "a string or a list of content items", ("string", "list")
        )
        call_id = req_str(obj, "call_id", path, "a string (the call_id of the call it answers)")
        result = ToolResultPart(call_id, _decode_content(output, at(path, "output")))
        result.extra = rest(obj, "call_id", "output")
        return Message("tool", [result], hints={"item": "output", "output": layout})
    role: Role = "tool" if kind.endswith("_output") else "assistant"
    return Message(role, [OpaquePart(dict(obj))], hints={"item": "opaque"})


def _decode_message_item(obj: JSON, path: str) -> Message:
    role = obj.get("role", MISSING)
    if role not in ROLES:
        fail(at(path, "role"), role, "one of " + ", ".join(ROLES))
    content = obj.get("content", MISSING)
    layout = layout_of(
        content, at(path, "content"), "a string or a list of content items", ("string", "list")
    )
    parts: list[Part] = list(_decode_content(content, at(path, "content")))
    hints: JSON = {"item": "message", "content": layout}
    return Message(role=role, parts=parts, extra=rest(obj, "role", "content"), hints=hints)


def _decode_content(content: object, path: str) -> list[ContentPart]:
    if isinstance(content, str):
        return [TextPart(content)]
    items = content if isinstance(content, list) else []
    return [_decode_part(item, at(path, i)) for i, item in enumerate(items)]


def _decode_part(value: object, path: str) -> ContentPart:
    obj = as_obj(value, path, "a content item object")
    kind = obj.get("type")
    if kind in ("input_text", "output_text"):
        return TextPart(req_str(obj, "text", path), rest(obj, "text"))
    url = obj.get("image_url")
    if kind == "input_image" and isinstance(url, str):
        return image_from_url(url, rest(obj, "type", "image_url"))
    return OpaquePart(dict(obj))


def _encode_message(msg: Message, path: str) -> list[JSON]:
    """The items of one Message: opaque items, then a message item, then calls and outputs in order."""
    item = msg.hints.get("item")
    out: list[JSON] = []
    if item == "opaque":
        out += [dict(p.raw) for p in msg.parts if isinstance(p, OpaquePart)]
    content = [
        p
        for p in msg.parts
        if isinstance(p, TextPart | ImagePart) or (isinstance(p, OpaquePart) and item != "opaque")
    ]
    if item == "message" or content:
        if msg.role not in ROLES:
            fail(at(path, "role"), msg.role, "one of " + ", ".join(ROLES) + " for a message with content")
        head: JSON = {} if item == "message" else {"type": "message"}
        body = pack(
            msg.hints.get("content"), content, lambda: _encode_content(content, msg.role, at(path, "content"))
        )
        out.append({**head, **msg.extra, "role": msg.role, "content": body})
    for part in msg.parts:
        if isinstance(part, ToolCallPart):
            out.append(_encode_call(part))
        elif isinstance(part, ToolResultPart):
            out.append(_encode_output(part, msg.hints.get("output"), path))
    return out


def _encode_call(part: ToolCallPart) -> JSON:
    kind = "custom_tool_call" if part.extra.get("type") == "custom_tool_call" else "function_call"
    return {**part.extra, "type": kind, "call_id": part.id, "name": part.name, _CALLS[kind]: part.arguments}


def _encode_output(part: ToolResultPart, layout: object, path: str) -> JSON:
    kind = _OUTPUTS[1] if part.extra.get("type") == _OUTPUTS[1] else _OUTPUTS[0]
    output = pack(layout, part.content, lambda: _encode_content(part.content, "tool", at(path, "output")))
    return {**part.extra, "type": kind, "call_id": part.tool_call_id, "output": output}


def _encode_content(parts: Sequence[ContentPart], role: str, path: str) -> list[JSON]:
    text_type = "output_text" if role == "assistant" else "input_text"
    out: list[JSON] = []
    for i, part in enumerate(parts):
        if isinstance(part, TextPart):
            out.append({"type": text_type, **part.extra, "text": part.text})
        elif isinstance(part, ImagePart):
            out.append({**part.extra, "type": "input_image", "image_url": image_url(part, at(path, i))})
        else:
            out.append(dict(part.raw))
    return out
