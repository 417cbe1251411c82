"""Sidecar routes for the OpenClaw plugin, over real loopback HTTP."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_harness import ServerThread

from lightmem_plugin.commands.table import run_remote_line
from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.server.app import create_app, proxy_of
from lightmem_plugin.server.secret import HEADER, load_or_create

SYSTEM = "You are an agent.\nWorking directory: /home/alice/proj\nCurrent time: 2026-03-01T10:00:00Z"
BIG = "".join(
    f"2026-03-01 10:00:{i % 60:02d} INFO worker {i}: processed batch {i * 7} ok\n" for i in range(200)
)


@pytest.fixture
def sidecar() -> Any:
    plugin = LightMem(Config())
    app = create_app(plugin, commands=run_remote_line)
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=10) as client:
        client.headers[HEADER] = load_or_create()  # what the OpenClaw plugin sends (same LIGHTMEM2_HOME)
        yield client, plugin, app


def test_a_server_started_without_the_command_table_says_so(isolated_home: Path) -> None:
    """create_app without ``commands`` (a library caller): chat commands answer 503, the rest works."""
    with ServerThread(create_app(LightMem(Config()))) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        c.headers[HEADER] = load_or_create()
        r = c.post("/sidecar/command", json={"text": "/lightmem2 mode"})
        assert r.status_code == 503 and "lightmem2 serve" in r.json()["error"]
        assert c.get("/sidecar/health").json()["status"] == "ok"


def test_health(sidecar: Any) -> None:
    client, _, _ = sidecar
    body = client.get("/sidecar/health").json()
    assert body["status"] == "ok" and body["mode"] == "normal" and body["sessions"] == 0


def test_assemble_openai_form_stabilises_the_head(sidecar: Any) -> None:
    client, plugin, _ = sidecar
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "go"}]
    out = client.post("/sidecar/assemble", json={"sessionId": "oc-1", "messages": msgs, "tools": []}).json()
    assert "<WORKDIR>" in out["messages"][0]["content"] and "/home/alice" not in out["messages"][0]["content"]
    assert out["messages"][-1]["content"].endswith("[lightmem2 now: <TIMESTAMP>=2026-03-01T10:00:00Z]")
    assert list(plugin.sessions) == ["oc-1"]


def test_assemble_anthropic_form_returns_system_too(sidecar: Any) -> None:
    client, plugin, _ = sidecar
    body = {
        "sessionId": "oc-2",
        "format": "anthropic",
        "system": SYSTEM,
        "messages": [{"role": "user", "content": "go"}],
    }
    out = client.post("/sidecar/assemble", json=body).json()
    assert "<WORKDIR>" in str(out["system"])
    assert "lightmem2 now" in str(out["messages"][-1]["content"])
    # an eviction's break is priced on Anthropic's cache; the OpenAI form's session on a prefix cache
    client.post("/sidecar/assemble", json={"sessionId": "oc-2b", "messages": body["messages"]})
    assert plugin.sessions["oc-2"].evictor.break_cost.name == "anthropic"
    assert plugin.sessions["oc-2b"].evictor.break_cost.name == "prefix"


def test_assemble_takes_the_providers_wire_api_for_the_price_of_an_eviction(sidecar: Any) -> None:
    """OpenClaw sends chat-form messages whatever its provider; ``api`` names the provider's API."""
    client, plugin, _ = sidecar
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "go"}]
    client.post("/sidecar/assemble", json={"sessionId": "oc-a", "messages": msgs, "api": "anthropic"})
    assert plugin.sessions["oc-a"].evictor.break_cost.name == "anthropic"
    r = client.post("/sidecar/assemble", json={"sessionId": "oc-b", "messages": msgs, "api": "bedrock"})
    assert r.status_code == 400
    assert r.json()["error"] == 'api: got "bedrock", expected one of anthropic, chat, responses'


def test_ingest_reduces_once_and_recover_returns_the_original(sidecar: Any) -> None:
    client, _, _ = sidecar
    body = {"sessionId": "oc-3", "toolCallId": "call_1", "output": BIG}
    first = client.post("/sidecar/ingest", json=body).json()["output"]
    again = client.post("/sidecar/toolResult", json=body).json()["output"]
    assert first == again and len(first) < len(BIG)
    key = re.search(r"\b[0-9a-f]{12,32}\b", first)
    assert key, first
    text = client.post("/sidecar/recover", json={"key": key.group(0)}).json()["text"]
    assert text == BIG
    two = client.post("/sidecar/recover", json={"key": key.group(0), "lines": "2:3"}).json()["text"]
    assert two == "".join(BIG.splitlines(keepends=True)[1:3])


def test_ingest_list_output(sidecar: Any) -> None:
    client, _, _ = sidecar
    body = {
        "sessionId": "oc-3",
        "toolCallId": "c2",
        "output": [{"type": "text", "text": BIG}, {"type": "image"}],
    }
    out = client.post("/sidecar/ingest", json=body).json()["output"]
    assert len(out[0]["text"]) < len(BIG) and out[1] == {"type": "image"}


def test_after_turn_restores_and_records_usage(sidecar: Any) -> None:
    client, _, app = sidecar
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "go"}]
    client.post("/sidecar/assemble", json={"sessionId": "oc-4", "messages": msgs})
    usage = {"prompt_tokens": 1000, "prompt_tokens_details": {"cached_tokens": 900}}
    reply = {
        "role": "assistant",
        "content": "in <WORKDIR>",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "ls", "arguments": '{"p": "<WORKDIR>/x"}'}}
        ],
    }
    out = client.post(
        "/sidecar/afterTurn", json={"sessionId": "oc-4", "response": reply, "usage": usage}
    ).json()
    assert out["recorded"] is True
    assert out["response"]["content"] == "in /home/alice/proj"
    assert out["response"]["tool_calls"][0]["function"]["arguments"] == '{"p": "/home/alice/proj/x"}'
    assert proxy_of(app).usage.totals["oc-4"] == {"calls": 1, "input": 1000, "cached": 900, "written": 0}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/lightmem2 mode", "mode: normal"),
        ("/lightmem2 frobnicate", "invalid choice"),
        ("/lightmem2 recover 0123456789abcdef0123456789abcdef", "lightmem2:"),
    ],
)
def test_command(sidecar: Any, text: str, expected: str) -> None:
    client, _, _ = sidecar
    assert expected in client.post("/sidecar/command", json={"text": text}).json()["text"]


@pytest.mark.parametrize(
    ("route", "body", "status", "needle"),
    [
        ("/sidecar/assemble", {"messages": []}, 400, "sessionId"),
        ("/sidecar/assemble", {"sessionId": "x", "messages": "no"}, 400, "messages"),
        ("/sidecar/assemble", {"sessionId": "x", "messages": [], "format": "xml"}, 400, "format"),
        ("/sidecar/assemble", {"sessionId": "x", "messages": [], "tokenBudget": "95k"}, 400, "tokenBudget"),
        ("/sidecar/assemble", {"sessionId": "x", "messages": [], "tokenBudget": True}, 400, "tokenBudget"),
        ("/sidecar/assemble", {"sessionId": "x", "messages": [], "tokenBudget": 0}, 400, "tokenBudget"),
        ("/sidecar/assemble", {"sessionId": "x", "messages": [], "prompt": ["hi"]}, 400, "prompt"),
        ("/sidecar/ingest", {"sessionId": "x", "toolCallId": "c", "output": 5}, 400, "output"),
        ("/sidecar/command", {}, 400, "text"),
        ("/sidecar/afterTurn", {"sessionId": "x", "turn": [], "calls": [{"at": "1"}]}, 400, "calls[0]"),
        ("/sidecar/afterTurn", {"sessionId": "x", "turn": "no", "calls": []}, 400, "turn"),
        ("/sidecar/recover", {"key": "0123456789abcdef0123456789abcdef"}, 404, ""),
    ],
)
def test_bad_bodies(sidecar: Any, route: str, body: dict[str, Any], status: int, needle: str) -> None:
    client, _, _ = sidecar
    r = client.post(route, json=body)
    assert r.status_code == status and needle in r.json()["error"]


def test_not_json_is_a_400(sidecar: Any) -> None:
    client, _, _ = sidecar
    r = client.post("/sidecar/ingest", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not JSON" in r.json()["error"]


def test_search_finds_an_archived_line_for_the_agent_tool(sidecar: Any) -> None:
    client, plugin, _ = sidecar
    plugin.attach_search_index()
    log = (
        "\n".join(f"step {i}: ok" for i in range(400))
        + "\nE   KeyError: 'tenant_id' in billing/invoice.py:88\n"
        + "done\n" * 300
    )
    body = {"sessionId": "oc-search", "toolCallId": "c9", "output": log}
    assert client.post("/sidecar/ingest", json=body).json()["output"] != log
    text = client.post("/sidecar/search", json={"query": "tenant_id"}).json()["text"]
    assert "lightmem2 recover" in text and "tenant_id" in text
    literal = client.post("/sidecar/search", json={"query": "foo AND ("})  # literal text: no syntax error
    assert literal.status_code == 200 and "no archived line matches" in literal.json()["text"]
    bad = client.post("/sidecar/search", json={"query": "  "})
    assert bad.status_code == 400 and "empty search query" in bad.json()["error"]


def test_a_whole_turn_is_recorded_per_model_call(isolated_home: Path) -> None:
    """assemble with wholeTurn, then the turn's calls: one ledger row each, with the usage reported."""
    from lightmem_plugin.store.ledger import Ledger

    ledger = Ledger(isolated_home / "turns.sqlite3")
    plugin = LightMem(Config(), ledger=ledger)
    with ServerThread(create_app(plugin)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        c.headers[HEADER] = load_or_create()
        msgs = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "done"}]
        c.post("/sidecar/assemble", json={"sessionId": "oc-t", "messages": msgs, "wholeTurn": True})
        output = c.post("/sidecar/toolResult", json={"sessionId": "oc-t", "toolCallId": "c1", "output": BIG})
        call = {"id": "c1", "type": "function", "function": {"name": "exec", "arguments": "{}"}}
        turn = [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": output.json()["output"]},
            {"role": "assistant", "content": "ran"},
        ]
        usage = {"input_tokens": 3, "cache_read_input_tokens": 50, "cache_creation_input_tokens": 0}
        body = {
            "sessionId": "oc-t",
            "turn": turn,
            "calls": [{"at": 1, "usage": usage}, {"at": 3, "usage": usage}],
        }
        assert c.post("/sidecar/afterTurn", json={**body, "api": "anthropic"}).json() == {"recorded": 2}
    rows = ledger.calls("oc-t")
    assert [r.call_index for r in rows] == [1, 2] and all(r.real_cache_read == 50 for r in rows)
    assert rows[1].baseline_tokens > rows[1].input_tokens  # the tool result counted whole without us


def test_a_recover_called_through_openclaw_tool_search_comes_back_whole(sidecar: Any) -> None:
    client, _, _ = sidecar
    body = {"sessionId": "oc-v", "toolCallId": "t1", "output": BIG, "toolName": "exec", "arguments": "{}"}
    assert client.post("/sidecar/toolResult", json=body).json()["output"] != BIG  # reduced as usual
    args = json.dumps({"id": "openclaw:lightmem2:lightmem2_recover", "args": {"key": "k"}})
    body = {**body, "toolCallId": "t2", "toolName": "tool_call", "arguments": args}
    assert client.post("/sidecar/toolResult", json=body).json()["output"] == BIG
    catalog = {**body, "toolCallId": "t3", "toolName": "tool_search", "arguments": '{"query": "recover"}'}
    assert client.post("/sidecar/toolResult", json=catalog).json()["output"] == BIG


def test_a_lone_surrogate_in_an_ingested_output_comes_back_not_a_500(sidecar: Any) -> None:
    """Measured before: ``/sidecar/ingest`` with a lone surrogate (JavaScript strings may hold one, JSON
    escapes it as ``\\ud800``) answered 500. The output comes back as sent, or reduced with its
    original recoverable, escaped the same way."""
    client, _, _ = sidecar
    small = "x \ud800 y"
    big = BIG + "half a pair: \udfff\n" + BIG
    answers = []
    for call, output in (("s1", small), ("s2", big), ("s3", [{"type": "text", "text": small}])):
        raw = json.dumps({"sessionId": "oc-sur", "toolCallId": call, "output": output}).encode()
        r = client.post("/sidecar/ingest", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
        r.content.decode("utf-8")  # strict: valid UTF-8 on the wire
        answers.append(r.json()["output"])
    assert answers[0] == small and answers[2] == [{"type": "text", "text": small}]
    key = re.search(r"\b[0-9a-f]{12,32}\b", answers[1])
    assert key and len(answers[1]) < len(big), answers[1][:200]
    assert client.post("/sidecar/recover", json={"key": key.group(0)}).json()["text"] == big


def test_json_nested_past_the_parser_is_a_400_not_a_500(sidecar: Any) -> None:
    """Found by the wire fuzz suite: a body nested deeper than json.loads recurses escaped as a 500."""
    client, _, _ = sidecar
    raw = b'{"sessionId": "oc-1", "messages": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    for route in ("/sidecar/assemble", "/sidecar/ingest", "/sidecar/recover"):
        r = client.post(route, content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 400 and "nested deeper" in r.json()["error"], (route, r.text[:200])


def test_a_search_query_with_a_lone_surrogate_is_a_400_not_a_500(sidecar: Any) -> None:
    """Found by the wire fuzz suite: the index stores UTF-8, and encoding the query raised (500)."""
    client, _, _ = sidecar
    raw = json.dumps({"query": "batch \udfff"}).encode()
    r = client.post("/sidecar/search", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and "lone surrogate '\\udfff' at position 6" in r.json()["error"], r.text


def test_a_session_id_with_a_lone_surrogate_is_a_400_not_a_500(isolated_home: Path) -> None:
    """Found by the wire fuzz suite: with a ledger, a session id that UTF-8 cannot encode raised inside
    the ledger's query (500)."""
    from lightmem_plugin.store.ledger import Ledger

    plugin = LightMem(Config(), ledger=Ledger(isolated_home / "ledger.sqlite3"))
    with ServerThread(create_app(plugin)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        c.headers[HEADER] = load_or_create()
        raw = json.dumps({"sessionId": "oc-\ud800", "toolCallId": "c1", "output": BIG}).encode()
        for route in ("/sidecar/ingest", "/sidecar/assemble", "/sidecar/afterTurn"):
            r = c.post(route, content=raw, headers={"content-type": "application/json"})
            assert r.status_code == 400 and "sessionId: a lone surrogate" in r.json()["error"], (
                route,
                r.text,
            )
