"""OpenAI Chat Completions request <-> neutral model.

Why this shape: the pipeline's Python API speaks chat-form message dicts, and every pass works on
neutral parts, so this codec is both the wire codec for ``POST /v1/chat/completions`` and the message
converter (:func:`chat_to_message` / :func:`message_to_chat`) the Python API uses.

Mapping:

- ``role: "tool"`` message -> Message(role="tool") holding one ToolResultPart (content as TextParts).
- assistant ``tool_calls`` -> ToolCallParts after the content parts; ``arguments`` kept as sent
  (``type: "custom"`` calls carry their free-form ``input`` in ``arguments``).
- system / developer / user / assistant stay messages with that role; the legacy ``role: "function"``
  message is carried whole as an OpaquePart.
- content parts: ``text`` -> TextPart, ``image_url`` -> ImagePart (base64 data URLs split into
  media_type + data), anything else -> OpaquePart.

Hints: ``content`` records string / list / null / absent so a string is written back as a string;
``tool_calls`` records that the key was present (even empty). Everything unknown travels in ``extra``.
"""

from __future__ import annotations

from ...codecs._common import (
    MISSING,
    Reuse,
    as_list,
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

API = "OpenAI Chat request"
ROLES = ("system", "developer", "user", "assistant", "tool")
_CONTENT = "a string, a list of content parts or null"

ContentPart = TextPart | ImagePart | OpaquePart


def decode_request(payload: object, reuse: Reuse | None = None) -> Request:
    """Chat Completions request body -> Request. Raises PayloadError on a payload it cannot read.
    ``reuse``: the session's :class:`~lightmem_plugin.codecs._common.Reuse` (a proxy's), to decode only what changed."""
    return wrap_errors(API, lambda: _decode_request(payload, reuse))


def encode_request(req: Request, reuse: Reuse | None = None) -> JSON:
    """Request -> Chat Completions request body; the inverse of :func:`decode_request`."""
    return wrap_errors(API, lambda: _encode_request(req, reuse))


def _decode_request(payload: object, reuse: Reuse | None = None) -> Request:
    obj = as_obj(payload, "", "a JSON object (the request body)")
    raw = as_list(obj.get("messages", MISSING), "messages", "a list of message objects")
    messages = decoded_items(reuse, API, raw, chat_to_message, "messages")
    tools, hints = decode_tools(obj)
    return Request(messages=messages, tools=tools, extra=rest(obj, "messages", "tools"), hints=hints)


def _encode_request(req: Request, reuse: Reuse | None = None) -> JSON:
    out = dict(req.extra)
    out["messages"] = encoded_items(reuse, API, list(enumerate(req.messages)), message_to_chat, "messages")
    encode_tools(req, out)
    return out


def chat_to_message(d: object, path: str = "message") -> Message:
    """One chat-form message dict -> Message. Raises PayloadError naming ``path`` on bad input."""
    obj = as_obj(d, path, "a message object")
    role = obj.get("role", MISSING)
    if role == "function":  # deprecated function-result message: nothing to reduce, carry it whole
        return Message(role="tool", parts=[OpaquePart(dict(obj))], hints={"opaque": True})
    if role not in ROLES:
        fail(at(path, "role"), role, "one of " + ", ".join(ROLES))
    content = obj.get("content", MISSING)
    layout = layout_of(content, at(path, "content"), _CONTENT, ("string", "list", "null", "absent"))
    parts = _decode_content(content, at(path, "content"))
    hints: JSON = {"content": layout}
    if role == "tool":
        call_id = req_str(obj, "tool_call_id", path, "a string (the id of the tool call this answers)")
        extra = rest(obj, "role", "content", "tool_call_id")
        return Message(role="tool", parts=[ToolResultPart(call_id, parts)], extra=extra, hints=hints)
    extra = rest(obj, "role", "content")
    out_parts: list[Part] = list(parts)
    calls = obj.get("tool_calls")
    if role == "assistant" and calls is not None:
        calls_path = at(path, "tool_calls")
        calls = as_list(calls, calls_path, "a list of tool call objects or null")
        out_parts += [_decode_call(c, at(calls_path, i)) for i, c in enumerate(calls)]
        hints["tool_calls"] = True
        del extra["tool_calls"]
    return Message(role=role, parts=out_parts, extra=extra, hints=hints)


def message_to_chat(msg: Message, path: str = "message") -> JSON:
    """Message -> one chat-form message dict; the inverse of :func:`chat_to_message`."""
    if msg.hints.get("opaque"):
        raws = [p.raw for p in msg.parts if isinstance(p, OpaquePart)]
        if len(raws) != 1 or len(msg.parts) != 1:
            fail(at(path, "parts"), _kinds(msg.parts), "exactly one OpaquePart in an opaque message")
        return dict(raws[0])
    out: JSON = {"role": msg.role, **msg.extra}
    layout = msg.hints.get("content")
    if msg.role == "tool":
        if len(msg.parts) != 1 or not isinstance(msg.parts[0], ToolResultPart):
            fail(at(path, "parts"), _kinds(msg.parts), "exactly one ToolResultPart in a tool message")
        result = msg.parts[0]
        out["tool_call_id"] = result.tool_call_id
        put(out, "content", pack(layout, result.content, lambda: _encode_content(result.content, path)))
        return out
    if any(isinstance(p, ToolResultPart) for p in msg.parts):
        fail(at(path, "parts"), _kinds(msg.parts), "ToolResultParts only in role 'tool' messages")
    calls = [p for p in msg.parts if isinstance(p, ToolCallPart)]
    content = [p for p in msg.parts if isinstance(p, TextPart | ImagePart | OpaquePart)]
    if layout is None and calls and not content:
        layout = "null"
    put(out, "content", pack(layout, content, lambda: _encode_content(content, path)))
    if calls or msg.hints.get("tool_calls"):
        out["tool_calls"] = [_encode_call(c) for c in calls]
    return out


def _kinds(parts: list[Part]) -> list[str]:
    return [type(p).__name__ for p in parts]


def _decode_content(content: object, path: str) -> list[ContentPart]:
    if isinstance(content, str):
        return [TextPart(content)]
    if isinstance(content, list):
        return [_decode_part(p, at(path, i)) for i, p in enumerate(content)]
    return []


def _decode_part(value: object, path: str) -> ContentPart:
    obj = as_obj(value, path, "a content part object")
    kind = obj.get("type")
    if kind == "text":
        return TextPart(req_str(obj, "text", path), rest(obj, "type", "text"))
    if kind == "image_url":
        inner_path = at(path, "image_url")
        inner = as_obj(obj.get("image_url", MISSING), inner_path, "an object with a url")
        url = req_str(inner, "url", inner_path)
        return image_from_url(url, nest(rest(obj, "type", "image_url"), "image_url", rest(inner, "url")))
    return OpaquePart(dict(obj))


def _encode_content(parts: list[ContentPart], path: str) -> list[JSON]:
    out: list[JSON] = []
    for i, part in enumerate(parts):
        if isinstance(part, TextPart):
            out.append({**part.extra, "type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            outer, inner = nested(part.extra, "image_url")
            inner["url"] = image_url(part, at(at(path, "content"), i))
            out.append({**outer, "type": "image_url", "image_url": inner})
        else:
            out.append(dict(part.raw))
    return out


def _decode_call(value: object, path: str) -> ToolCallPart:
    obj = as_obj(value, path, "a tool call object")
    kind = obj.get("type", MISSING)
    if kind not in ("function", "custom"):
        fail(at(path, "type"), kind, '"function" or "custom"')
    key, args_key = ("custom", "input") if kind == "custom" else ("function", "arguments")
    inner_path = at(path, key)
    inner = as_obj(obj.get(key, MISSING), inner_path, f"an object with name and {args_key}")
    name = req_str(inner, "name", inner_path)
    arguments = req_str(inner, args_key, inner_path, "a string (JSON text of the arguments)")
    extra = nest(rest(obj, "id", key), key, rest(inner, "name", args_key))
    return ToolCallPart(req_str(obj, "id", path), name, arguments, extra)


def _encode_call(part: ToolCallPart) -> JSON:
    kind = "custom" if part.extra.get("type") == "custom" else "function"
    args_key = "input" if kind == "custom" else "arguments"
    outer, inner = nested(part.extra, kind)
    inner.update({"name": part.name, args_key: part.arguments})
    return {**outer, "type": kind, "id": part.id, kind: inner}
