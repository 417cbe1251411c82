"""Chat Completions answers on their way back: placeholders restored in ``choices[].message`` (whole)
and ``choices[].delta.content`` / ``delta.tool_calls[].function.arguments`` (streamed); a choice's
held-back tail joins the chunk that carries its ``finish_reason``; usage from the chunk that has it
(``stream_options.include_usage``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...prefix.placeholders import restore_json, restore_text
from ..rewrite import JSON, StreamRewriter, obj
from ..sse import Event, StreamRestorer, encode_json_event


def restore_chat(body: JSON, values: Mapping[str, str]) -> JSON:
    """A Chat Completions answer with placeholders restored in each choice's message."""
    if not values or not isinstance(body.get("choices"), list):
        return body
    return {
        **body,
        "choices": [_restore_choice(c, values) if isinstance(c, dict) else c for c in body["choices"]],
    }


def _restore_choice(choice: JSON, values: Mapping[str, str]) -> JSON:
    msg = obj(choice.get("message"))
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
    fn = obj(call.get("function")) if isinstance(call, dict) else {}
    if isinstance(fn.get("arguments"), str):
        return {**call, "function": {**fn, "arguments": restore_json(fn["arguments"], values)}}
    return call


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
        delta = dict(obj(choice.get("delta")))
        if isinstance(delta.get("content"), str):
            delta["content"] = self._restorer((idx, -1), False).push(delta["content"])
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            delta["tool_calls"] = [self._call(idx, c) for c in calls]
        if choice.get("finish_reason") is not None:
            self._flush_choice(idx, delta)
        return {**choice, "delta": delta} if "delta" in choice or delta else choice

    def _call(self, idx: int, call: Any) -> Any:
        fn = obj(call.get("function")) if isinstance(call, dict) else {}
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
