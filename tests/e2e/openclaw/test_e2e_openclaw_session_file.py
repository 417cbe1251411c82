"""A session recorded from the real OpenClaw reads back through ``lightmem2 replay`` as what was sent.

OpenClaw 2026.9.6 keeps its sessions in SQLite (``agents/<agent>/agent/openclaw-agent.sqlite``,
table ``transcript_events``); a session's ``event_json`` rows in ``seq`` order, one per line, are the
session file older releases wrote to ``agents/<agent>/sessions/<id>.jsonl``. The test runs
``openclaw agent --local`` (no lightmem2: the provider gets what OpenClaw has) over a scripted session
with parallel tool calls, exports the session that way, and checks, on both wire APIs:

- ``lightmem2 replay STORE`` (the SQLite store OpenClaw wrote) gives the figures of the file;
- ``lightmem2 replay FILE --json --mode vanilla --dump-requests DIR`` counts one call per model request
  the fake provider received, and the recorded hit rate is the provider's;
- each replayed prompt is the request the provider received, in chat form, less what a session file
  does not hold: the system prompt, the envelope OpenClaw puts around the user's text (a ``[date]``
  prefix, a ``Runtime:`` line), its internal-context message at the end of each request; tool call
  ids are matched one to one (OpenClaw strips their punctuation on the wire);
- each call's usage is what the provider reported.

``LIGHTMEM2_E2E_RECORD_OPENCLAW=DIR`` also writes the anonymised session files to DIR: that is how
``tests/data/openclaw/`` was made (see its README).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fake_wire import Reply
from openclaw_e2e import VERSION, OpenClawEnv

from lightmem_plugin.measure.traces import load_trace

NOTES = "apple\nbanana\ncherry\n"
TURNS = [
    (
        "please read notes.txt",
        [Reply(text="", tool_calls=[("read", '{"path":"notes.txt"}')]), Reply("Three fruits.")],
    ),
    (
        "count its lines and find the banana",
        [
            Reply(
                text="Running both.",
                tool_calls=[
                    ("exec", '{"command":"wc -l notes.txt"}'),
                    ("exec", '{"command":"grep -n an notes.txt"}'),
                ],
            ),
            Reply("3 lines; banana is on line 2."),
        ],
    ),
    ("thanks", [Reply("You're welcome.")]),
]
CALLS = sum(len(replies) for _, replies in TURNS)
MODEL_PATHS = ("/v1/chat/completions", "/v1/messages")
ENVELOPE = re.compile(r"^\[[^\]\n]*\] (.*?)(?:\n\nRuntime: .*)?$", re.DOTALL)
INTERNAL = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"


def export_session(env: OpenClawEnv) -> tuple[str, list[str]]:
    """The one session's id and its transcript events as JSON lines, read from OpenClaw's store."""
    db = env.root / "state" / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT session_id, event_json FROM transcript_events ORDER BY session_id, seq"
        ).fetchall()
    assert {r[0] for r in rows} and len({r[0] for r in rows}) == 1, {r[0] for r in rows}
    assert all(r[1] is not None for r in rows), (
        "a compressed event row (event_zstd): the session grew too large"
    )
    return rows[0][0], [r[1] for r in rows]


def _text(content: Any) -> Any:
    """Chat content with one text part as the string it stands for."""
    if isinstance(content, list) and len(content) == 1 and content[0].get("type") == "text":
        return content[0]["text"]
    return content


def _user(content: Any) -> dict[str, Any]:
    text = _text(content)
    if isinstance(text, str):
        match = ENVELOPE.match(text)
        assert match, f"no [date] envelope around the user's text: {text[:200]!r}"
        text = match.group(1)
    return {"role": "user", "content": text}


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def chat_form(api: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages in chat form, less the system prompt and the internal context."""
    out: list[dict[str, Any]] = []
    for m in body["messages"]:
        content = m.get("content")
        if m["role"] == "system":
            continue
        if api == "chat":
            if m["role"] == "user":
                out.append(content if INTERNAL in json.dumps(content) else _user(content))
            elif m["role"] == "assistant":
                message = {"role": "assistant", "content": _text(content) or ""}
                calls = [
                    {"id": c["id"], "type": "function", "function": dict(c["function"])}
                    for c in m.get("tool_calls") or []
                ]
                out.append({**message, "tool_calls": calls} if calls else message)
            else:
                out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": _text(content)})
            continue
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if m["role"] == "assistant":
            texts = [{"type": "text", "text": b["text"]} for b in blocks if b["type"] == "text"]
            calls = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": b["name"], "arguments": _compact(b["input"])},
                }
                for b in blocks
                if b["type"] == "tool_use"
            ]
            message = {"role": "assistant", "content": _text(texts) or ""}
            out.append({**message, "tool_calls": calls} if calls else message)
            continue
        for b in blocks:
            if b["type"] == "tool_result":
                out.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": _text(b["content"])})
            elif INTERNAL in b.get("text", ""):
                out.append({"role": "user", "content": b["text"]})
            else:
                out.append(_user([{"type": "text", "text": b["text"]}]))
    assert out and INTERNAL in json.dumps(out[-1]), "OpenClaw's internal context no longer ends the request"
    return out[:-1]


def _ids(messages: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    for m in messages:
        found += [c["id"] for c in m.get("tool_calls") or []]
        if m["role"] == "tool":
            found.append(m["tool_call_id"])
    return found


def with_ids(messages: list[dict[str, Any]], names: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        m = dict(m)
        if "tool_calls" in m:
            m["tool_calls"] = [{**c, "id": names[c["id"]]} for c in m["tool_calls"]]
        if m["role"] == "tool":
            m["tool_call_id"] = names[m["tool_call_id"]]
        out.append(m)
    return out


def record(env: OpenClawEnv) -> list[tuple[str, dict[str, Any]]]:
    (env.workspace / "notes.txt").write_text(NOTES, encoding="utf-8")
    for message, replies in TURNS:
        env.fake.queue(*replies)
        env.agent(message)
    assert not env.fake.script, "OpenClaw made fewer model calls than scripted"
    return [
        ("anthropic" if r.path.endswith("/messages") else "chat", r.body)
        for r in env.fake.received
        if r.path in MODEL_PATHS
    ]


@pytest.mark.parametrize("api", ["openai-completions", "anthropic-messages"])
def test_a_recorded_session_replays_as_sent(make_env: Any, tmp_path: Path, api: str) -> None:
    env = make_env(f"session-{api}", plugin=False, api=api)
    requests = record(env)
    assert len(requests) == CALLS == len(env.fake.reported)
    session_id, lines = export_session(env)
    path = tmp_path / f"{session_id}.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")

    dumps = tmp_path / "dumps"
    done = env.lightmem2_cli(
        "replay", str(path), "--json", "--mode", "vanilla", "--dump-requests", str(dumps)
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    summary = json.loads(done.stdout)
    reported = env.fake.reported
    assert (summary["sessions"], summary["calls"]) == (1, CALLS)
    hit = sum(r["cached"] for r in reported) / sum(r["prompt"] for r in reported)
    assert summary["recorded_hit_rate"] == round(hit, 4)

    prompts = [
        json.loads(line)["messages"] for line in (dumps / f"{session_id}.jsonl").read_text().splitlines()
    ]
    assert len(prompts) == CALLS
    for n, (prompt, (wire_api, body)) in enumerate(zip(prompts, requests, strict=True)):
        sent = chat_form(wire_api, body)
        ours, theirs = _ids(prompt), _ids(sent)
        names = dict(zip(ours, theirs, strict=True))
        assert len(set(names.values())) == len(names), names  # one to one
        assert with_ids(prompt, names) == sent, f"call {n + 1}"

    # the store OpenClaw itself wrote replays to the same figures as the session written out of it
    store = env.root / "state" / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    direct = env.lightmem2_cli("replay", str(store), "--json", "--mode", "vanilla")
    assert direct.returncode == 0, direct.stderr.decode()[-2000:]
    same = ("sessions", "calls", "K", "recorded_K", "hit_rate", "recorded_hit_rate", "input_tokens")
    from_store = json.loads(direct.stdout)
    assert {k: from_store[k] for k in same} == {k: summary[k] for k in same}

    trace = load_trace(path)
    assert (trace.kind, trace.id, trace.model) == ("openclaw", session_id, "fake-model")
    assert trace.provider == ("anthropic" if api == "anthropic-messages" else "openai")
    assert [(c.prompt_tokens, c.cached_tokens) for c in trace.calls] == [
        (r["prompt"], r["cached"]) for r in reported
    ]
    if api == "anthropic-messages":
        assert [c.cache_creation_input_tokens for c in trace.calls] == [r["written"] for r in reported]
    times = [c.at for c in trace.calls]
    assert all(t is not None for t in times) and times == sorted(times)
    last = trace.calls[1].prompt[-1]  # the read, whole
    assert (last["role"], last["content"]) == ("tool", NOTES)

    target = os.environ.get("LIGHTMEM2_E2E_RECORD_OPENCLAW")
    if target:
        anonymised = path.read_text(encoding="utf-8").replace(str(env.root), "/home/USER")
        (Path(target) / f"openclaw-{VERSION}-{api}.jsonl").write_text(anonymised, encoding="utf-8")
