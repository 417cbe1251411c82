"""Response shapes of the fake provider: Anthropic Messages, OpenAI Chat Completions and Responses,
as JSON bodies and as the SSE event sequences the real APIs stream (field names as documented)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

CHARS_PER_TOKEN = 4


@dataclass
class Reply:
    """One scripted answer. ``tool_calls``: (name, arguments JSON text) pairs."""

    text: str = "ok"
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    status: int = 200
    error: dict[str, Any] | None = None
    cut_after: int | None = None  # stream: drop the connection after this many events
    delay_s: float = 0.0  # stream: pause before each event
    final_delay_s: float = 0.0  # stream: pause before the last event (a host may hang up meanwhile)
    chunk: int = 5
    thinking: str = ""  # Anthropic: a signed thinking block before the text (its signature: ``signature``)
    signature: str = ""


def split(text: str, n: int) -> list[str]:
    return [text[i : i + n] for i in range(0, len(text), n)] or [""]


def usage_for(api: str, prompt: int, cached: int, written: int, reply: Reply) -> dict[str, Any]:
    said = len(reply.text) + len(reply.thinking) + sum(len(a) for _, a in reply.tool_calls)
    out = max(1, said // CHARS_PER_TOKEN)
    if api == "anthropic":
        return {
            "input_tokens": prompt - cached - written,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": cached,
            "output_tokens": out,
        }
    if api == "chat":
        return {
            "prompt_tokens": prompt,
            "completion_tokens": out,
            "total_tokens": prompt + out,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + out,
    }


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n").encode()


# -- Anthropic Messages --------------------------------------------------------------------------
def anthropic_body(reply: Reply, usage: dict[str, Any], n: int, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.thinking:
        content.append({"type": "thinking", "thinking": reply.thinking, "signature": reply.signature})
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for i, (name, args) in enumerate(reply.tool_calls):
        content.append({"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": json.loads(args)})
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


def anthropic_stream(reply: Reply, usage: dict[str, Any], n: int, body: dict[str, Any]) -> list[bytes]:
    full = anthropic_body(reply, usage, n, body.get("model", "fake-model"))
    start = {**full, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    out = [_sse("message_start", {"type": "message_start", "message": start}), _sse("ping", {"type": "ping"})]
    calls = iter(reply.tool_calls)
    for i, block in enumerate(full["content"]):
        if block["type"] == "thinking":
            out.append(
                _sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                    },
                )
            )
            deltas = [
                {"type": "thinking_delta", "thinking": t} for t in split(block["thinking"], reply.chunk)
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "text":
            out.append(
                _sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            deltas = [{"type": "text_delta", "text": t} for t in split(block["text"], reply.chunk)]
        else:
            out.append(
                _sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}},
                )
            )
            args = next(calls)[1]
            deltas = [{"type": "input_json_delta", "partial_json": t} for t in split(args, reply.chunk)]
        out += [
            _sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
            for d in deltas
        ]
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "usage": {"output_tokens": usage["output_tokens"]},
                "delta": {"stop_reason": full["stop_reason"], "stop_sequence": None},
            },
        )
    )
    return [*out, _sse("message_stop", {"type": "message_stop"})]


# -- OpenAI Chat Completions ---------------------------------------------------------------------
def chat_body(reply: Reply, usage: dict[str, Any], n: int, model: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        msg["tool_calls"] = [
            {"id": f"call_{n}_{i}", "type": "function", "function": {"name": nm, "arguments": a}}
            for i, (nm, a) in enumerate(reply.tool_calls)
        ]
    finish = "tool_calls" if reply.tool_calls else "stop"
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
        "usage": usage,
    }


def chat_stream(reply: Reply, usage: dict[str, Any], n: int, body: dict[str, Any]) -> list[bytes]:
    base = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": body.get("model", "fake-model"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": t}) for t in split(reply.text, reply.chunk)] if reply.text else []
    for i, (name, args) in enumerate(reply.tool_calls):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": f"call_{n}_{i}",
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        out += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": t}}]})
            for t in split(args, reply.chunk)
        ]
    out.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        out.append(_sse(None, {**base, "choices": [], "usage": usage}))
    return [*out, _sse(None, "[DONE]")]


# -- OpenAI Responses ----------------------------------------------------------------------------
def responses_body(reply: Reply, usage: dict[str, Any], n: int, model: str) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reply.text:
        output.append(
            {
                "type": "message",
                "id": f"msg_{n}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for i, (name, args) in enumerate(reply.tool_calls):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{n}_{i}",
                "call_id": f"call_{n}_{i}",
                "name": name,
                "arguments": args,
                "status": "completed",
            }
        )
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "model": model,
        "output": output,
        "usage": usage,
    }


def responses_stream(reply: Reply, usage: dict[str, Any], n: int, body: dict[str, Any]) -> list[bytes]:
    full = responses_body(reply, usage, n, body.get("model", "fake-model"))
    seq = iter(range(10_000))
    out: list[bytes] = []

    def ev(kind: str, **data: Any) -> None:
        out.append(_sse(kind, {"type": kind, "sequence_number": next(seq), **data}))

    pending = {**full, "status": "in_progress", "output": [], "usage": None}
    ev("response.created", response=pending)
    ev("response.in_progress", response=pending)
    for idx, item in enumerate(full["output"]):
        if item["type"] == "message":
            ev(
                "response.output_item.added",
                output_index=idx,
                item={**item, "status": "in_progress", "content": []},
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            ev(
                "response.content_part.added",
                item_id=item["id"],
                output_index=idx,
                content_index=0,
                part=part,
            )
            for t in split(reply.text, reply.chunk):
                ev(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=idx,
                    content_index=0,
                    delta=t,
                    logprobs=[],
                )
            ev(
                "response.output_text.done",
                item_id=item["id"],
                output_index=idx,
                content_index=0,
                text=reply.text,
                logprobs=[],
            )
            ev(
                "response.content_part.done",
                item_id=item["id"],
                output_index=idx,
                content_index=0,
                part={**part, "text": reply.text},
            )
        else:
            ev(
                "response.output_item.added",
                output_index=idx,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            for t in split(item["arguments"], reply.chunk):
                ev("response.function_call_arguments.delta", item_id=item["id"], output_index=idx, delta=t)
            ev(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=idx,
                arguments=item["arguments"],
            )
        ev("response.output_item.done", output_index=idx, item=item)
    ev("response.completed", response=full)
    return out


WIRE = {"anthropic": anthropic_body, "chat": chat_body, "responses": responses_body}
STREAM = {"anthropic": anthropic_stream, "chat": chat_stream, "responses": responses_stream}
