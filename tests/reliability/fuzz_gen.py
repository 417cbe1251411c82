"""Generated hostile requests for the wire fuzz suite (``test_rel_fuzz_wire.py``).

Why a seeded mutator rather than hypothesis for the bulk: the suite sends over 100,000 requests, and
hypothesis spends more per example on generation and shrinking than the proxy spends on a request.
Each case starts from a valid request of its API (tool calls and outputs, images, cache marks, ids)
and gets 0-3 mutations: a node of the JSON tree replaced by a hostile value (wrong types, lone
surrogates, huge numbers, deep nesting, our own stub marker), a key dropped or a list reordered, or
the serialised bytes damaged (cut, a byte flipped, invalid UTF-8, a BOM, NaN, trailing garbage). The
same seed gives the same cases, so a failure names the seed and the case number that reproduce it.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from typing import Any

APIS = ("anthropic", "chat", "responses")
_PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108020000009077"
        "53de0000000c4944415408d763f8cfc000000301010018dd8db40000000049454e44ae426082"
    )
).decode()
LOG = "".join(f"2026-03-01 10:00:{i % 60:02d} INFO worker {i}: batch {i * 7} ok\n" for i in range(150))
FRAGMENTS = [
    "<html>", "</div>", "{", "}", "[", "]", '"', "\\", "null", "\ud800", "\udfff", "\x00", "\x1b[31m",
    "\r\n", "\n", "é", "漢", "[lightmem2: ", "<WORKDIR>", "<TIMESTAMP>", "data: ", "event: x\n\n",
    "Traceback (most recent call last):\n", "diff --git a/x b/x\n", "@@ -1 +1 @@\n", "ERROR ",
    "2026-03-01T10:00:00Z", "/home/alice/proj", "sk-ant-api03-" + "x" * 20,
]  # fmt: skip


def hostile_text(rng: random.Random, max_parts: int = 40) -> str:
    parts = [rng.choice(FRAGMENTS) if rng.random() < 0.7 else chr(rng.randrange(0x110000)) for _ in range(20)]
    return "".join(rng.choice(parts) for _ in range(rng.randrange(max_parts)))


def deep(rng: random.Random) -> Any:
    value: Any = hostile_text(rng, 5)
    for i in range(rng.choice([10, 100, 400])):  # deeper: damage_bytes writes it as text
        value = [value] if i % 2 else {"content": value}
    return value


def hostile_value(rng: random.Random) -> Any:
    pick = rng.randrange(16)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick == 2:
        return rng.choice([0, -1, 2**70, -(2**63), 7])
    if pick == 3:
        return rng.choice([1.5, 1e308, -0.0, 3.14])
    if pick == 4:
        return ""
    if pick == 5:
        return hostile_text(rng)
    if pick == 6:
        return LOG * rng.randrange(1, 4) + hostile_text(rng)
    if pick == 7:
        return []
    if pick == 8:
        return {}
    if pick == 9:
        return [hostile_value(rng) for _ in range(rng.randrange(4))]
    if pick == 10:
        return {rng.choice(["type", "role", "content", "text", "id", "x"]): hostile_value(rng)}
    if pick == 11:
        return deep(rng)
    if pick == 12:
        return rng.choice(["user", "assistant", "tool", "system", "developer", "function", "x"])
    if pick == 13:
        return rng.choice(["text", "image", "tool_use", "tool_result", "message", "function_call_output"])
    if pick == 14:
        return {"type": "text", "text": hostile_text(rng), "cache_control": {"type": "ephemeral"}}
    return "[lightmem2: " + hostile_text(rng, 6) + " key " + "ab" * 16 + "]"


def _tool_output(rng: random.Random, i: int) -> str:
    if rng.random() < 0.6:  # most outputs are short (and cheap); a long one is reduced and archived
        return rng.choice([f"ok {i}", hostile_text(rng), "exit 1\n" + hostile_text(rng, 10)])
    return rng.choice([LOG, LOG.replace("INFO", "ERROR", 3), hostile_text(rng) + LOG])


def seed_chat(rng: random.Random, session: int) -> dict[str, Any]:
    msgs: list[Any] = [
        {"role": "system", "content": f"You are agent {session}. Working directory: /home/u{session}/p"},
        {"role": "user", "content": f"task {rng.randrange(100)}: fix the build"},
    ]
    for i in range(rng.randrange(4)):
        cid = f"call_{session}_{i}"
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd":"make"}'},
                    }
                ],
            }
        )
        content: Any = _tool_output(rng, i)
        if rng.random() < 0.2:
            content = [
                {"type": "text", "text": content},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _PNG}},
            ]
        msgs.append({"role": "tool", "tool_call_id": cid, "content": content})
    body: dict[str, Any] = {"model": "m", "stream": rng.random() < 0.5, "messages": msgs}
    if rng.random() < 0.3:
        body["tools"] = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    return body


def seed_anthropic(rng: random.Random, session: int) -> dict[str, Any]:
    msgs: list[Any] = [{"role": "user", "content": f"task {rng.randrange(100)}: fix the build"}]
    for i in range(rng.randrange(4)):
        tid = f"toolu_{session}_{i}"
        msgs.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": tid, "name": "Bash", "input": {"c": "x"}}],
            }
        )
        inner: Any = _tool_output(rng, i)
        if rng.random() < 0.3:
            inner = [{"type": "text", "text": inner}]
        if rng.random() < 0.15:
            inner = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _PNG}}]
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tid, "content": inner}
        if rng.random() < 0.3:
            block["cache_control"] = {"type": "ephemeral"}
        msgs.append({"role": "user", "content": [block]})
    system: Any = f"You are agent {session}. Working directory: /home/u{session}/p"
    if rng.random() < 0.4:
        system = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
    return {
        "model": "claude",
        "max_tokens": 100,
        "stream": rng.random() < 0.5,
        "system": system,
        "metadata": {
            "user_id": f"user_a_account_b_session_0000000{session % 10}-0000-4000-8000-000000000000"
        },
        "messages": msgs,
    }


def seed_responses(rng: random.Random, session: int) -> dict[str, Any]:
    items: list[Any] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the build"}]}
    ]
    for i in range(rng.randrange(4)):
        cid = f"call_{session}_{i}"
        items.append(
            {"type": "function_call", "call_id": cid, "name": "shell", "arguments": '{"cmd":["make"]}'}
        )
        items.append({"type": "function_call_output", "call_id": cid, "output": _tool_output(rng, i)})
    return {
        "model": "gpt",
        "stream": rng.random() < 0.5,
        "instructions": f"You are agent {session}. Working directory: /home/u{session}/p",
        "prompt_cache_key": f"thread-{session}",
        "input": items,
    }


SEEDS = {"anthropic": seed_anthropic, "chat": seed_chat, "responses": seed_responses}


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every node (bounded: long texts are not walked)."""
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _nodes(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:8]):
            out += _nodes(v, (*path, i))
    return out


def _set(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = root
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return root


def mutate_tree(rng: random.Random, body: Any) -> Any:
    paths = _nodes(body)
    path = rng.choice(paths)
    kind = rng.randrange(5)
    if kind <= 2:
        return _set(body, path, hostile_value(rng))
    parent_path, node = path[:-1], body
    for step in parent_path:
        node = node[step]
    if kind == 3 and path and isinstance(node, dict):
        node.pop(path[-1], None)
    elif kind == 4 and path and isinstance(node, list):
        rng.shuffle(node)
        if node and rng.random() < 0.5:
            node.append(copy.deepcopy(node[0]))
    return body


def serialise(rng: random.Random, body: Any) -> bytes:
    if rng.random() < 0.5:
        return json.dumps(body).encode("ascii")  # lone surrogates escaped, as JSON allows
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":") if rng.random() < 0.5 else None)
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate as raw (invalid) UTF-8 bytes


def damage_bytes(rng: random.Random, raw: bytes) -> bytes:
    kind = rng.randrange(9)  # 8: a deep nesting, or an empty body
    at = rng.randrange(len(raw) + 1)
    if kind == 0:
        return raw[:at]
    if kind == 1 and raw:
        i = min(at, len(raw) - 1)
        return raw[:i] + bytes([raw[i] ^ (1 << rng.randrange(8))]) + raw[i + 1 :]
    if kind == 2:
        return raw[:at] + rng.choice([b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\x80"]) + raw[at:]
    if kind == 3:
        return b"\xef\xbb\xbf" + raw
    if kind == 4:
        return raw.replace(b'"stream"', b'"stream":NaN,"x"', 1)
    if kind == 5:
        return raw + rng.choice([b"garbage", b"}", b"\x00", b" \n"])
    if kind == 6:
        return rng.randbytes(rng.randrange(200))
    if kind == 7:
        return raw.replace(b'"model"', b'"model":1e999,"model"', 1)  # duplicate key, infinite number
    if kind == 8 and rng.random() < 0.5:
        depth = rng.choice([900, 5000, 50_000])  # past the recursion limit
        return raw.replace(b'"messages":', b'"messages":' + b"[" * depth + b"]" * depth + b',"x":', 1)
    return b""


def case(rng: random.Random, api: str) -> tuple[bytes, dict[str, str]]:
    """One request body for ``api`` and its headers."""
    body = SEEDS[api](rng, rng.randrange(12))
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        body = mutate_tree(rng, body)
    raw = serialise(rng, body)
    if rng.random() < 0.2:
        raw = damage_bytes(rng, raw)
    headers = {"content-type": "application/json", "authorization": "Bearer sk-fuzz"}
    if api == "anthropic":
        headers = {
            "content-type": "application/json",
            "x-api-key": "sk-fuzz",
            "anthropic-version": "2023-06-01",
        }
    if rng.random() < 0.3:
        headers["x-lightmem2-session"] = rng.choice(["fz-1", "fz-2", "", " ", "\x7f", "a" * 300])
    return raw, headers


def sse_case(rng: random.Random, api: str) -> list[bytes]:
    """An upstream SSE stream for ``api`` (valid events, then damage), cut into random chunks."""
    words = [rng.choice(["cd ", "<WORKDIR>", "/src", " at ", "<TIMESTAMP>", "<WORK", "DIR>", "\\", '"', "é"])]
    words += [rng.choice(FRAGMENTS) for _ in range(rng.randrange(6))]
    events: list[bytes] = []
    for w in words:
        if api == "anthropic":
            delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}}
            events.append(b"event: content_block_delta\ndata: " + json.dumps(delta).encode() + b"\n\n")
        elif api == "chat":
            chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]}
            events.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        else:
            ev = {"type": "response.output_text.delta", "sequence_number": len(events), "delta": w}
            events.append(b"event: response.output_text.delta\ndata: " + json.dumps(ev).encode() + b"\n\n")
    if rng.random() < 0.5:
        events.insert(rng.randrange(len(events) + 1), rng.choice([b": comment\n\n", b"data: {not json\n\n",
                      b"data: [DONE]\n\n", b"event: x\r\ndata: 1\r\n\r\n", b"\n\n", b"data:\xff\xfe\n\n",
                      b"id: 7\nretry: 10\ndata: {}\n\n"]))  # fmt: skip
    raw = b"".join(events)
    if rng.random() < 0.3:
        raw = damage_bytes(rng, raw)
    cuts = sorted(rng.randrange(len(raw) + 1) for _ in range(rng.randrange(6)))
    return [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
