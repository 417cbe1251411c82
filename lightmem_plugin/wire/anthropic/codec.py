"""Anthropic Messages request <-> neutral model.

Why these choices: Claude Code is the main Anthropic host, and its requests carry ``cache_control``
breakpoints on system blocks, tools and message blocks, ``role: "system"`` entries inside
``messages``, thinking blocks with signatures, and ``tool_result`` blocks whose content is a string or a
list. All of it must come back byte-for-byte equal (as JSON) or the provider cache and the signatures
break, so every unknown field travels in ``extra`` and every layout choice in ``hints``.

Mapping:

- top-level ``system`` (string or text blocks) -> a leading Message(role="system") with hint
  ``system_field`` so it is written back top-level; ``role: "system"`` messages stay messages.
- ``text`` -> TextPart, ``image`` (base64 or url source) -> ImagePart, ``tool_use`` -> ToolCallPart,
  ``tool_result`` -> ToolResultPart (the message keeps role "user"), anything else (thinking,
  redacted_thinking, documents, server tools) -> OpaquePart.
- ``tool_use.input`` -> ``arguments`` as canonical JSON text; the original object stays in
  ``extra["input"]`` and is written back as-is while ``arguments`` is unchanged, otherwise the new
  ``arguments`` text is parsed.
- a tool_result's content layout (string / list / absent) is kept per tool_use_id in the message hint
  ``result_content``; nested unknown ``source`` fields of an image live in ``extra["source"]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ...codecs._common import (
    MISSING,
    Reuse,
    as_list,
    as_obj,
    at,
    canonical_json,
    decode_tools,
    decoded_items,
    encode_tools,
    encoded_items,
    fail,
    layout_of,
    nest,
    nested,
    pack,
    put,
    req_str,
    rest,
    wrap_errors,
)
from ...model import (
    JSON,
    ImagePart,
    Message,
    OpaquePart,
    Part,
    Request,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

API = "Anthropic Messages request"
ROLES = ("user", "assistant", "system")
_CONTENT = "a string or a list of content blocks"

LeafPart = TextPart | ImagePart | OpaquePart


def decode_request(payload: object, reuse: Reuse | None = None) -> Request:
    """Messages API request body -> Request. Raises PayloadError on a payload it cannot read.
    ``reuse``: the session's :class:`~lightmem_plugin.codecs._common.Reuse` (a proxy's), to decode only what changed."""
    return wrap_errors(API, lambda: _decode_request(payload, reuse))


def encode_request(req: Request, reuse: Reuse | None = None) -> JSON:
    """Request -> Messages API request body; the inverse of :func:`decode_request`."""
    return wrap_errors(API, lambda: _encode_request(req, reuse))


def _decode_request(payload: object, reuse: Reuse | None = None) -> Request:
    obj = as_obj(payload, "", "a JSON object (the request body)")
    raw = as_list(obj.get("messages", MISSING), "messages", "a list of message objects")
    messages: list[Message] = []
    if "system" in obj:
        system = obj["system"]
        layout = layout_of(system, "system", "a string or a list of text blocks", ("string", "list"))
        parts = _decode_blocks(system, "system", {})
        messages.append(Message("system", parts, hints={"system_field": True, "content": layout}))
    messages += decoded_items(reuse, API, raw, _decode_message, "messages")
    tools, hints = decode_tools(obj)
    return Request(
        messages=messages, tools=tools, extra=rest(obj, "system", "messages", "tools"), hints=hints
    )


def _encode_request(req: Request, reuse: Reuse | None = None) -> JSON:
    out = dict(req.extra)
    system = [m for m in req.messages if m.hints.get("system_field")]
    if system:
        parts = [p for m in system for p in m.parts]
        layout = system[0].hints.get("content") if len(system) == 1 else "list"
        out["system"] = pack(layout, parts, lambda: _encode_blocks(parts, {}, "system"))
    turns = [(i, m) for i, m in enumerate(req.messages) if not m.hints.get("system_field")]
    out["messages"] = encoded_items(reuse, API, turns, _encode_message, "messages")
    encode_tools(req, out)
    return out


def _decode_message(value: object, path: str) -> Message:
    obj = as_obj(value, path, "a message object")
    role = obj.get("role", MISSING)
    if role not in ROLES:
        fail(at(path, "role"), role, '"user", "assistant" or "system"')
    content = obj.get("content", MISSING)
    layout = layout_of(content, at(path, "content"), _CONTENT, ("string", "list"))
    results: JSON = {}
    parts = _decode_blocks(content, at(path, "content"), results)
    hints: JSON = {"content": layout}
    if results:
        hints["result_content"] = results
    return Message(role=role, parts=parts, extra=rest(obj, "role", "content"), hints=hints)


def _encode_message(msg: Message, path: str) -> JSON:
    results = msg.hints.get("result_content")
    layouts: JSON = results if isinstance(results, dict) else {}
    content = pack(msg.hints.get("content"), msg.parts, lambda: _encode_blocks(msg.parts, layouts, path))
    return {**msg.extra, "role": msg.role, "content": content}


def _decode_blocks(content: object, path: str, results: JSON) -> list[Part]:
    """Blocks of a content value; records each tool_result's content layout in ``results``."""
    if isinstance(content, str):
        return [TextPart(content)]
    blocks = content if isinstance(content, list) else []
    return [_decode_block(b, at(path, i), results) for i, b in enumerate(blocks)]


def _decode_block(value: object, path: str, results: JSON) -> Part:
    obj = as_obj(value, path, "a content block object")
    kind = obj.get("type")
    if kind == "tool_use":
        if "input" not in obj:
            fail(at(path, "input"), MISSING, "the tool input object")
        arguments = canonical_json(obj["input"])
        name = req_str(obj, "name", path)
        return ToolCallPart(req_str(obj, "id", path), name, arguments, rest(obj, "type", "id", "name"))
    if kind == "tool_result":
        call_id = req_str(obj, "tool_use_id", path, "a string (the id of the tool_use block it answers)")
        if call_id in results:
            fail(at(path, "tool_use_id"), call_id, "a tool_use_id used by one tool_result per message")
        content = obj.get("content", MISSING)
        results[call_id] = layout_of(content, at(path, "content"), _CONTENT, ("string", "list", "absent"))
        is_error = obj.get("is_error")
        if "is_error" in obj and not isinstance(is_error, bool):
            fail(at(path, "is_error"), is_error, "true or false")
        inner = _decode_leaves(content, at(path, "content"))
        extra = rest(obj, "type", "tool_use_id", "content", "is_error")
        return ToolResultPart(call_id, inner, is_error, extra)
    return _decode_leaf(obj, path)


def _decode_leaves(content: object, path: str) -> list[LeafPart]:
    if isinstance(content, str):
        return [TextPart(content)]
    blocks = content if isinstance(content, list) else []
    return [
        _decode_leaf(as_obj(b, at(path, i), "a content block object"), at(path, i))
        for i, b in enumerate(blocks)
    ]


def _decode_leaf(obj: JSON, path: str) -> LeafPart:
    kind = obj.get("type")
    if kind == "text":
        return TextPart(req_str(obj, "text", path), rest(obj, "type", "text"))
    if kind == "image":
        src_path = at(path, "source")
        source = as_obj(obj.get("source", MISSING), src_path, "an image source object")
        outer = rest(obj, "type", "source")
        if source.get("type") == "base64":
            media_type = req_str(source, "media_type", src_path, "a media type such as image/png")
            if not media_type:  # refused here as on the way out: inline data needs its type
                fail(at(src_path, "media_type"), media_type, "a media type such as image/png")
            data = req_str(source, "data", src_path, "base64 text")
            extra = nest(outer, "source", rest(source, "type", "media_type", "data"))
            return ImagePart(media_type=media_type, data=data, extra=extra)
        if source.get("type") == "url":
            url = req_str(source, "url", src_path)
            return ImagePart(url=url, extra=nest(outer, "source", rest(source, "type", "url")))
    return OpaquePart(dict(obj))


def _encode_blocks(parts: Sequence[Part], layouts: JSON, path: str) -> list[JSON]:
    out: list[JSON] = []
    for i, part in enumerate(parts):
        where = at(at(path, "content"), i)
        if isinstance(part, ToolCallPart):
            out.append(_encode_call(part, where))
        elif isinstance(part, ToolResultPart):
            out.append(_encode_result(part, layouts.get(part.tool_call_id), where))
        else:
            out.append(_encode_leaf(part, where))
    return out


def _encode_result(part: ToolResultPart, layout: object, path: str) -> JSON:
    block: JSON = {**part.extra, "type": "tool_result", "tool_use_id": part.tool_call_id}
    put(block, "content", pack(layout, part.content, lambda: _encode_blocks(part.content, {}, path)))
    if part.is_error is not None:
        block["is_error"] = part.is_error
    return block


def _encode_leaf(part: LeafPart, path: str) -> JSON:
    if isinstance(part, TextPart):
        return {**part.extra, "type": "text", "text": part.text}
    if isinstance(part, OpaquePart):
        return dict(part.raw)
    outer, source = nested(part.extra, "source")
    if part.data is not None:
        if not part.media_type:
            fail(at(path, "media_type"), part.media_type, "a media type such as image/png for inline data")
        source.update({"type": "base64", "media_type": part.media_type, "data": part.data})
    elif part.url is not None:
        source.update({"type": "url", "url": part.url})
    else:
        fail(path, None, "an ImagePart with data or url")
    return {**outer, "type": "image", "source": source}


def _encode_call(part: ToolCallPart, path: str) -> JSON:
    """A tool_use block; the original ``input`` object comes back while ``arguments`` is unchanged."""
    extra = dict(part.extra)
    original = extra.pop("input", MISSING)
    if original is not MISSING and canonical_json(original) == part.arguments:
        value = original
    else:
        try:
            value = json.loads(part.arguments)
        except ValueError:
            fail(at(path, "arguments"), part.arguments, "JSON text of the tool input object")
    return {**extra, "type": "tool_use", "id": part.id, "name": part.name, "input": value}
