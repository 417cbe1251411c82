"""Model output on its way back to the host: placeholders restored, real cache usage picked up.

Why per API: each provider streams text and tool-call arguments in its own event shapes, and each
reports cache figures under its own names. One small rewriter per API keeps those shapes in one place:

- Anthropic Messages: ``content_block_delta`` (``text_delta.text``, ``input_json_delta.partial_json``),
  a block's held-back tail is released as one more delta before its ``content_block_stop``; usage from
  ``message_start`` and ``message_delta``.
- OpenAI Chat Completions: ``choices[].delta.content`` and ``delta.tool_calls[].function.arguments``;
  a choice's held-back tail joins the chunk that carries its ``finish_reason``; usage from the chunk
  that has it (``stream_options.include_usage``).
- OpenAI Responses: ``response.output_text.delta``, ``response.function_call_arguments.delta``,
  ``response.custom_tool_call_input.delta`` and the matching ``.done`` events (full texts restored);
  a released tail becomes one more delta event, and later ``sequence_number`` values are shifted so
  they stay consecutive; usage from ``response.completed`` (or ``incomplete``/``failed``).

An event we cannot read, or whose restoring fails, is forwarded exactly as received (fail-open, I5);
events we do not change are forwarded byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ..prefix.placeholders import restore_json, restore_text
from .sse import Event, SSEParser, StreamRestorer, encode_json_event

JSON = dict[str, Any]


def _obj(value: object) -> JSON:
    return value if isinstance(value, dict) else {}


def restore_strings(value: Any, values: Mapping[str, str]) -> Any:
    """Every string inside a decoded JSON value restored (Anthropic ``tool_use.input`` objects)."""
    if isinstance(value, str):
        return restore_text(value, values)
    if isinstance(value, list):
        return [restore_strings(v, values) for v in value]
    if isinstance(value, dict):
        return {k: restore_strings(v, values) for k, v in value.items()}
    return value


def restore_response_item(item: JSON, values: Mapping[str, str]) -> JSON:
    """A Responses output item with its text, function arguments or custom tool input restored."""
    kind = item.get("type")
    if kind == "message" and isinstance(item.get("content"), list):
        parts = [
            {**p, "text": restore_text(p["text"], values)}
            if isinstance(p, dict) and isinstance(p.get("text"), str)
            else p
            for p in item["content"]
        ]
        return {**item, "content": parts}
    if kind == "function_call" and isinstance(item.get("arguments"), str):
        return {**item, "arguments": restore_json(item["arguments"], values)}
    if kind == "custom_tool_call" and isinstance(item.get("input"), str):
        return {**item, "input": restore_text(item["input"], values)}
    return item


def restore_anthropic(body: JSON, values: Mapping[str, str]) -> JSON:
    """An Anthropic Messages answer with placeholders restored in its content blocks."""
    if not values or not isinstance(body.get("content"), list):
        return body
    return {
        **body,
        "content": [_restore_block(b, values) if isinstance(b, dict) else b for b in body["content"]],
    }


def restore_chat(body: JSON, values: Mapping[str, str]) -> JSON:
    """A Chat Completions answer with placeholders restored in each choice's message."""
    if not values or not isinstance(body.get("choices"), list):
        return body
    return {
        **body,
        "choices": [_restore_choice(c, values) if isinstance(c, dict) else c for c in body["choices"]],
    }


def restore_responses(body: JSON, values: Mapping[str, str]) -> JSON:
    """A Responses answer with placeholders restored in its output items."""
    if not values or not isinstance(body.get("output"), list):
        return body
    return {
        **body,
        "output": [restore_response_item(i, values) if isinstance(i, dict) else i for i in body["output"]],
    }


def _restore_block(block: JSON, values: Mapping[str, str]) -> JSON:
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return {**block, "text": restore_text(block["text"], values)}
    if block.get("type") == "tool_use" and "input" in block:
        return {**block, "input": restore_strings(block["input"], values)}
    return block


def _restore_choice(choice: JSON, values: Mapping[str, str]) -> JSON:
    msg = _obj(choice.get("message"))
    if not msg:
        return choice
    msg = dict(msg)
    if isinstance(msg.get("content"), str):
        msg["content"] = restore_text(msg["content"], values)
    calls = msg.get("tool_calls")
    if isinstance(calls, list):
        msg["tool_calls"] = [_restore_call(c, values) for c in calls]
    return {**choice, "message": msg}


def _restore_call(call: Any, values: Mapping[str, str]) -> Any:
    fn = _obj(call.get("function")) if isinstance(call, dict) else {}
    if isinstance(fn.get("arguments"), str):
        return {**call, "function": {**fn, "arguments": restore_json(fn["arguments"], values)}}
    return call


def body_usage(body: JSON) -> JSON | None:
    """The ``usage`` object of a non-streamed body (all three APIs put it at the top)."""
    usage = body.get("usage")
    return usage if isinstance(usage, dict) else None


class StreamRewriter:
    """Base: parse the upstream SSE bytes, rewrite event by event, remember the usage."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = dict(values)
        self.usage: JSON | None = None
        self._parser = SSEParser()
        self.on_error: Callable[[str, BaseException], None] | None = None  # the session's fault report

    def feed(self, chunk: bytes) -> bytes:
        """The bytes to send the client for this upstream chunk."""
        return self._emit(self._parser.feed(chunk))

    def finish(self) -> bytes:
        """The bytes still owed when the upstream stream ended."""
        out = self._emit(self._parser.close())
        try:
            return out + b"".join(self.end())
        except Exception as err:  # fail-open: a tail we cannot flush is dropped, never the stream
            self._failed(err)
            return out

    def _emit(self, events: list[Event]) -> bytes:
        out: list[bytes] = []
        for ev in events:
            try:
                data = ev.json() if ev.data and ev.data != "[DONE]" else None
                out.extend(self.rewrite(ev, data if isinstance(data, dict) else None))
            except Exception as err:  # fail-open (I5): forward what the provider sent
                self._failed(err)
                out.append(ev.raw)
        return b"".join(out)

    def _failed(self, err: BaseException) -> None:
        if self.on_error is not None:
            self.on_error("stream restore", err)

    def rewrite(self, ev: Event, data: JSON | None) -> list[bytes]:
        """Bytes for one event (``data`` is its JSON object, None when it has none)."""
        raise NotImplementedError

    def end(self) -> list[bytes]:
        """Bytes to add when the stream ends without a proper close (held-back tails)."""
        return []


class AnthropicStream(StreamRewriter):
    """Anthropic Messages stream."""

    _FIELD: ClassVar[dict[str, str]] = {"text_delta": "text", "input_json_delta": "partial_json"}

    def __init__(self, values: Mapping[str, str]) -> None:
        super().__init__(values)
        self._blocks: dict[int, tuple[str, StreamRestorer]] = {}

    def rewrite(self, ev: Event, data: JSON | None) -> list[bytes]:
        if data is None:
            return [ev.raw]
        kind = data.get("type")
        if kind == "message_start":
            usage = _obj(_obj(data.get("message")).get("usage"))
            self.usage = dict(usage) if usage else self.usage
        elif kind == "message_delta" and isinstance(data.get("usage"), dict):
            self.usage = {**(self.usage or {}), **data["usage"]}
        elif kind == "content_block_start":
            return self._start(ev, data)
        elif kind == "content_block_delta":
            return self._delta(ev, data)
        elif kind == "content_block_stop":
            return [*self._release(data.get("index")), ev.raw]
        return [ev.raw]

    def _start(self, ev: Event, data: JSON) -> list[bytes]:
        block = _obj(data.get("content_block"))
        index = data.get("index")
        if not isinstance(index, int) or block.get("type") not in ("text", "tool_use"):
            return [ev.raw]
        json_mode = block["type"] == "tool_use"
        self._blocks[index] = (
            "input_json_delta" if json_mode else "text_delta",
            StreamRestorer(self.values, json_mode),
        )
        new = _restore_block(block, self.values)
        if new == block:
            return [ev.raw]
        return [encode_json_event(ev.event, {**data, "content_block": new})]

    def _delta(self, ev: Event, data: JSON) -> list[bytes]:
        delta = _obj(data.get("delta"))
        name = self._FIELD.get(str(delta.get("type")))
        slot = self._blocks.get(data.get("index"))  # type: ignore[arg-type]
        if name is None or slot is None or not isinstance(delta.get(name), str):
            return [ev.raw]
        text = slot[1].push(delta[name])
        if text == delta[name]:
            return [ev.raw]
        return [encode_json_event(ev.event, {**data, "delta": {**delta, name: text}})]

    def _release(self, index: object) -> list[bytes]:
        slot = self._blocks.pop(index, None) if isinstance(index, int) else None
        tail = slot[1].flush() if slot else ""
        if not slot or not tail:
            return []
        delta = {"type": slot[0], self._FIELD[slot[0]]: tail}
        return [
            encode_json_event(
                "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
            )
        ]

    def end(self) -> list[bytes]:
        return [b for index in sorted(self._blocks) for b in self._release(index)]


class ChatStream(StreamRewriter):
    """OpenAI Chat Completions stream (``data: {...}`` chunks, then ``data: [DONE]``)."""

    def __init__(self, values: Mapping[str, str]) -> None:
        super().__init__(values)
        self._open: dict[tuple[int, int], StreamRestorer] = {}  # (choice, -1 content | tool index)
        self._template: JSON = {}

    def rewrite(self, ev: Event, data: JSON | None) -> list[bytes]:
        if data is None:
            return [*self.end(), ev.raw] if ev.data == "[DONE]" else [ev.raw]
        if isinstance(data.get("usage"), dict):
            self.usage = dict(data["usage"])
        self._template = {k: data[k] for k in ("id", "object", "created", "model") if k in data}
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            return [ev.raw]
        new = [self._choice(c) if isinstance(c, dict) else c for c in choices]
        if new == choices:
            return [ev.raw]
        return [encode_json_event(ev.event, {**data, "choices": new})]

    def _restorer(self, key: tuple[int, int], json_mode: bool) -> StreamRestorer:
        found = self._open.get(key)
        if found is None:
            found = self._open[key] = StreamRestorer(self.values, json_mode)
        return found

    def _choice(self, choice: JSON) -> JSON:
        idx = choice.get("index", 0)
        idx = idx if isinstance(idx, int) else 0
        delta = dict(_obj(choice.get("delta")))
        if isinstance(delta.get("content"), str):
            delta["content"] = self._restorer((idx, -1), False).push(delta["content"])
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            delta["tool_calls"] = [self._call(idx, c) for c in calls]
        if choice.get("finish_reason") is not None:
            self._flush_choice(idx, delta)
        return {**choice, "delta": delta} if "delta" in choice or delta else choice

    def _call(self, idx: int, call: Any) -> Any:
        fn = _obj(call.get("function")) if isinstance(call, dict) else {}
        if not isinstance(fn.get("arguments"), str) or not isinstance(call.get("index"), int):
            return call
        text = self._restorer((idx, call["index"]), True).push(fn["arguments"])
        return {**call, "function": {**fn, "arguments": text}}

    def _flush_choice(self, idx: int, delta: JSON) -> None:
        for key in sorted(k for k in self._open if k[0] == idx):
            tail = self._open.pop(key).flush()
            if not tail:
                continue
            if key[1] == -1:
                delta["content"] = (delta.get("content") or "") + tail
                continue
            calls = list(delta.get("tool_calls") or [])
            calls.append({"index": key[1], "function": {"arguments": tail}})
            delta["tool_calls"] = calls

    def end(self) -> list[bytes]:
        out: list[bytes] = []
        for idx in sorted({k[0] for k in self._open}):
            delta: JSON = {}
            self._flush_choice(idx, delta)
            if delta:
                chunk = {**self._template, "choices": [{"index": idx, "delta": delta, "finish_reason": None}]}
                out.append(encode_json_event(None, chunk))
        return out
