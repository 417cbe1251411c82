"""OpenClaw compacts anyway: the sidecar archives the history before, and keeps the note for after."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from server_harness import ServerThread

from lightmem_plugin.commands.table import run_remote_line
from lightmem_plugin.config import Config
from lightmem_plugin.eviction.compaction_note import MAX_CHARS
from lightmem_plugin.eviction.record_store import RecordStore
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.server.app import create_app
from lightmem_plugin.server.secret import HEADER, load_or_create
from lightmem_plugin.store.home import Home

OUTPUT = "collected 3 items\nE   KeyError: 'quuxly_flag' in settings.py:41\n1 failed, 2 passed\n"
GOAL = "Find why quuxly_flag is missing from the settings and fix the loader"


def history(goal: str = GOAL) -> list[dict[str, Any]]:
    """The chat form the plugin sends (toChat of OpenClaw's messages): a goal, a test run, an answer."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "exec", "arguments": '{"command":"pytest"}'},
    }
    return [
        {"role": "user", "content": goal},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": OUTPUT}]},
        {"role": "assistant", "content": "The loader skips unknown keys."},
    ]


@pytest.fixture
def sidecar() -> Any:
    plugin = LightMem(Config())
    plugin.records = RecordStore(Home.default().records_dir, plugin.registry.redactor)
    app = create_app(plugin, commands=run_remote_line)
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        client.headers[HEADER] = load_or_create()
        yield client


def test_precompact_archives_what_the_runtime_will_summarise_for_search_and_recover(sidecar: Any) -> None:
    done = sidecar.post("/sidecar/precompact", json={"sessionId": "oc-7", "messages": history()}).json()
    assert done["archived"] == 1 and len(done["conversation"]) == 32
    text = sidecar.post("/sidecar/search", json={"query": "quuxly_flag"}).json()["text"]
    keys = {
        line.split("lightmem2 recover ")[1].split()[0]
        for line in text.splitlines()
        if "lightmem2 recover " in line
    }
    originals = [sidecar.post("/sidecar/recover", json={"key": k}).json()["text"] for k in keys]
    assert OUTPUT in originals  # byte-exact, found by a word it held
    conversation = sidecar.post("/sidecar/recover", json={"key": done["conversation"]}).json()["text"]
    assert GOAL in conversation and "-> exec(" in conversation and "The loader skips" in conversation


def test_the_note_after_a_compaction_has_the_record_and_the_tools_and_never_changes(sidecar: Any) -> None:
    key = sidecar.post("/sidecar/precompact", json={"sessionId": "oc-8", "messages": history()}).json()[
        "conversation"
    ]
    body = {"sessionId": "oc-8", "summary": "The user asked about a missing flag.", "conversation": key}
    note = sidecar.post("/sidecar/compacted", json=body).json()["note"]
    assert 'lightmem2_search(query="WORDS")' in note  # OpenClaw's tool takes no session
    assert f'lightmem2_recover(key="{key}"' in note and 'lightmem2_recover(key="KEY"' in note
    assert "quuxly_flag" in note and "Session record" in note and len(note) <= MAX_CHARS
    # the session goes on and its record changes: the note for this summary stays the same bytes
    later = history("Now also document the loader in README.md")
    sidecar.post("/sidecar/precompact", json={"sessionId": "oc-8", "messages": later})
    assert sidecar.post("/sidecar/compacted", json={**body, "conversation": None}).json()["note"] == note
    newer = sidecar.post("/sidecar/compacted", json={**body, "summary": "A second summary."}).json()["note"]
    assert newer != note and "README.md" in newer  # a new compaction: the record as it is now


def test_a_session_without_a_record_still_learns_how_to_search(sidecar: Any) -> None:
    note = sidecar.post("/sidecar/compacted", json={"sessionId": "new", "summary": "s"}).json()["note"]
    assert "lightmem2_search" in note and "Session record" not in note


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("/sidecar/compacted", {"sessionId": "s"}, "summary"),
        ("/sidecar/compacted", {"sessionId": "s", "summary": "x", "conversation": "../etc"}, "conversation"),
        ("/sidecar/precompact", {"sessionId": "s", "messages": "x"}, "messages"),
        ("/sidecar/precompact", {"messages": []}, "sessionId"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(
    sidecar: Any, route: str, body: dict[str, Any], field: str
) -> None:
    r = sidecar.post(route, json=body)
    assert r.status_code == 400 and r.json()["error"].startswith(field)


def test_the_routes_want_the_secret(sidecar: Any) -> None:
    del sidecar.headers[HEADER]
    assert sidecar.post("/sidecar/compacted", json={"sessionId": "s", "summary": "x"}).status_code == 401


def _reads(n: int) -> list[dict[str, Any]]:
    """A goal, then ``n`` reads of ~600 tokens each, every line distinct (the chat form the plugin sends)."""
    out: list[dict[str, Any]] = [{"role": "user", "content": "Read every shard and find the bad quota."}]
    for k in range(n):
        args = f'{{"path":"shard{k}.txt"}}'
        call = {"id": f"call_{k}", "type": "function", "function": {"name": "read", "arguments": args}}
        text = "\n".join(
            f"shard {k} row {j}: owner=team-{(k * 7 + j) % 13} quota={k * 100 + j}" for j in range(45)
        )
        out.append({"role": "assistant", "content": f"Reading shard {k}.", "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"call_{k}", "content": text})
    return out


@pytest.mark.parametrize("budget", [None, 9_000])
def test_openclaw_s_token_budget_is_the_threshold_aggressive_mode_compacts_under(budget: int | None) -> None:
    """OpenClaw compacts past its model's window less a reserve, and tells the messages' budget at
    every assemble: told 9,000 (a small model's), aggressive mode compacts once the history nears it;
    not told, it keeps the 200k-window figure and leaves this history alone."""
    cfg = Config(mode="aggressive")
    cfg = cfg.model_copy(update={"eviction": cfg.eviction.model_copy(update={"batchTurns": 1})})
    plugin = LightMem(cfg)
    app = create_app(plugin, commands=run_remote_line)
    stubbed: list[int] = []
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        client.headers[HEADER] = load_or_create()
        for n in range(1, 16):
            body: dict[str, Any] = {"sessionId": "oc-budget", "messages": _reads(n), "wholeTurn": True}
            if budget is not None:
                body["tokenBudget"] = budget
            sent = client.post("/sidecar/assemble", json=body).json()["messages"]
            stubbed.append(sum("archived as" in str(m["content"]) for m in sent if m["role"] == "tool"))
    compactions = plugin.session("oc-budget").evictor.state.compactions
    if budget is None:
        assert stubbed == [0] * 15 and compactions == []
    else:
        assert len(compactions) >= 1, stubbed
        first = compactions[0]
        # it came once the estimate passed the budget less its margin (at most 41% of it), and not before
        assert (
            first.limit == budget
            and budget * 0.59 < first.before <= budget
            and first.after < first.before / 2
        )
        assert stubbed[first.call - 2] == 0 and stubbed[first.call - 1] > 0


def test_the_turn_s_prompt_is_read_for_its_goal_and_never_sent_back() -> None:
    """``prompt`` (OpenClaw's, which follows the assembled history) becomes the evictor's upcoming
    message for that call only: the next assemble without one forgets it."""
    plugin = LightMem(Config(mode="normal"))
    app = create_app(plugin, commands=run_remote_line)
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        client.headers[HEADER] = load_or_create()
        body = {"sessionId": "oc-prompt", "messages": history(), "wholeTurn": True}
        told = client.post("/sidecar/assemble", json={**body, "prompt": "Now document the loader"}).json()
        upcoming = plugin.session("oc-prompt").evictor.upcoming
        assert (
            upcoming is not None and upcoming.role == "user" and upcoming.text() == "Now document the loader"
        )
        assert len(told["messages"]) == len(history())
        client.post("/sidecar/assemble", json=body)
        assert plugin.session("oc-prompt").evictor.upcoming is None
