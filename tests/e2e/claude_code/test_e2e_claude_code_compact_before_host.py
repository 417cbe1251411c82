"""Claude Code 2.1.332 from npm, end to end: aggressive mode compacts before the host does.

One ``claude -p`` turn, run twice with the same HOME, work folder and session id: straight at the fake
provider, and with ``lightmem2 install claude-code`` in aggressive mode, the host's threshold set small
(``eviction.compactAtTokens`` = :data:`AT`, ``compactMarginTokens`` = :data:`MARGIN`,
``compactKeepTokens`` = :data:`KEEP`, ``batchTurns`` 1) so that a short session passes it. The agent
reads :data:`FILES` files of ~2,000 chars each with Bash, one per call, runs :data:`CHECKS` small
checks and answers.

Why :data:`AT` is 17,500 and not ~10,000: Claude Code's system prompt and tools alone are ~10,000
provider tokens, so the first request is already near any small threshold. lightmem2 estimates the
context from the provider's count at the last call plus what the messages gained since, at most 1.25
provider tokens per token it counts (:func:`~lightmem_plugin.eviction.compacting.estimate`; it used
to scale the whole count by the provider's ratio, ~2.3 with a head this large, and compacted again at
every request at 12,000). At 17,500 less the 1,000 margin the compaction comes at request 7, after
the sixth read (15,530 as the provider counted request 6, ~16,700 estimated), and brings the provider's
count to ~12,600, far below the threshold. Checked at the fake provider, request by
request:

- at one request ``N`` (the compaction's) the older reads are stubs ``[lightmem2: ... archived as KEY
  ...]`` whose keys recover each file byte-exact (registry and ``lightmem2 recover``), the first stub
  carrying "[lightmem2 session record]"; the newest read is whole, the user's prompt unchanged, and
  every other message is the one the request before sent; before ``N`` every read is whole;
- the requests after ``N`` extend request ``N`` (the prefix is stable after the compaction);
  ``wire_audit.audit``: outputs verbatim or recoverable, success unchanged, each request extending the
  one before but at ``N``;
- Claude Code sent no summarising request in either run (no host compaction);
- without lightmem2 every read is whole in every request, request ``N`` included;
- the ledger: one row per request, tokens sent as the provider counted (``wire_audit.audit_ledger``);
  the row of request ``N`` alone pages anything out, its break reason "compaction before the host's
  limit"; ``lightmem2 status`` says "compactions before the host's limit: 1".

Found here: the ledger gave the compaction's row no break reason when the batch changed only the
previous request's last message (its check let that message differ, for the per-call tail); fixed in
``metering.accounting._first_break`` (unit test in ``tests/eviction/test_eviction_compaction.py``).
A batch archives its outputs as one document: each stub's key recovers its output byte-exact with the
stub's ``--lines A:B`` (``wire_audit`` reads that hint, and the session record after a first stub).
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
    base_env,
    npm_cli,
    stop_pid,
    write_lightmem_config,
)
from fake_wire import Reply
from server_harness import ServerThread, free_port
from wire_audit import audit, audit_ledger, history, o200k_counter, tool_outputs

from lightmem_plugin.hosts.claude_code import install as installer
from lightmem_plugin.hosts.shared import serve_ctl

FILES = 6
CHECKS = 2  # small steps after the reads: the requests after the compaction
AT, MARGIN, KEEP = 17_500, 1_000, 1_500  # the module doc says why 17,500
GOAL = f"Read the {FILES} shard files, one at a time, and summarise the owners."
ANSWER = "All shards read."
RECORD = "[lightmem2 session record]"
HINT = re.compile(r"lightmem2 recover ([0-9a-f]{12,32}) --lines (\d+):(\d+)")


def _shard(n: int) -> str:
    """~2,000 chars of distinct lines: file ``n``."""
    lines = [
        f"shard {n} row {i}: owner=team-{(n * 7 + i) % 13} quota={n * 100 + i * 3} zone=z{i % 4}"
        for i in range(42)
    ]
    return "\n".join(lines) + "\n"


def _name(n: int) -> str:
    return f"shard_{n}.txt"


def policy(api: str, body: dict[str, Any]) -> Reply:
    """One read per call, in order, then CHECKS small checks, then the answer."""
    if not cc.is_agent_call(body):
        return Reply(text="Shards")
    done = len(tool_outputs(api, body))
    if done < FILES:
        args = json.dumps({"command": f"cat {_name(done)}", "description": f"read shard {done}"})
        return Reply(text=f"Reading shard {done}.", tool_calls=[("Bash", args)])
    if done < FILES + CHECKS:
        args = json.dumps({"command": f"echo check {done - FILES} ok", "description": "check"})
        return Reply(text="Checking.", tool_calls=[("Bash", args)])
    return Reply(text=ANSWER)


@pytest.fixture(scope="module")
def claude() -> Path:
    return npm_cli(cc.PACKAGE, cc.VERSION, "claude-code", "claude")


def _turn(exe: Path, env: dict[str, str], work: Path, session: str) -> str:
    cc.fresh(work)
    for n in range(FILES):
        (work / _name(n)).write_text(_shard(n), encoding="utf-8")
    return str(cc.run_claude(exe, env, work, GOAL, "--session-id", session).get("result"))


def _reads(body: dict[str, Any]) -> dict[int, str]:
    """The text of each shard's read in a request, by shard number."""
    out = {}
    for o in tool_outputs("anthropic", body):
        command = json.loads(o.arguments).get("command", "") if o.arguments.startswith("{") else o.arguments
        for n in range(FILES):
            if command == f"cat {_name(n)}" or _name(n) in command:
                out[n] = o.text
    return out


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]


def test_claude_code_aggressive_compacts_before_the_host(
    claude: Path, tmp_path: Path, host_home: Path, isolated_home: Path
) -> None:
    started = time.monotonic()
    shards = [_shard(n) for n in range(FILES)]
    assert all(1_800 < len(s) < 2_600 for s in shards), [len(s) for s in shards]
    session = str(uuid.uuid4())
    work = tmp_path / "work"

    # without lightmem2
    vanilla = ScriptedUpstream(policy, counter=o200k_counter())
    with ServerThread(vanilla.app) as up:
        env = cc.env_for(cc.fresh(host_home), tmp_path / "vanilla-lm")
        env["ANTHROPIC_BASE_URL"] = up.url
        assert _turn(claude, env, work, session) == ANSWER
    without, without_usage, _ = cc.agent_calls(vanilla)

    # with lightmem2 installed, aggressive, the host's threshold small
    fake = ScriptedUpstream(policy, counter=o200k_counter())
    eviction = {
        "compactAtTokens": AT,
        "compactMarginTokens": MARGIN,
        "compactKeepTokens": KEEP,
        "batchTurns": 1,
    }
    with ServerThread(fake.app) as up:
        cc.fresh(host_home)
        write_lightmem_config(isolated_home, free_port(), up.url, mode="aggressive", eviction=eviction)
        print(installer.run(uninstall=False, project=None))
        env = cc.env_for(host_home, isolated_home)
        try:
            assert _turn(claude, env, work, session) == ANSWER
        finally:
            stop_pid(serve_ctl.pid_file())
    bodies, usage, mask = cc.agent_calls(fake)
    check_env = base_env(host_home, isolated_home)
    print(f"\nprovider's input tokens with lightmem2: {[u['prompt'] for u in usage]}")
    print(f"provider's input tokens without it:    {[u['prompt'] for u in without_usage]}")

    # no host compaction, in either run; one read per request, then the answer
    assert len(bodies) == len(without) == FILES + CHECKS + 1, (len(bodies), len(without))
    for run in (bodies, without):
        assert not any(cc.is_summarising(b) for b in run), "Claude Code sent a summarising request"
    # without lightmem2 every read is whole in every request
    for n, body in enumerate(without):
        reads = _reads(body)
        assert sorted(reads) == list(range(min(n, FILES))), f"vanilla request {n + 1}: {sorted(reads)}"
        assert all(t.rstrip("\n") == shards[k].rstrip("\n") for k, t in reads.items()), f"vanilla {n + 1}"

    # the compaction: the first request in which a read is a stub
    stubbed = [n for n, b in enumerate(bodies) if any(STUB_KEY.search(t) for t in _reads(b).values())]
    assert stubbed, "no read was ever paged out: the compaction did not happen"
    at = stubbed[0]
    assert stubbed == list(range(at, len(bodies))), stubbed
    for n in range(at):
        assert {k: t.rstrip("\n") for k, t in _reads(bodies[n]).items()} == {
            k: shards[k].rstrip("\n") for k in range(n)
        }, f"request {n + 1}: a read not whole before the compaction"
    reads = _reads(bodies[at])
    assert len(reads) == at
    gone = [k for k in range(at) if STUB_KEY.search(reads[k])]
    whole = [k for k in range(at) if reads[k].rstrip("\n") == shards[k].rstrip("\n")]
    print(f"request {at + 1}: reads {gone} paged out, {whole} whole")
    for k in gone:
        print(f"shard {k} as the model saw it: {reads[k][:400]!r}")
    assert gone and gone == list(range(len(gone))), gone  # the oldest went
    assert whole == list(range(len(gone), at)) and at - 1 in whole, whole  # the newest stayed whole
    assert RECORD in reads[gone[0]] and all(RECORD not in reads[k] for k in gone[1:])
    for k in gone:  # a batch archives its outputs as one document: each stub names its lines in it
        (key,) = STUB_KEY.findall(reads[k])
        hint = HINT.search(reads[k])
        assert hint is not None and hint.group(1) == key, reads[k]
        assert len(reads[k].split(RECORD)[0]) < 400, reads[k]
        assert cc.recover(key, (int(hint.group(2)), int(hint.group(3)))) == shards[k], k
        lines = f"{hint.group(2)}:{hint.group(3)}"
        assert cc.cli(check_env, work, "recover", key, "--lines", lines) == shards[k], k
    # every other message as the request before sent it: the user's prompt, what the assistant wrote
    before, now = cc.plain(bodies[at - 1]), cc.plain(bodies[at])
    assert now["system"] == before["system"] and now["tools"] == before["tools"]
    assert GOAL in cc.text(now["messages"][0]["content"])
    assert now["messages"][0] == before["messages"][0], "the user's prompt changed"
    stubbed_now = 0
    for i, msg in enumerate(before["messages"]):  # every block but the stubs as the request before sent it
        was, got = msg["content"], now["messages"][i]["content"]
        if isinstance(was, str):
            assert got == was, f"message {i} changed at the compaction"
            continue
        assert len(got) == len(was), f"message {i} changed at the compaction"
        for b_was, b_got in zip(was, got, strict=True):
            if (
                b_got != b_was
                and b_got.get("type") == "tool_result"
                and STUB_KEY.search(cc.text(b_got["content"]))
            ):
                stubbed_now += 1
                assert b_got["tool_use_id"] == b_was["tool_use_id"] and not b_got.get("is_error")
                continue
            assert b_got == b_was, f"message {i} changed at the compaction"
    assert stubbed_now == len(gone), stubbed_now

    # after it the prefix is stable: each later request extends request N
    for n in range(at + 1, len(bodies)):
        kept = history("anthropic", bodies[at])
        assert history("anthropic", bodies[n])[: len(kept)] == kept, (
            f"request {n + 1} does not extend {at + 1}"
        )
        assert {k: _reads(bodies[n])[k] for k in gone} == {k: reads[k] for k in gone}
    result = audit("anthropic", bodies, without, cc.recover, batches=[at])
    result.raise_if_faulty()

    # the ledger: one row per request, tokens as the provider counted; request N's row is the compaction
    (data,) = json.loads(cc.cli(check_env, work, "report", "--session", session, "--json"))["sessions"]
    rows = data["calls"]
    assert len(rows) == len(mask) and all(mask), "a side call reached the provider"
    audit_ledger(rows, usage, without_usage).raise_if_faulty()
    row = rows[at]
    print(f"ledger row {at + 1}: {row['breakReason']}")
    assert "compaction before the host's limit" in (row["breakReason"] or ""), row
    assert row["evictedTokens"] > 0 and all(r["evictedTokens"] == 0 for r in rows if r is not row), rows
    status = cc.cli(check_env, work, "status", "--session", session)
    print(status)
    assert "compactions before the host's limit: 1" in status, status
    print(f"claude-code compaction-before-the-host run: {time.monotonic() - started:.1f} s")
