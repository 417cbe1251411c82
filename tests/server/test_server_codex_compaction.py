"""Codex CLI compacts anyway: the proxy tells its summarising request and its summary message
(payloads shaped as Codex 0.171.0 sent them to the fake provider), archives the history at the first
and adds lightmem2's note to the second, the same bytes on every later request; fail-open."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fake_upstream import FakeUpstream
from server_harness import ServerThread, Stack

from lightmem_plugin.commands.status import run as status_run
from lightmem_plugin.commands.table import run_remote_line
from lightmem_plugin.config import Config
from lightmem_plugin.eviction.compaction_note import HEAD
from lightmem_plugin.eviction.record_store import RecordStore
from lightmem_plugin.faults import open_sink
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.server import codex_compaction
from lightmem_plugin.server.app import create_app
from lightmem_plugin.store.home import Home
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.wire.responses import codex_compaction as codex

SID = "01a24b05-dd5b-7a51-a892-95b678de0e07"
GOAL = "Read notes.txt and check the deploy settings."
TOKEN = "canary region: zebra-4417-kilo"
NOTES = "".join(f"setting {i}: replicas={i % 5 + 1} region=eu-{i % 3}\n" for i in range(250)) + TOKEN + "\n"
PROMPT = (  # Codex's templates/compact/prompt.md, as 0.169.0 and 0.171.0 send it
    "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM that "
    "will resume the task.\n\nInclude:\n- Current progress and key decisions made\n- Important context, "
    "constraints, or user preferences\n- What remains to be done (clear next steps)\n- Any critical data, "
    "examples, or references needed to continue\n\nBe concise, structured, and focused on helping the "
    "next LLM seamlessly continue the work.\n"
)
SUMMARY = "The user asked to read notes.txt; the settings were checked."


def _text(role: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", **extra, "role": role, "content": [{"type": "input_text", "text": text}]}


def head() -> list[dict[str, Any]]:
    return [
        _text(
            "developer", "<permissions instructions>\nFilesystem sandboxing ...</permissions instructions>"
        ),
        _text(
            "user", "<environment_context>\n  <cwd>/w</cwd>\n  <shell>bash</shell>\n</environment_context>"
        ),
        _text("user", GOAL, id="msg_01a24b05-e5b9"),
    ]


def turn() -> list[dict[str, Any]]:
    out = "Chunk ID: 45d637\nWall time: 0.0000 seconds\nProcess exited with code 0\nOutput:\n" + NOTES
    return [
        {
            "type": "function_call",
            "status": "completed",
            "id": "fc_1_0",
            "call_id": "call_1_0",
            "name": "exec_command",
            "arguments": json.dumps({"cmd": "cat notes.txt"}),
        },
        {"type": "function_call_output", "id": "fco_1", "call_id": "call_1_0", "output": out},
    ]


def body(items: list[dict[str, Any]], tools: bool = True) -> dict[str, Any]:
    listed = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}] if tools else []
    return {"model": "fake-model", "stream": True, "prompt_cache_key": SID, "tools": listed, "input": items}


def summary_item(summary: str = SUMMARY) -> dict[str, Any]:
    return _text("user", codex.SUMMARY_PREFIX + "\n" + summary, id="msg_01a24b05-e8c8")


def requests() -> list[dict[str, Any]]:
    """Codex's requests around one compaction: the turn, the summarising request (no tools), the
    rebuilt history, and the next call extending it."""
    after = [*head(), summary_item()]
    return [
        body(head()),
        body([*head(), *turn()]),
        body([*head(), *turn(), _text("user", PROMPT)], tools=False),
        body(after),
        body([*after, *turn()]),
    ]


# -- detection (pure) ------------------------------------------------------------------------------
def test_the_summarising_request_and_the_summary_message_are_told_by_codex_s_own_texts() -> None:
    calls = requests()
    assert [codex.is_compaction_request(b) for b in calls] == [False, False, True, False, False]
    assert [codex.summaries(b) for b in calls] == [[], [], [], [3], [3]]
    # a user who only quotes the words, or a summary prefix without Codex's line break, is not one
    assert not codex.is_compaction_request(body([_text("user", "why " + codex.PROMPT_HEAD)]))
    assert codex.summaries(body([_text("user", codex.SUMMARY_PREFIX + " no newline")])) == []
    assert not codex.is_compaction_request({"input": "a string input"}) and codex.summaries({}) == []


def test_the_history_archived_is_the_conversation_without_codex_s_own_context() -> None:
    chat = codex.history(requests()[2]["input"][:-1])
    assert [m["role"] for m in chat] == ["user", "assistant", "tool"]
    assert chat[0]["content"] == GOAL
    assert chat[1]["tool_calls"][0]["function"] == {
        "name": "exec_command",
        "arguments": '{"cmd": "cat notes.txt"}',
    }
    assert chat[2]["tool_call_id"] == "call_1_0" and chat[2]["content"].endswith(NOTES)


def test_the_note_goes_after_the_summary_and_keeps_codex_s_prefix() -> None:
    item = summary_item()
    noted = codex.with_note(item, "NOTE")
    assert noted["content"][0]["text"] == item["content"][0]["text"] + "\n\nNOTE"
    assert codex.is_summary(noted["content"][0]["text"]) and noted["id"] == item["id"]
    assert item["content"][0]["text"].endswith(SUMMARY)  # the host's item is left as it was
    plain = codex.with_note({"role": "user", "content": "S"}, "N")
    assert plain == {"role": "user", "content": "S\n\nN"}


# -- through the proxy -----------------------------------------------------------------------------
def _send(client: httpx.Client, url: str, payloads: list[dict[str, Any]]) -> None:
    for payload in payloads:
        resp = client.post(url, json=payload, headers={"authorization": "Bearer sk-test"})
        assert resp.status_code == 200, resp.text


@pytest.fixture
def proxied() -> Any:
    """Fake provider + proxy, the plugin with a ledger, a fault sink and the session records (as
    ``serve`` has them)."""
    fake = FakeUpstream()
    with ServerThread(fake.app) as up:
        cfg = Config()
        cfg.server.upstreams.openai = up.url + "/v1"
        plugin = LightMem(cfg, ledger=Ledger.default(), faults=open_sink())
        plugin.records = RecordStore(Home.default().records_dir, plugin.registry.redactor)
        app = create_app(plugin, commands=run_remote_line)
        with ServerThread(app) as px, httpx.Client(timeout=30) as client:
            yield Stack(fake, up.url, px.url, plugin, app), client


def test_the_proxy_archives_at_the_summarising_request_and_adds_the_same_note_after_it(proxied: Any) -> None:
    s, client = proxied
    calls = requests()
    _send(client, s.url("responses"), calls)
    seen = [r.body for r in s.fake.received]
    # the summarising request reaches the provider with Codex's prompt last and no note anywhere
    assert seen[2]["input"][-1] == calls[2]["input"][-1] and seen[2]["tools"] == []
    assert not any(HEAD in json.dumps(b) for b in seen[:3])
    # the first request after it: the note once, after the summary, in the summary message
    text = seen[3]["input"][3]["content"][0]["text"]
    assert text.startswith(calls[3]["input"][3]["content"][0]["text"] + "\n\n" + HEAD)
    assert json.dumps(seen[3]).count(HEAD[:40]) == 1
    note = text.split("\n\n", 1)[1]
    assert f'run: lightmem2 search "WORDS" --session {SID}' in note
    assert "run: lightmem2 recover KEY [--lines A:B]" in note and GOAL in note
    # the next request extends it: the same note, byte for byte
    assert seen[4]["input"][: len(seen[3]["input"])] == seen[3]["input"]
    # what the summary dropped: archived whole, found by search, the conversation names its key
    registry = LightMem().registry
    with s.plugin.searching() as index:
        hits = index.search("zebra-4417-kilo", session=SID)
    keys = {h.key for h in hits}
    originals = [registry.recover(k) for k in keys]
    assert any(o.endswith(NOTES) for o in originals), originals
    conversation = note.split("lightmem2 recover ")[2].split()[0]
    archived = registry.recover(conversation)
    assert GOAL in archived and "-> exec_command(" in archived


def test_the_ledger_and_status_name_the_host_s_compaction(proxied: Any) -> None:
    s, client = proxied
    _send(client, s.url("responses"), requests())
    for sess in s.plugin.sessions.values():
        sess.settle()
    assert s.plugin.ledger is not None
    rows = s.plugin.ledger.calls(SID)
    reasons = [r.break_reason for r in rows]
    assert reasons[2] == codex_compaction.SUMMARISING and reasons[3] == codex_compaction.AFTER, reasons
    assert reasons[4] is None
    # the summarising request sends no tools, so the provider read nothing of it from its cache:
    # the host's change, not a drop of the cache (no cold start counted)
    assert s.fake.reported[2]["cached"] == 0 and rows[2].cold_start is None
    out = status_run(s.plugin.ledger, s.plugin.registry, s.plugin.config, SID)
    assert "the host compacted: 1 time (its summarising call 3)" in out, out


def test_a_later_summary_gets_its_own_note_and_the_first_one_keeps_its_bytes(proxied: Any) -> None:
    s, client = proxied
    calls = requests()
    second = [*head(), summary_item("A second summary.")]
    _send(client, s.url("responses"), [*calls, body([*second[:-1], _text("user", PROMPT)], tools=False)])
    _send(client, s.url("responses"), [body(second), calls[3]])
    seen = [r.body for r in s.fake.received]
    first_note = seen[3]["input"][3]["content"][0]["text"]
    assert seen[7]["input"][3]["content"][0]["text"] == first_note
    newer = seen[6]["input"][3]["content"][0]["text"]
    assert newer.startswith(codex.SUMMARY_PREFIX + "\nA second summary.\n\n" + HEAD) and newer != first_note


def test_a_failure_sends_codex_s_request_as_it_came_and_is_counted(
    proxied: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, client = proxied

    def broken(*_: Any) -> Any:
        raise RuntimeError("archive unavailable")

    monkeypatch.setattr(codex_compaction, "precompact", broken)
    monkeypatch.setattr(codex_compaction, "notes_of", broken)
    calls = requests()
    _send(client, s.url("responses"), calls)
    seen = [r.body for r in s.fake.received]
    assert seen[2]["input"][-1] == calls[2]["input"][-1]  # the summarising request went on
    assert seen[3]["input"][3] == calls[3]["input"][3]  # the summary as Codex sent it, no note
    assert not any(HEAD in json.dumps(b) for b in seen)
    assert s.plugin.sessions[SID].fail.errors["host_compaction"] == 3
    assert s.plugin.ledger is not None
    out = status_run(s.plugin.ledger, s.plugin.registry, s.plugin.config, SID)
    assert "host_compaction" in out and "archive unavailable" in out, out
