"""``/sidecar/assemble`` when a finished task leaves the context (aggressive mode), over real HTTP.

The OpenClaw plugin maps the answer back onto OpenClaw's own messages one for one, so an answer that
is shorter must say where: ``collapsed`` names each range of the sent messages that became one
assistant summary. Checked on a two-goal session: no ``collapsed`` before the batch; after it, the
answer is the sent list with the range made one message (everything else at its place), on every
later call the same; and a call that fails open sends the messages back whole, without ``collapsed``.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from server_harness import ServerThread

from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys
from lightmem_plugin.server.app import create_app
from lightmem_plugin.server.secret import HEADER, load_or_create

GOAL1 = "Survey the handlers in every module."
GOAL2 = "Now count the lines."


def grep_output(i: int) -> str:
    return "".join(
        f"module_{i}/file_{j}.py:{j * 3}: def handler_{i}_{j}(request, ctx): return run(request, {j * 7919 % 997})\n"
        for j in range(120)
    )


def call(cid: str, command: str) -> dict[str, Any]:
    fn = {"name": "exec", "arguments": json.dumps({"command": command})}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": cid, "type": "function", "function": fn}],
    }


@pytest.fixture
def aggressive() -> Any:
    plugin = LightMem(Config(mode="aggressive"))
    with ServerThread(create_app(plugin)) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        client.headers[HEADER] = load_or_create()
        yield client, plugin


def session(
    client: httpx.Client, sid: str, **extra: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Task 1 (8 greps with big outputs), then goal 2 with 10 small calls: each call's sent messages
    and the sidecar's answer (``extra``: more fields of every body, e.g. the model)."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": GOAL1}]
    sent: list[list[dict[str, Any]]] = []
    answers: list[dict[str, Any]] = []

    def assemble() -> None:
        sent.append(list(msgs))
        r = client.post("/sidecar/assemble", json={"sessionId": sid, "messages": msgs, **extra})
        assert r.status_code == 200, r.text
        answers.append(r.json())

    for i in range(8):
        assemble()
        msgs += [
            call(f"call_{i}", f"grep -rn def module_{i}"),
            {"role": "tool", "tool_call_id": f"call_{i}", "content": grep_output(i)},
        ]
    msgs += [{"role": "assistant", "content": "Surveyed."}, {"role": "user", "content": GOAL2}]
    for i in range(10):
        assemble()
        msgs += [
            call(f"wc_{i}", f"wc -l part_{i}"),
            {"role": "tool", "tool_call_id": f"wc_{i}", "content": f"{i} lines"},
        ]
    return sent, answers  # type: ignore[return-value]


def test_an_answer_shorter_by_a_collapse_names_the_range(aggressive: Any) -> None:
    client, plugin = aggressive
    sent, answers = session(client, "oc-collapse")
    batch = next((n for n, a in enumerate(answers) if "collapsed" in a), None)
    assert batch is not None, "task 1 never left the context"
    assert batch >= 8  # from the call that brought the second goal (answer 8), never before
    (c,) = plugin.session("oc-collapse").evictor.state.collapses
    for n, (msgs, answer) in enumerate(zip(sent, answers, strict=True)):
        out = answer["messages"]
        if n < batch:
            assert "collapsed" not in answer and len(out) == len(msgs)
            continue
        # the same range on every call from the batch on: task 1's work, after the first goal
        assert answer["collapsed"] == [{"first": c.first, "last": c.last}] == [{"first": 1, "last": 17}]
        assert len(out) == len(msgs) - (c.last - c.first)
        assert out[0]["content"] == GOAL1 == msgs[0]["content"]
        summary = out[c.first]
        assert summary["role"] == "assistant" and not summary.get("tool_calls")
        assert str(summary["content"]).startswith(
            "[lightmem2: task 1 finished; its 17 messages (8 tool calls)"
        )
        assert stub_keys(str(summary["content"])) == [c.key]
        # everything after the range is at its place, role for role
        rest, kept = out[c.first + 1 :], msgs[c.last + 1 :]
        assert [m["role"] for m in rest] == [m["role"] for m in kept]
        assert rest[0]["content"] == GOAL2
        ids = {t["id"] for m in out for t in m.get("tool_calls") or []}
        assert all(m["tool_call_id"] in ids for m in out if m["role"] == "tool")
    # each later answer extends the one before (the collapse is applied the same way every time)
    for before, after in zip(answers[batch:], answers[batch + 1 :], strict=False):
        prev = before["messages"][:-1]
        assert after["messages"][: len(prev)] == prev


def test_a_call_that_fails_open_after_a_collapse_names_no_range(
    aggressive: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, plugin = aggressive
    sent, answers = session(client, "oc-failopen")
    assert "collapsed" in answers[-1]
    s = plugin.session("oc-failopen")

    def broken(req: Any) -> Any:
        raise RuntimeError("encoder broke")

    monkeypatch.setattr(s.chat, "encode", broken)
    msgs = [*sent[-1], {"role": "user", "content": "and one more"}]
    answer = client.post("/sidecar/assemble", json={"sessionId": "oc-failopen", "messages": msgs}).json()
    assert s.evictor.collapsed, "the evictor collapsed task 1 on this call too"
    assert answer["messages"] == msgs and "collapsed" not in answer


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "claude-opus-4-6", None])
def test_answers_before_a_change_of_the_past_go_without_thinking_on_a_model_that_binds_it(
    aggressive: Any, model: str | None
) -> None:
    """OpenClaw sends each earlier answer's signed thinking back; on a model that checks each block
    against the history before it, a block produced before the batch and after the first message it
    changed fails the request. The answer names those messages, from the batch on, the same range on
    every later call; never on a model that accepts a changed history, nor before the batch."""
    client, plugin = aggressive
    sid = f"oc-thinking-{model}"
    sent, answers = session(client, sid, **({"model": model} if model else {}))
    batch = next(n for n, a in enumerate(answers) if "collapsed" in a)
    (c,) = plugin.session(sid).evictor.state.collapses
    for n, answer in enumerate(answers):
        if model != "claude-sonnet-5-5" or n < batch:
            assert "thinking" not in answer, n
            continue
        # from the first message of task 1 (which left) to the last message the batch call held
        assert answer["thinking"] == [{"start": c.first, "end": len(sent[batch])}], n
    if model == "claude-sonnet-5-5":  # the goal-2 answers after the batch keep theirs
        assert len(sent[-1]) > len(sent[batch])
