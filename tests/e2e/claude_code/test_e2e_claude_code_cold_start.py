"""Claude Code 2.1.332 from npm, end to end: normal mode reduces again, at a cold start, a read that a
finished task kept whole (issue #42 item 1).

One scripted session in two user turns of one Claude Code session (``claude -p GOAL1 --session-id ID``,
then, after a pause, ``claude -p GOAL2 --resume ID``), run twice, straight at the fake provider and
with ``lightmem2 install claude-code`` (normal mode, ``eviction.cacheTtlS`` = :data:`TTL_S`, so a
pause of :data:`PAUSE_S` is past the TTL in force). Turn 1 reads ``notes.py`` (~6,000 chars: under
``fileViewChars``, so it arrives whole) with Bash, runs :data:`CHECKS` small checks (the read is then
older than ``keepRecentTurns`` = 6 calls) and answers; turn 2 is a new goal, which closes task 1.

Checked request by request at the fake provider (which counts tokens with o200k):

- the case under test: every pause inside a turn is under the TTL, the one before turn 2 over it;
- before the pause the read reaches the model whole in both runs; in the first request after it
  (request ``COLD``), with lightmem2, the read's tool_result is reduced to ~``deferredViewChars``
  with a stub whose key recovers the file byte-exact (registry and ``lightmem2 recover``), and every
  other message is the one the request before the pause sent; without lightmem2 it is still whole;
- ``wire_audit.audit``: every tool output verbatim or stubbed with keys that recover it, success
  unchanged, each request extending the one before except at request ``COLD``; the requests after it
  extend it;
- the ledger: one row per request, tokens sent as the provider counted (``wire_audit.audit_ledger``);
  the row of request ``COLD`` alone carries ``cold_start`` ("pause N 6") and the break reason "1
  output kept whole reduced again at a cold start", naming the stub's key; its tokens saved are what
  the provider saw the reduction remove; ``lightmem2 status`` says "cold starts: 1 (pause past the
  6-second TTL), the last at call COLD+1" and "1 batch reduced old outputs again, N tokens" with that
  N, and counts no saving "on arrival" (nothing was reduced on arrival: the read came whole, the
  checks' outputs are a few chars).

Claude Code did not get in the way: ``--resume`` sends the earlier turn's messages byte for byte
(cache breakpoints aside), makes no side call with ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``,
and the calls inside a turn are ~0.4 s apart with the hooks installed.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import cc_support as cc
import pytest
from e2e_support import (
    STUB_KEY,
    ScriptedUpstream,
    assert_recovers,
    base_env,
    npm_cli,
    stop_pid,
    write_lightmem_config,
)
from fake_wire import Reply
from server_harness import ServerThread, free_port
from wire_audit import audit, audit_ledger, o200k_counter, tool_outputs

from lightmem_plugin.hosts.claude_code import install as installer
from lightmem_plugin.hosts.shared import serve_ctl

TTL_S = 6  # eviction.cacheTtlS: calls ~0.4 s apart stay warm, the pause below goes cold
PAUSE_S = 8
CHECKS = 8  # after the read: it is then older than keepRecentTurns (6) calls at turn 2
GOAL1 = "Read notes.py, then run the eight release checks."
GOAL2 = "Now tag the release."
READ = "cat notes.py"
COLD = CHECKS + 2  # 0-based: the read, the checks, the answer, then turn 2's first request


def _notes() -> str:
    """~6,000 chars of distinct Python: under fileViewChars (24,000), so it arrives whole."""
    return "".join(
        f"def release_step_{i}(ctx):\n"
        f"    ctx.log('step {i}: verify shard {i * 37 % 101} before the tag')\n"
        f"    return ctx.check(timeout={i * 3 + 5})\n\n"
        for i in range(48)
    )


class Session:
    """The scripted model: turn 1 reads, runs CHECKS checks and answers; turn 2 tags and answers.
    The model says a word with each call, as models do. Keeps when each agent request arrived."""

    def __init__(self) -> None:
        self.arrived: list[float] = []

    def __call__(self, api: str, body: dict[str, Any]) -> Reply:
        if not cc.is_agent_call(body):
            return Reply(text="Release")
        self.arrived.append(time.monotonic())
        after2 = cc.after_goal(body, GOAL2)
        if after2 is not None:
            if not tool_outputs(api, {"messages": after2}):
                args = json.dumps({"command": "echo tagged v1.4.0", "description": "tag"})
                return Reply(text="Tagging.", tool_calls=[("Bash", args)])
            return Reply(text="Tagged.")
        done = len(tool_outputs(api, body))
        if done == 0:
            return Reply(
                text="Reading.", tool_calls=[("Bash", json.dumps({"command": READ, "description": "read"}))]
            )
        if done <= CHECKS:
            args = json.dumps({"command": f"echo check {done} ok", "description": f"check {done}"})
            return Reply(text=f"Check {done}.", tool_calls=[("Bash", args)])
        return Reply(text="All checks pass.")


@pytest.fixture(scope="module")
def claude() -> Path:
    return npm_cli(cc.PACKAGE, cc.VERSION, "claude-code", "claude")


def _two_turns(exe: Path, env: dict[str, str], work: Path, session: str) -> tuple[str, str]:
    (cc.fresh(work) / "notes.py").write_text(_notes(), encoding="utf-8")
    first = cc.run_claude(exe, env, work, GOAL1, "--session-id", session)
    time.sleep(PAUSE_S)
    second = cc.run_claude(exe, env, work, GOAL2, "--resume", session)
    return str(first.get("result")), str(second.get("result"))


def _read_at(body: dict[str, Any]) -> tuple[int, int]:
    """(message index, block index) of the read's tool_result in a request."""
    uses = {
        b["id"]
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_use" and b.get("input", {}).get("command") == READ
    }
    for i, m in enumerate(body["messages"]):
        for j, b in enumerate(m.get("content") if isinstance(m.get("content"), list) else []):
            if b.get("type") == "tool_result" and b.get("tool_use_id") in uses:
                return i, j
    raise AssertionError("no tool_result for the read in this request")


def _read_text(body: dict[str, Any]) -> str:
    i, j = _read_at(body)
    return cc.text(body["messages"][i]["content"][j]["content"])


def test_claude_code_cold_start_reduces_a_finished_task_s_read_again(
    claude: Path, tmp_path: Path, host_home: Path, isolated_home: Path
) -> None:
    started = time.monotonic()
    notes = _notes()
    assert 5_000 < len(notes) < 8_000
    session = str(uuid.uuid4())
    work = tmp_path / "work"  # one HOME, work folder and session id for both runs: the same env text

    # without lightmem2: Claude Code straight to the provider
    plain_model = Session()
    vanilla = ScriptedUpstream(plain_model, counter=o200k_counter(), ttl_s=TTL_S)
    with ServerThread(vanilla.app) as up:
        env = cc.env_for(cc.fresh(host_home), tmp_path / "vanilla-lm")
        env["ANTHROPIC_BASE_URL"] = up.url
        assert _two_turns(claude, env, work, session) == ("All checks pass.", "Tagged.")
    without, without_usage, _ = cc.agent_calls(vanilla)

    # with lightmem2 installed (normal mode), the cache TTL in force set to TTL_S
    model = Session()
    fake = ScriptedUpstream(model, counter=o200k_counter(), ttl_s=TTL_S)
    with ServerThread(fake.app) as up:
        cc.fresh(host_home)
        write_lightmem_config(isolated_home, free_port(), up.url, eviction={"cacheTtlS": TTL_S})
        print(installer.run(uninstall=False, project=None))
        env = cc.env_for(host_home, isolated_home)
        try:
            assert _two_turns(claude, env, work, session) == ("All checks pass.", "Tagged.")
        finally:
            stop_pid(serve_ctl.pid_file())
    bodies, usage, mask = cc.agent_calls(fake)
    check_env = base_env(host_home, isolated_home)

    # the case under test: turn 2's first request is request COLD, after the only pause past the TTL
    assert len(bodies) == len(without) == COLD + 2, (len(bodies), len(without))
    assert cc.after_goal(bodies[COLD], GOAL2) == [] and cc.after_goal(bodies[COLD - 1], GOAL2) is None
    gaps = [round(b - a, 2) for a, b in zip(model.arrived, model.arrived[1:], strict=False)]
    print(f"\nseconds between agent requests: {gaps}")
    assert gaps[COLD - 1] > TTL_S, gaps
    assert all(g < TTL_S for n, g in enumerate(gaps) if n != COLD - 1), f"a pause inside a turn: {gaps}"

    # before the pause the read reached the model whole, in both runs
    for n in range(1, COLD):
        assert _read_text(bodies[n]).rstrip("\n") == notes.rstrip("\n"), f"request {n + 1}: read not whole"
        assert _read_text(without[n]) == _read_text(bodies[n])
    # after it: reduced with lightmem2 (a stub whose key recovers the file), whole without
    for n in range(COLD, len(bodies)):
        assert _read_text(without[n]).rstrip("\n") == notes.rstrip("\n"), f"vanilla request {n + 1}"
    seen = _read_text(bodies[COLD])
    print(f"the read as the model saw it after the pause ({len(seen)} of {len(notes)} chars):\n{seen}")
    keys = STUB_KEY.findall(seen)
    assert keys, f"no stub in the read after the pause: {seen[:300]!r}"
    assert len(seen) < 1_600 < len(notes), len(seen)
    assert "def release_step_0(ctx):" in seen and "def release_step_47(ctx):" in seen
    assert_recovers(keys[0], notes, check_env)
    for n in range(COLD + 1, len(bodies)):
        assert _read_text(bodies[n]) == seen, f"request {n + 1} does not keep the reduced read"

    # request COLD: every other message as the request before the pause sent it, then turn 2's
    before, cold = cc.plain(bodies[COLD - 1]), cc.plain(bodies[COLD])
    at, block = _read_at(bodies[COLD])
    assert _read_at(bodies[COLD - 1]) == (at, block)
    assert cold["system"] == before["system"] and cold["tools"] == before["tools"]
    for i, msg in enumerate(before["messages"]):
        if i == at:
            others = [b for j, b in enumerate(msg["content"]) if j != block]
            assert [b for j, b in enumerate(cold["messages"][i]["content"]) if j != block] == others
        else:
            assert cold["messages"][i] == msg, f"message {i} changed at the cold start"

    # request by request against the run without lightmem2: outputs verbatim or recoverable, success
    # unchanged, each request extending the one before but at COLD
    result = audit("anthropic", bodies, without, cc.recover, batches=[COLD])
    result.raise_if_faulty()
    assert result.stubbed >= len(bodies) - COLD, result

    # the ledger against the provider, and what status and report say of the cold start
    report = json.loads(cc.cli(check_env, work, "report", "--session", session, "--json"))
    (data,) = report["sessions"]
    rows = data["calls"]
    assert len(rows) == len(mask) and all(mask), "a side call reached the provider"
    audit_ledger(rows, usage, without_usage).raise_if_faulty()
    from lightmem_plugin.store.ledger import Ledger

    ledger = Ledger.default()
    try:
        colds = [(r.call_index, r.cold_start) for r in ledger.calls(session) if r.cold_start]
    finally:
        ledger.close()
    assert len(colds) == 1 and colds[0][0] == COLD + 1, colds
    code = re.fullmatch(r"pause (\d+) (\d+)", colds[0][1] or "")
    assert code is not None and int(code.group(2)) == TTL_S and int(code.group(1)) >= PAUSE_S, colds
    row = rows[COLD]
    assert row["evictedTokens"] > 0 and all(r["evictedTokens"] == 0 for r in rows if r is not row), rows
    assert "1 output kept whole reduced again at a cold start" in (row["breakReason"] or ""), row
    assert keys[0] in row["breakReason"], row["breakReason"]
    # what the reduction took out, as the provider counted it: turn 2's new messages cost the same in
    # both runs, so the difference in growth from the request before is the reduction's saving
    grew = usage[COLD]["prompt"] - usage[COLD - 1]["prompt"]
    grew_plain = without_usage[COLD]["prompt"] - without_usage[COLD - 1]["prompt"]
    print(f"tokens the reduction saved: ledger {row['evictedTokens']}, provider {grew_plain - grew}")
    assert abs((grew_plain - grew) - row["evictedTokens"]) <= 0.02 * row["evictedTokens"] + 5

    # every uncached token the fake provider reported has its cause in report --json (issue #43): the
    # first call's, the new content of each call, and at request COLD (the fake's cache expired after
    # TTL_S idle seconds, as lightmem2's) the idle gap and the batch that changed the past
    for n, (r, u) in enumerate(zip(rows, usage, strict=True)):
        causes = {c["cause"]: c for c in r["missCauses"]}
        assert sum(c["tokens"] for c in causes.values()) == u["prompt"] - u["cached"], (n, causes, u)
        if n == 0:
            assert set(causes) == {"first call"}, causes
        elif n == COLD:
            assert set(causes) == {"new content", "lightmem2 change", "expiry"}, causes
            assert "reduced again at a cold start" in causes["lightmem2 change"]["detail"], causes
            assert causes["expiry"]["detail"].endswith(f"past the {TTL_S}-second TTL"), causes
        else:
            assert set(causes) <= {"new content"}, (n, causes)
    assert {c["cause"] for c in data["missCauses"]["causes"]} == {
        "first call",
        "new content",
        "lightmem2 change",
        "expiry",
    }
    assert data["missCauses"]["uncachedTokens"] == sum(u["prompt"] - u["cached"] for u in usage)

    status = cc.cli(check_env, work, "status", "--session", session)
    text = cc.cli(check_env, work, "report", "--session", session)
    print(status + "\n" + text)
    assert f"cold starts: 1 (pause past the {TTL_S}-second TTL), the last at call {COLD + 1}" in status
    assert f"cold starts: 1 (pause past the {TTL_S}-second TTL), the last at call {COLD + 1}" in text
    saved = f"{row['evictedTokens']:,}"
    assert (
        f"at free breaks: 1 cold start (free breaks); 1 batch reduced old outputs again, {saved} tokens"
        in status
    ), status
    # nothing was reduced on arrival: the read came whole, every check's output is a few chars
    assert all(
        o.text == p.text
        for o, p in zip(
            tool_outputs("anthropic", bodies[COLD - 1]),
            tool_outputs("anthropic", without[COLD - 1]),
            strict=True,
        )
    )
    assert "on arrival: new tool output reduced, 0 tokens saved" in status, status
    assert re.search(rf"^\s*call {COLD + 1} at message \d+, char \d+: eviction batch: ", text, re.M), text
    elapsed = time.monotonic() - started
    print(f"claude-code cold-start run: {elapsed:.1f} s")
