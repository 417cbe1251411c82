"""Short tool call ids: what the model receives pairs every result with its call, in fewer tokens."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.config import Config
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.prefix import call_ids
from lightmem_plugin.prefix.call_ids import SHORT_ID_CHARS, short_id
from lightmem_plugin.server.proxy import transform
from lightmem_plugin.tokens import count_tokens

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "tests" / "data" / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz"
PAYLOADS = ROOT / "tests" / "codecs" / "payloads"


def pairs(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(call id, what answers it) in order: each call's id and the id its result names."""
    out = []
    for m in messages:
        for call in m.get("tool_calls") or []:
            out.append(("call", call["id"]))
        if m.get("role") == "tool":
            out.append(("result", m["tool_call_id"]))
    return out


def test_the_short_id_is_the_same_in_every_process_and_release() -> None:
    """A pure function of the host's id: a hook, another gateway process or a restart spells it the
    same (pinned: a change here changes every id a running session has sent, breaking its cache)."""
    assert short_id("call_00_4OSig1xtPHgQm7hjajeqP6tY") == "e7cvvh77p"
    assert short_id("toolu_01QRx5PWxA2o4PEouZuogiWA") == "hwjpgi85g"
    code = "from lightmem_plugin.prefix.call_ids import short_id; print(short_id('toolu_01QRx5PWxA2o4PEouZuogiWA'))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == "hwjpgi85g"
    ids = [short_id(f"call_{i}") for i in range(2000)]
    assert all(len(i) == SHORT_ID_CHARS and set(i) <= set(call_ids._DIGITS) for i in ids)
    assert len(set(ids)) == len(ids)


def test_a_real_session_sends_every_pair_with_short_ids_and_fewer_tokens() -> None:
    """On a recorded session: each request keeps the order and pairing of calls and results, every id
    is short, the same host id is spelled the same on every call, and ids cost a fraction."""
    calls = load_trace(TRACE).calls
    s = LightMem(Config()).session("s")
    spelled: dict[str, str] = {}
    host_tokens = sent_tokens = 0
    for c in calls:
        out = s.before_model_call(copy.deepcopy(c.prompt))
        host, sent = pairs(c.prompt), pairs(out)
        assert [k for k, _ in host] == [k for k, _ in sent]
        for (_, h), (_, got) in zip(host, sent, strict=True):
            assert len(got) == SHORT_ID_CHARS and got != h
            assert spelled.setdefault(h, got) == got  # one host id, one spelling, on every call
        host_tokens += sum(count_tokens(h) for _, h in host)
        sent_tokens += sum(count_tokens(got) for _, got in sent)
    assert len(set(spelled.values())) == len(spelled)  # distinct calls stay distinct
    assert sent_tokens < host_tokens / 2, (sent_tokens, host_tokens)


def test_off_in_the_config_the_host_ids_go_out() -> None:
    calls = load_trace(TRACE).calls
    s = LightMem(Config.model_validate({"stabilizer": {"shortCallIds": False}})).session("s")
    out = s.before_model_call(copy.deepcopy(calls[5].prompt))
    assert pairs(out) == pairs(calls[5].prompt)


def test_two_host_ids_with_one_short_id_leave_the_request_as_the_host_sent_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Respelling must never pair a result with the wrong call: on a (forced) clash of short ids
    the request keeps the host's ids."""
    prompt = copy.deepcopy(load_trace(TRACE).calls[5].prompt)
    monkeypatch.setattr(call_ids, "short_id", lambda host_id: "samesame0")
    out = LightMem(Config()).session("s").before_model_call(prompt)
    assert pairs(out) == pairs(prompt)


def test_anthropic_blocks_keep_their_layout_and_server_tools_their_ids() -> None:
    """Through the proxy on the Anthropic wire: a tool_use and its tool_result get the same short id,
    every other byte of the block is as the host sent it (string, list or absent content), and a
    server tool's id (the provider's record) is untouched."""
    payload = json.loads((PAYLOADS / "anthropic_claude_code.json").read_text())
    session = LightMem(Config()).session("a")
    out = json.loads(
        transform(session, "anthropic", copy.deepcopy(payload), json.dumps(payload).encode()).body
    )
    seen = 0
    for sent, host in zip(out["messages"], payload["messages"], strict=True):
        if not isinstance(host["content"], list):
            continue
        assert len(sent["content"]) >= len(host["content"])  # the stabilizer may append its tail block
        for got, block in zip(sent["content"], host["content"], strict=False):
            if block.get("type") == "tool_use":
                assert got == {**block, "id": short_id(block["id"])}
                seen += 1
            elif block.get("type") == "tool_result":
                assert got == {**block, "tool_use_id": short_id(block["tool_use_id"])}
                seen += 1
            elif block.get("type") == "server_tool_use":
                assert got == block
    assert seen == 8


def test_the_responses_api_keeps_the_providers_call_ids() -> None:
    """An output item may answer a call the provider stored (previous_response_id): never respelled."""
    payload = json.loads((PAYLOADS / "openai_responses_codex.json").read_text())
    session = LightMem(Config()).session("r")
    out = json.loads(
        transform(session, "responses", copy.deepcopy(payload), json.dumps(payload).encode()).body
    )
    ids = [i.get("call_id") for i in out["input"] if isinstance(i, dict) and "call_id" in i]
    assert ids and ids == [
        i.get("call_id") for i in payload["input"] if isinstance(i, dict) and "call_id" in i
    ]


def test_a_repeat_names_its_call_as_the_model_reads_it_and_a_hook_names_none() -> None:
    """In a request, a repeat names the earlier call's short id (in that very request); ingested by a
    hook, outside any request, the spelling the model will read is not known: no call is named."""
    same = "\n".join(f"row {i}: the same listing" for i in range(80))
    prompt: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for n in range(2):
        prompt.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"call_{n}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
                ],
            }
        )
        prompt.append({"role": "tool", "tool_call_id": f"call_{n}", "content": same})
    out = LightMem(Config()).session("s").before_model_call(prompt)
    assert f"identical to the output of tool call {out[1]['tool_calls'][0]['id']} (" in out[4]["content"]
    hooked = LightMem(Config()).session("h")
    hooked.ingest_tool_result("call_0", same)
    assert "identical to an earlier tool output in this conversation" in hooked.ingest_tool_result(
        "call_1", same
    )


def test_what_an_eviction_batch_archived_names_each_call_as_the_model_read_it(tmp_path: Path) -> None:
    """Recovering an evicted batch gives back outputs headed by the ids of the calls as the request
    around the stub spelled them, not the host's ids the model never read."""
    import re

    sys.path.insert(0, str(ROOT / "tests" / "eviction"))
    from test_eviction_evictor import session_messages

    from lightmem_plugin.store.registry import Registry

    cfg = Config.model_validate(
        {"mode": "aggressive", "eviction": {"expectedRemainingCalls": 500, "keepRecentTurns": 2}}
    )
    lm = LightMem(config=cfg, registry=Registry(tmp_path / "reg"))
    s = lm.session("ev")
    full = session_messages(24)
    sent: list[dict[str, Any]] = []
    for t in range(6, len(full) + 1, 2):
        sent = s.before_model_call(full[:t])
    assert s.evictor.state.batches, "no eviction batch fired"
    read = {i for _, i in pairs(sent)}
    named = set()
    for batch in s.evictor.state.batches:
        named |= set(
            re.findall(r"=== lightmem2: output of tool call (\S+) ===", lm.registry.recover(batch.key))
        )
    assert named and named <= read, (named, read)
