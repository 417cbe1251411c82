"""Anthropic Messages answers on their way back: placeholders restored in content blocks, streamed or
whole; usage from ``message_start`` and ``message_delta``. A block's held-back tail is released as one
more delta before its ``content_block_stop``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ...prefix.placeholders import restore_text
from ..rewrite import JSON, StreamRewriter, obj, restore_strings
from ..sse import Event, StreamRestorer, encode_json_event


def restore_anthropic(body: JSON, values: Mapping[str, str]) -> JSON:
    """An Anthropic Messages answer with placeholders restored in its content blocks."""
    if not values or not isinstance(body.get("content"), list):
        return body
    return {
        **body,
        "content": [_restore_block(b, values) if isinstance(b, dict) else b for b in body["content"]],
    }


def _restore_block(block: JSON, values: Mapping[str, str]) -> JSON:
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return {**block, "text": restore_text(block["text"], values)}
    if block.get("type") == "tool_use" and "input" in block:
        return {**block, "input": restore_strings(block["input"], values)}
    return block


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
            usage = obj(obj(data.get("message")).get("usage"))
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
        block = obj(data.get("content_block"))
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
        delta = obj(data.get("delta"))
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
