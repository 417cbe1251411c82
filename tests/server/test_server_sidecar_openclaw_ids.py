"""The sequence OpenClaw 2026.9.6's Gateway sends the sidecar for tool calls, replayed over HTTP.

Recorded from the real host (``tests/e2e/openclaw/test_e2e_openclaw_gateway_tools.py``): within a
turn the tool-result middleware posts ``/sidecar/toolResult`` with the id the model sent
(``call_1_0``) and the output as text parts; on every later turn ``assemble()`` posts the transcript,
where the same call is spelled ``call10`` and the output is what ``tool_result_persist`` stored
(the reduced text when the middleware reduced it, else the original). Before the fix the second
sighting of a 897-char output became "identical to the output of tool call call_1_0": itself.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from server_harness import ServerThread

from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.server import secret
from lightmem_plugin.server.app import create_app

SID = "b6eafe38-2af4-4331-af8e-d9c1209de228"
GREP = "".join(
    f"{i + 1}:note {i}: the {'read' if i % 2 else 'write'} cache for shard {i} keeps {i * 37 % 101} entries\n"
    for i in range(24)
    if i % 3 != 2
)
ROWS = "".join(f"row {i}: compiled module ok\n" for i in range(1, 401))
SELF_REF = re.compile(r"identical to the output of tool call (\S+) ")


@pytest.fixture
def client() -> Any:
    app = create_app(LightMem(Config()))
    headers = {secret.HEADER: secret.load_or_create()}  # what the OpenClaw plugin sends
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=10, headers=headers) as c:
        yield c


def _call(cid: str, command: str) -> dict[str, Any]:
    fn = {"name": "exec", "arguments": f'{{"command":"{command}"}}'}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": cid, "type": "function", "function": fn}],
    }


def _result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": [{"type": "text", "text": text}]}


def _said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def _tool_result(client: httpx.Client, cid: str, text: str) -> str:
    body = {"sessionId": SID, "toolCallId": cid, "output": [{"type": "text", "text": text}]}
    out: str = client.post("/sidecar/toolResult", json=body).json()["output"][0]["text"]
    return out


def _assemble(client: httpx.Client, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = client.post(
        "/sidecar/assemble", json={"sessionId": SID, "messages": messages}
    ).json()["messages"]
    return out


def _tool_texts(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"][0]["text"] for m in messages if m["role"] == "tool"}


def test_a_tool_output_seen_by_the_middleware_then_by_assemble_keeps_its_bytes(client: httpx.Client) -> None:
    # turn 1: the middleware sees call_1_0 (under every trigger: left as it is)
    assert _tool_result(client, "call_1_0", GREP) == GREP
    history = [
        {"role": "user", "content": "where is the cache configured?"},
        _call("call10", "grep -n cache notes.txt"),
    ]
    history += [_result("call10", GREP), _said("It is in notes.txt.")]
    # turn 2: assemble replays it as call10; then a large output the middleware reduces
    turn2 = _assemble(client, [*history, {"role": "user", "content": "and count the rows"}])
    assert _tool_texts(turn2) == {"call10": GREP}
    rows = _tool_result(client, "call_3_0", ROWS)
    assert len(rows) < len(ROWS) // 2 and "archived as" in rows
    history += [{"role": "user", "content": "and count the rows"}, _call("call30", "seq ...")]
    history += [_result("call30", rows), _said("Counted.")]  # tool_result_persist stored the reduced form
    # turn 3: the same grep again, a real repeat: a reference to call10, as the model reads that id
    turn3 = _assemble(client, [*history, {"role": "user", "content": "grep it once more"}])
    assert _tool_texts(turn3) == {"call10": GREP, "call30": rows}
    again = _tool_result(client, "call_5_0", GREP)
    ref = SELF_REF.search(again)
    assert ref is not None and ref.group(1) == "call10", again
    history += [{"role": "user", "content": "grep it once more"}, _call("call50", "grep -n cache notes.txt")]
    history += [_result("call50", again), _said("Same as before.")]
    turn4 = _assemble(client, [*history, {"role": "user", "content": "thanks"}])
    assert _tool_texts(turn4) == {"call10": GREP, "call30": rows, "call50": again}
    assert turn4[: len(turn3) - 1] == turn3[:-1]  # the history only grew


def test_assemble_gives_the_middleware_result_when_the_transcript_kept_the_original(
    client: httpx.Client,
) -> None:
    rows = _tool_result(client, "call_3_0", ROWS)
    assert rows != ROWS
    # the transcript holds the original (tool_result_persist did not apply): the memo answers
    out = _assemble(
        client, [{"role": "user", "content": "go"}, _call("call30", "seq ..."), _result("call30", ROWS)]
    )
    assert _tool_texts(out) == {"call30": rows}


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("call_1_0", "call10", True),
        ("call_abc#1", "callabc#1", True),
        ("call_1", "call_2", False),
        ("x#1", "x#2", False),
    ],
)
def test_call_key(a: str, b: str, same: bool) -> None:
    from lightmem_plugin.reduction.dedup import call_key

    assert (call_key(a) == call_key(b)) is same


def test_a_repeat_within_a_turn_names_no_id_the_model_never_reads(client: httpx.Client) -> None:
    """Seen in the wire e2e (OpenClaw 2026.9.6, an openai-completions provider): the same command twice
    in one turn, and the second output read "identical to the output of tool call call_1_0" while every
    request the model received spelled that call call10 (OpenClaw respells ids just before each
    request, after the middleware). Until a request shows the spelling, a repeat names no id."""
    first = _tool_result(client, "call_1_0", ROWS)
    again = _tool_result(client, "call_2_0", ROWS)
    assert again != first and "call_1_0" not in again, again
    assert again.startswith("[lightmem2: identical to an earlier tool output in this conversation ("), again
    # the key still recovers the output whole
    key = re.search(r"archived as ([0-9a-f]{12,32})", again)
    assert key is not None
    shown = client.post("/sidecar/recover", json={"key": key.group(1)})
    assert shown.status_code == 200 and shown.json()["text"] == ROWS
    # once a request spelled it, a later repeat names it as the model reads it
    history = [{"role": "user", "content": "count"}, _call("call10", "seq ..."), _result("call10", first)]
    history += [_call("call20", "seq ..."), _result("call20", again), _said("Same.")]
    _assemble(client, [*history, {"role": "user", "content": "once more"}])
    third = _tool_result(client, "call_3_0", ROWS)
    ref = SELF_REF.search(third)
    assert ref is not None and ref.group(1) == "call10", third
