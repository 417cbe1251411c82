"""Gateway chat in aggressive mode with OpenClaw's provider speaking the Anthropic Messages API.

Every other OpenClaw test points OpenClaw at the fake provider as ``openai-completions``. Here the
provider is ``"api": "anthropic-messages"``, so OpenClaw builds Anthropic requests (top-level
``system``, ``tool_use``/``tool_result`` blocks, its own ``cache_control`` marks) and reads Anthropic
``usage``. The chat is the eviction test's (:mod:`test_e2e_openclaw_gateway_evict`: task 1 with two
large reads and four large writes, then eight small goals; task 1 leaves as one summary at the check
of turn 2, where goal 2 is the prompt the plugin sends with the history), run once without lightmem2
and once with it.

What the plugin relies on, checked from outside the product:

- **OpenClaw stamps its replies with the wire API.** The plugin tells the sidecar which cache prices
  an eviction's break (``api`` in ``/sidecar/assemble``, from the newest assistant message's ``api``:
  ``"anthropic-messages"`` -> ``"anthropic"``, lib/messages.js ``wireApiOf``). Observed twice: each
  model reply in the transcript (``chat.history``) carries ``api: "anthropic-messages"``, and a
  recording tap between plugin and sidecar (:mod:`sidecar_tap`, set as the plugin's command) shows
  the first turn's assemble with no reply to read and no ``api``, every later one with
  ``anthropic``. (OpenClaw's own chat-command replies are stamped ``openai-responses``, provider
  ``openclaw``; it leaves them out of what it hands ``assemble()``, so they never decide the price.)
- **Anthropic usage is read as Anthropic usage.** OpenClaw normalises the provider's ``usage``
  into its own fields; the plugin's ``commitTurn`` sends them back under Anthropic's names with
  ``api: "anthropic"``. Per model call, what the tap saw and what the ledger recorded
  (``report --json``: tokens in, cache read, cache written; ``status --json``: the real hit rate and
  K) equal what the fake provider sent in its ``usage`` objects.

Checked request by request at the fake provider, against the same chat without lightmem2: each
request is a valid Anthropic Messages request (user first, every ``tool_use`` answered by its
``tool_result`` in the next message and no ``tool_result`` without its call, no empty text, at most
four cache marks); each extends the one before (cache marks aside, OpenClaw's transient runtime
context left out) except at the eviction batch ``report`` names; every tool output is verbatim or
reduced with stubs whose keys recover it (:func:`wire_audit.audit`); from the batch on, task 1 is one
summary message right after the first goal, the later steps ran and were answered, and the summary's
key recovers task 1's outputs and the files it wrote byte for byte.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import wire_audit
from e2e_support import STUB_KEY, cache_figures
from fake_wire import Reply, usage_for
from openclaw_e2e import OpenClawEnv
from sidecar_tap import tapped
from test_e2e_openclaw_gateway import Gateway, on_gateway
from test_e2e_openclaw_gateway_evict import (
    BATCH_TURN,
    GOAL1,
    LATER,
    MARKER,
    NOTES,
    assert_task1_archived,
    run_chat,
    turns,
)

API = "anthropic-messages"
MESSAGES_PATH = "/v1/messages"
BLOCKS = {"text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"}


def tap_sidecar(env: OpenClawEnv) -> Path:
    """Route the plugin's sidecar through :mod:`sidecar_tap`; the file it logs each POST to."""
    log = env.root / "sidecar-tap.jsonl"
    tap = Path(__file__).with_name("sidecar_tap.py")
    wrapper = env.root / "lightmem2-tapped"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{tap}" "{env.lightmem2}" "{log}" "$@"\n')
    wrapper.chmod(0o755)
    env.set_plugin_settings(command=str(wrapper))
    return log


def run(gateway: Gateway) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The eviction test's chat (every request reached the Anthropic route): the request bodies and
    the transcript's assistant messages (``chat.history``)."""
    bodies = run_chat(gateway)
    paths = {r.path for r in gateway.env.fake.received}
    assert paths == {MESSAGES_PATH}, f"OpenClaw called {paths}, not only {MESSAGES_PATH}"
    history = gateway.call("chat.history", {"sessionKey": "agent:main:main"})["messages"]
    return bodies, [m for m in history if m.get("role") == "assistant"]


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def _text(message: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in _blocks(message) if b.get("type") == "text")


def _uses(message: dict[str, Any]) -> list[str]:
    return [b["id"] for b in _blocks(message) if b.get("type") == "tool_use"]


def _results(message: dict[str, Any]) -> list[str]:
    return [b["tool_use_id"] for b in _blocks(message) if b.get("type") == "tool_result"]


def _marks(value: Any) -> int:
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(_marks(v) for v in value.values())
    if isinstance(value, list):
        return sum(_marks(v) for v in value)
    return 0


def anthropic_faults(body: dict[str, Any]) -> list[str]:
    """What makes ``body`` an invalid Anthropic Messages request (empty when it is valid)."""
    faults: list[str] = []
    if not isinstance(body.get("model"), str) or not isinstance(body.get("max_tokens"), int):
        faults.append("no model or max_tokens")
    system = body.get("system")
    if not isinstance(system, str) and not (
        isinstance(system, list) and all(b.get("type") == "text" and b.get("text") for b in system)
    ):
        faults.append(f"system is not text: {json.dumps(system)[:120]}")
    if any(not isinstance(t.get("name"), str) or "input_schema" not in t for t in body.get("tools") or []):
        faults.append("a tool without name or input_schema")
    if _marks([body.get("system"), body.get("tools"), body.get("messages")]) > 4:
        faults.append("more than 4 cache_control marks")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs or msgs[0].get("role") != "user":
        return [*faults, "messages do not start with a user message"]
    seen: set[str] = set()
    for i, m in enumerate(msgs):
        role, blocks = m.get("role"), _blocks(m)
        if role not in ("user", "assistant") or not blocks:
            faults.append(f"message {i}: role {role!r} with {len(blocks)} blocks")
        for b in blocks:
            kind = b.get("type")
            if kind not in BLOCKS:
                faults.append(f"message {i}: block type {kind!r}")
            elif kind == "text" and not (isinstance(b.get("text"), str) and b["text"]):
                faults.append(f"message {i}: an empty text block")
            elif kind == "tool_use" and (role != "assistant" or not isinstance(b.get("input"), dict)):
                faults.append(f"message {i}: a tool_use in a {role} message, or its input not an object")
            elif kind == "tool_result" and role != "user":
                faults.append(f"message {i}: a tool_result in an assistant message")
        uses = _uses(m)
        if seen & set(uses) or len(set(uses)) != len(uses):
            faults.append(f"message {i}: a tool_use id used twice")
        seen |= set(uses)
        results = _results(m)
        before = msgs[i - 1] if i else {}
        if results and (before.get("role") != "assistant" or not set(results) <= set(_uses(before))):
            faults.append(f"message {i}: tool results {results} without their calls in the message before")
        if results and [b.get("type") for b in blocks[: len(results)]] != ["tool_result"] * len(results):
            faults.append(f"message {i}: tool results do not come first")
        after = msgs[i + 1] if i + 1 < len(msgs) else None
        if uses and (after is None or sorted(_results(after)) != sorted(uses)):
            faults.append(f"message {i}: tool calls {uses} not answered in the next message")
    return faults


def without_calls(body: dict[str, Any], calls: set[str]) -> dict[str, Any]:
    """``body`` with the tool_use and tool_result blocks of ``calls`` left out (the outputs the run
    without lightmem2 shows for the calls still in the context)."""
    msgs = []
    for m in body["messages"]:
        kept = [b for b in _blocks(m) if b.get("id") not in calls and b.get("tool_use_id") not in calls]
        msgs.append({**m, "content": kept})
    return {**body, "messages": msgs}


def _answered(received: list[Any]) -> list[int]:
    """Indexes of the requests whose answers the host kept: of byte-identical repeats (a retry), the
    last (the eviction test keeps the first of them as the request)."""
    return [
        n for n in range(len(received)) if n + 1 == len(received) or received[n].raw != received[n + 1].raw
    ]


def test_openclaw_on_anthropic_messages_evicts_and_records_anthropic_usage(make_env: Any) -> None:
    counter = wire_audit.o200k_counter()
    plain_env = make_env("plain", plugin=False, counter=counter, api=API)
    plain, _ = on_gateway(plain_env, run)

    env = make_env("lightmem2", counter=counter, api=API)
    env.set_lightmem2_keys(mode="aggressive")
    log = tap_sidecar(env)
    bodies, replies = on_gateway(env, run)
    assert len(bodies) == len(plain)
    assert env.config()["models"]["providers"]["fake"]["api"] == API
    # OpenClaw stamps each reply of the model with its provider's wire API (what wireApiOf reads)
    assert [(m.get("provider"), m.get("api")) for m in replies] == [("fake", API)] * len(bodies)

    # 1. valid Anthropic requests, in both runs
    for n, body in enumerate(bodies):
        faults = anthropic_faults(body) + [f"without lightmem2: {f}" for f in anthropic_faults(plain[n])]
        assert not faults, f"request {n + 1}: {faults}"
        assert body["system"] == bodies[0]["system"] and body.get("tools") == bodies[0].get("tools"), n

    # 2. the plugin told the sidecar the provider's API, from OpenClaw's stamp on its replies
    sent = tapped(str(log))
    assembles = [t["body"] for t in sent if t["path"] == "/sidecar/assemble"]
    commits = [t["body"] for t in sent if t["path"] == "/sidecar/afterTurn"]
    assert len(assembles) == len(commits) == len(turns()), [t["path"] for t in sent]
    assert "api" not in assembles[0] and not assembles[0]["messages"]  # no reply yet to read it from
    assert [a.get("api") for a in assembles[1:]] == ["anthropic"] * (len(turns()) - 1)
    assert {c.get("api") for c in commits} == {"anthropic"}

    # 3. the usage recorded is what the provider sent: per call, at the tap and in the ledger
    fake = env.fake
    assert len(fake.reported) == len(fake.received)
    answered = [fake.reported[n] for n in _answered(fake.received)]
    assert len(answered) == len(bodies)
    wire = [usage_for("anthropic", r["prompt"], r["cached"], r["written"], Reply()) for r in answered]
    forwarded = [c["usage"] for t in commits for c in sorted(t["calls"], key=lambda c: c["at"])]
    names = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    assert [{k: u[k] for k in names} for u in forwarded] == [{k: u[k] for k in names} for u in wire]
    report = env.lightmem2_cli("report", "--all", "--json")
    assert report.returncode == 0, report.stderr
    (session,) = json.loads(report.stdout)["sessions"]
    rows = session["calls"]
    assert [r["call"] for r in rows] == list(range(1, len(bodies) + 1))
    for row, u in zip(rows, wire, strict=True):
        assert row["realInputTokens"] - row["realCacheRead"] - row["realCacheCreation"] == u["input_tokens"]
        assert row["realCacheRead"] == u["cache_read_input_tokens"], row
        assert row["realCacheCreation"] == u["cache_creation_input_tokens"], row
        assert row["realCachedTokens"] is None, row  # read as Anthropic's fields, not OpenAI's
        assert row["hitRateSource"] == "real"
    plain_answered = [plain_env.fake.reported[n] for n in _answered(plain_env.fake.received)]
    wire_audit.audit_ledger(rows, answered, plain_answered).raise_if_faulty()
    status = env.lightmem2_cli("status", "--json")
    assert status.returncode == 0, status.stderr
    totals, figures = json.loads(status.stdout)["session"], cache_figures(answered)
    assert totals["realCalls"] == totals["calls"] == len(bodies), totals
    assert totals["hitRate"] == figures["hit_rate"], (totals, figures)
    # both rounded to 0.1
    assert totals["kReal"] == pytest.approx(figures["K_with_writes"], abs=0.11), (totals, figures)

    # 4. the batch: the first turn whose requests carry task 1's summary, named by report
    first_of_turn = list(itertools.accumulate([0] + [len(steps) for _, steps in turns()]))
    batch = next((n for n, b in enumerate(bodies) if MARKER in json.dumps(b)), None)
    assert batch == first_of_turn[BATCH_TURN - 1], f"task 1 left at request {batch}"
    assert session["evictions"] == [{"call": batch + 1, "tokens": session["summary"]["evictedTokens"]}]
    before = bodies[batch - 1]
    task1 = set(itertools.chain.from_iterable(_uses(m) for m in bodies[first_of_turn[1] - 1]["messages"]))
    assert len(task1) == 2 + NOTES

    def recover(key: str) -> str | None:
        done = env.lightmem2_cli("recover", key)
        return done.stdout.decode("utf-8") if done.returncode == 0 else None

    # every output verbatim or recoverable, each request extends the one before but at the batch;
    # from the batch on, the run without lightmem2 is compared without task 1's calls
    expected = [without_calls(p, task1) if n >= batch else p for n, p in enumerate(plain)]
    checked = wire_audit.audit("anthropic", bodies, expected, recover, batches=[batch], transient_tail=1)
    checked.raise_if_faulty()
    assert checked.stubbed, "nothing was reduced: the large reads should carry stubs"
    unchanged = wire_audit.audit("anthropic", plain, plain, recover, transient_tail=1)
    unchanged.raise_if_faulty()  # the same check holds for OpenClaw alone (it only appends)

    for n in range(batch, len(bodies)):
        msgs = bodies[n]["messages"]
        assert len(msgs) < len(plain[n]["messages"]), n
        assert n > batch or len(msgs) < len(before["messages"])
        at = [i for i, m in enumerate(msgs) if m["role"] == "assistant" and MARKER in _text(m)]
        assert at == [1], f"request {n + 1}: summaries at {at}"
        assert [b["type"] for b in _blocks(msgs[1])] == ["text"]
        # the first goal as before the batch (cache marks aside); task 1's calls are gone
        assert wire_audit.history("anthropic", bodies[n])[0] == wire_audit.history("anthropic", before)[0]
        assert GOAL1 in _text(msgs[0])
        assert not task1 & {i for m in msgs for i in _uses(m)}

    # the summary's key recovers task 1: each output the model saw and each file written, byte for
    # byte; the reduced reads' own stubs recover the logs
    text = _text(bodies[-1]["messages"][1])
    assert re.match(
        r"\[lightmem2: task 1 finished; its 13 messages \(6 tool calls\) archived as [0-9a-f]{12,32}", text
    ), text
    # its hint names the search that finds a line range in the archive, a tool the host offers: listed,
    # or through Tool Search as OpenClaw 2026.9.6 offers plugin tools (test_e2e_openclaw_agent.py)
    assert "lightmem2_search finds A:B" in text.splitlines()[0], text
    offered = {str(t.get("name")) for t in bodies[-1].get("tools", [])}
    assert offered & {"lightmem2_search", "tool_search"}, sorted(offered)
    key = STUB_KEY.search(text)
    assert key is not None, text
    archived = recover(key.group(1))
    assert archived is not None
    seen = {o.call_id: o.text for o in wire_audit.tool_outputs("anthropic", before)}
    assert_task1_archived(archived, seen, task1, recover)

    # the session went on: each later step ran (its output reached the model) and was answered
    outputs = [o.text for o in wire_audit.tool_outputs("anthropic", bodies[-1])]
    assert outputs == [f"release step {k} ok" for k in range(1, LATER + 1)]
    shown = env.lightmem2_cli("report", "--all").stdout.decode()
    named = re.search(r"^evictions: 1 batches, [\d,]+ tokens \(calls (\d+)\)$", shown, re.M)
    assert named is not None and int(named.group(1)) == batch + 1, shown
    assert f"call {batch + 1} at message " in shown and ": eviction batch" in shown
    # the batch is the only break: OpenClaw's respelling of a committed turn's call ids at the next
    # assemble (toolu_8_0 -> toolu80) is not one (before accounting.ids_alike: 6 of the 8 listed)
    assert "cache killers (1):" in shown, shown

    with_lm, without = cache_figures(answered), cache_figures(plain_answered)
    print("\nopenclaw anthropic-messages cache figures:", json.dumps({"with": with_lm, "without": without}))
    assert with_lm["prompt_tokens"] < without["prompt_tokens"]
    assert with_lm["K_with_writes"] < without["K_with_writes"]
