"""What a host SDK would make of a response: text, tool-call arguments, usage (independent parser)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class View:
    text: str = ""
    args: list[str] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    finals: list[str] = field(default_factory=list)  # full texts repeated in .done / completed events
    seqs: list[int] = field(default_factory=list)


def events(raw: bytes) -> list[tuple[str | None, Any]]:
    out: list[tuple[str | None, Any]] = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        if data:
            text = "\n".join(data)
            out.append((name, text if text == "[DONE]" else json.loads(text)))
    return out


def stream_view(api: str, raw: bytes) -> View:
    v = View()
    args: dict[Any, str] = {}
    for _, d in events(raw):
        if d == "[DONE]":
            v.done = True
            continue
        if api == "anthropic":
            kind = d["type"]
            if kind == "message_start":
                v.usage.update(d["message"]["usage"])
            elif kind == "message_delta":
                v.usage.update(d.get("usage") or {})
            elif kind == "content_block_start" and d["content_block"]["type"] == "tool_use":
                args[d["index"]] = ""
            elif kind == "content_block_delta" and d["delta"]["type"] == "text_delta":
                v.text += d["delta"]["text"]
            elif kind == "content_block_delta" and d["delta"]["type"] == "input_json_delta":
                args[d["index"]] += d["delta"]["partial_json"]
            elif kind == "message_stop":
                v.done = True
        elif api == "chat":
            if d.get("usage"):
                v.usage = d["usage"]
            for c in d["choices"]:
                v.text += c["delta"].get("content") or ""
                for tc in c["delta"].get("tool_calls") or []:
                    args[tc["index"]] = args.get(tc["index"], "") + tc["function"].get("arguments", "")
        else:
            kind = d["type"]
            v.seqs.append(d["sequence_number"])
            if kind == "response.output_text.delta":
                v.text += d["delta"]
            elif kind == "response.function_call_arguments.delta":
                args[d["item_id"]] = args.get(d["item_id"], "") + d["delta"]
            elif kind == "response.output_text.done":
                v.finals.append(d["text"])
            elif kind == "response.function_call_arguments.done":
                v.finals.append(d["arguments"])
            elif kind == "response.completed":
                v.done = True
                v.usage = d["response"]["usage"]
                for item in d["response"]["output"]:
                    v.finals.append(
                        item["content"][0]["text"] if item["type"] == "message" else item["arguments"]
                    )
    v.args = [args[k] for k in sorted(args, key=str)]
    return v


def body_view(api: str, body: dict[str, Any]) -> View:
    v = View(usage=body.get("usage") or {}, done=True)
    if api == "anthropic":
        v.text = "".join(b["text"] for b in body["content"] if b["type"] == "text")
        v.args = [json.dumps(b["input"]) for b in body["content"] if b["type"] == "tool_use"]
    elif api == "chat":
        msg = body["choices"][0]["message"]
        v.text = msg.get("content") or ""
        v.args = [c["function"]["arguments"] for c in msg.get("tool_calls") or []]
    else:
        for item in body["output"]:
            if item["type"] == "message":
                v.text += item["content"][0]["text"]
            else:
                v.args.append(item["arguments"])
    return v
