"""OpenAI Responses stream rewriter (Codex's only API): placeholders restored, usage picked up.

Why its own module: Responses streams are event-typed and numbered. Text arrives in
``response.output_text.delta``, tool-call arguments in ``response.function_call_arguments.delta``,
free-form tool input in ``response.custom_tool_call_input.delta``; each has a ``.done`` event with the
full text, and ``response.output_item.done`` / ``response.completed`` repeat the items once more. All
copies must agree, so each is restored. A tail held back at the end of a text (a possible partial
placeholder that was not one) is released as one extra delta event just before its ``.done``, and every
later ``sequence_number`` is shifted by one so the numbering stays consecutive, as clients expect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...prefix.placeholders import restore_json, restore_text
from ..rewrite import JSON, StreamRewriter
from ..sse import Event, StreamRestorer, encode_json_event


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


def restore_responses(body: JSON, values: Mapping[str, str]) -> JSON:
    """A Responses answer with placeholders restored in its output items."""
    if not values or not isinstance(body.get("output"), list):
        return body
    return {
        **body,
        "output": [restore_response_item(i, values) if isinstance(i, dict) else i for i in body["output"]],
    }


_DELTA = {
    "response.output_text.delta": False,
    "response.function_call_arguments.delta": True,
    "response.custom_tool_call_input.delta": False,
}
_DONE = {
    "response.output_text.done": ("response.output_text.delta", "text"),
    "response.function_call_arguments.done": ("response.function_call_arguments.delta", "arguments"),
    "response.custom_tool_call_input.done": ("response.custom_tool_call_input.delta", "input"),
}
_WHOLE = (
    "response.created",
    "response.in_progress",
    "response.completed",
    "response.incomplete",
    "response.failed",
)
_FINAL = ("response.completed", "response.incomplete", "response.failed")

Key = tuple[str, Any, Any, Any]


def _key(family: str, data: JSON) -> Key:
    return (family, data.get("item_id"), data.get("output_index"), data.get("content_index"))


class ResponsesStream(StreamRewriter):
    """OpenAI Responses stream."""

    def __init__(self, values: Mapping[str, str]) -> None:
        super().__init__(values)
        self._open: dict[Key, tuple[StreamRestorer, JSON]] = {}
        self._shift = 0

    def rewrite(self, ev: Event, data: JSON | None) -> list[bytes]:
        if data is None:
            return [ev.raw]
        kind = str(data.get("type"))
        out: list[bytes] = []
        new = data
        if kind in _DELTA and isinstance(data.get("delta"), str):
            new = self._delta(kind, data)
        elif kind in _DONE:
            family, name = _DONE[kind]
            out.extend(self._release(_key(family, data), data.get("sequence_number")))
            if isinstance(data.get(name), str):
                restore = restore_json if name == "arguments" else restore_text
                new = {**data, name: restore(data[name], self.values)}
        elif kind == "response.content_part.done" and isinstance(data.get("part"), dict):
            part = data["part"]
            if isinstance(part.get("text"), str):
                new = {**data, "part": {**part, "text": restore_text(part["text"], self.values)}}
        elif kind in ("response.output_item.added", "response.output_item.done") and isinstance(
            data.get("item"), dict
        ):
            new = {**data, "item": restore_response_item(data["item"], self.values)}
        elif kind in _WHOLE and isinstance(data.get("response"), dict):
            new = {**data, "response": self._whole(kind, data["response"])}
        if self._shift and isinstance(new.get("sequence_number"), int):
            new = {**new, "sequence_number": new["sequence_number"] + self._shift}
        out.append(ev.raw if new == data else encode_json_event(ev.event, new))
        return out

    def _delta(self, kind: str, data: JSON) -> JSON:
        key = _key(kind, data)
        slot = self._open.get(key)
        if slot is None:
            slot = StreamRestorer(self.values, _DELTA[kind]), {}
        self._open[key] = (slot[0], data)
        text = slot[0].push(data["delta"])
        return data if text == data["delta"] else {**data, "delta": text}

    def _release(self, key: Key, seq: object) -> list[bytes]:
        slot = self._open.pop(key, None)
        tail = slot[0].flush() if slot else ""
        if slot is None or not tail:
            return []
        synthetic = {**slot[1], "delta": tail}
        if isinstance(seq, int):
            synthetic["sequence_number"] = seq + self._shift
            self._shift += 1
        return [encode_json_event(slot[1].get("type"), synthetic)]

    def _whole(self, kind: str, response: JSON) -> JSON:
        if kind in _FINAL and isinstance(response.get("usage"), dict):
            self.usage = dict(response["usage"])
        output = response.get("output")
        if not isinstance(output, list) or not self.values:
            return response
        return {
            **response,
            "output": [restore_response_item(i, self.values) if isinstance(i, dict) else i for i in output],
        }

    def end(self) -> list[bytes]:
        out: list[bytes] = []
        for key in list(self._open):
            seq = self._open[key][1].get("sequence_number")
            out.extend(self._release(key, seq + 1 if isinstance(seq, int) else None))
        return out
