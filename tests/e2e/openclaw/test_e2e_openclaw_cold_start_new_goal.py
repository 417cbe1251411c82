"""OpenClaw 2026.9.6 on the Gateway, end to end: the user comes back after a pause with a new goal, and
normal mode reduces the finished task's read at that very call, the cold start (issue #42 item 1).

OpenClaw hands ``assemble()`` the history before the turn, without the turn's own prompt; it passes
the prompt apart (``params.prompt``). Without it in sight, at the first call after the pause the task
the user just closed looked unfinished, and the free break went by: "nothing kept whole was due"
(observed before the plugin sent the prompt; the cold-start test with thinking pauses before turn 3
for that reason). The plugin now sends ``prompt`` to the sidecar, which reads it for a new goal
(:attr:`lightmem_plugin.eviction.evictor.Evictor.upcoming`) and never sends it back.

The chat (the cold-start test's, on a model without thinking): turn 1 reads ``notes.py`` (~6,000
chars, kept whole on arrival), runs :data:`CHECKS` small commands and answers; after a pause of
:data:`PAUSE_S`, past the TTL (``eviction.cacheTtlS`` = :data:`TTL_S`; the fake's cache expires after
it too), turn 2 sets a new goal. Run without lightmem2 and with it (normal mode). Checked at the fake
provider, request by request:

- the fake's cache was cold at request ``COLD + 1`` (turn 2's first) in both runs;
- with lightmem2 the read is whole before it, and from it on reduced, with a stub whose key recovers
  the file byte-exact; the new goal's prompt is in that request once, where OpenClaw put it;
- ``wire_audit.audit``: outputs verbatim or recoverable, each request extending the one before but at
  ``COLD``; the ledger's row of ``COLD`` is the cold start with the batch that reduced the read.
"""

from __future__ import annotations

import json
import time
from typing import Any

import wire_audit
from e2e_support import STUB_KEY
from gateway_chat import chat_turns
from test_e2e_openclaw_cold_start import CHECKS, GOAL2, PAUSE_S, TTL_S, _notes, _read_text, turns
from test_e2e_openclaw_gateway import Gateway, on_gateway

API = "anthropic-messages"
MODEL = {"id": "fake-model", "reasoning": False, "contextWindow": 200_000}
COLD = CHECKS + 2  # 0-based: the read, the checks, the answer, then turn 2's first request


def run(gateway: Gateway) -> list[dict[str, Any]]:
    (gateway.env.workspace / "notes.py").write_text(_notes(), encoding="utf-8")
    return chat_turns(gateway, turns()[:2], "newgoal", {1: PAUSE_S})


def test_openclaw_cold_start_with_a_new_goal_reduces_the_finished_task_s_read(make_env: Any) -> None:
    started = time.monotonic()
    notes = _notes()
    counter = wire_audit.o200k_counter()
    plain_env = make_env("plain", plugin=False, counter=counter, api=API, ttl_s=TTL_S, **MODEL)
    plain = on_gateway(plain_env, run)
    env = make_env("lightmem2", counter=counter, api=API, ttl_s=TTL_S, **MODEL)
    env.set_lightmem2_keys(eviction={"cacheTtlS": TTL_S})
    bodies = on_gateway(env, run)
    fake, plain_fake = env.fake, plain_env.fake

    assert len(bodies) == len(plain) == COLD + 2, (len(bodies), len(plain))
    # the fake's cache expired over the pause in both runs
    for f in (fake, plain_fake):
        assert f.reported[COLD]["cached"] == 0 < f.reported[COLD - 1]["cached"], f.reported
    # before the pause the read is whole, as without lightmem2
    for n in range(1, COLD):
        assert _read_text(bodies[n]) == _read_text(plain[n]), f"request {n + 1}: read not as vanilla"
        assert _read_text(plain[n]).rstrip("\n") == notes.rstrip("\n")
    # at the cold start, with the new goal in sight: the read reduced, its key recovering it byte-exact
    seen = _read_text(bodies[COLD])
    print(f"\nthe read at the cold start ({len(seen)} of {len(notes)} chars):\n{seen}")
    keys = STUB_KEY.findall(seen)
    assert keys and len(seen) < 1_600 < len(notes), seen[:300]
    got = env.lightmem2_cli("recover", keys[0])
    assert got.returncode == 0 and got.stdout.decode().rstrip("\n") == notes.rstrip("\n")
    assert _read_text(bodies[COLD + 1]) == seen
    # the prompt goes out once, where OpenClaw puts it: the sidecar read it and sent none of it back
    users = [json.dumps(m) for m in bodies[COLD]["messages"] if m["role"] == "user"]
    assert sum(GOAL2 in u for u in users) == 1, users

    def recover(key: str) -> str | None:
        done = env.lightmem2_cli("recover", key)
        return done.stdout.decode("utf-8") if done.returncode == 0 else None

    wire_audit.audit("anthropic", bodies, plain, recover, batches=[COLD], transient_tail=1).raise_if_faulty()

    # the ledger: the cold start at call COLD + 1, and its batch
    report = env.lightmem2_cli("report", "--all", "--json")
    assert report.returncode == 0, report.stderr
    (session,) = json.loads(report.stdout)["sessions"]
    rows = session["calls"]
    assert len(rows) == len(bodies)
    assert [c["call"] for c in session["summary"]["coldStarts"]] == [COLD + 1], session["summary"]
    row = rows[COLD]
    assert "1 output kept whole reduced again at a cold start" in (row["breakReason"] or ""), row
    assert all(r["evictedTokens"] == 0 for r in rows if r is not row), rows
    print(f"openclaw cold start with a new goal: {time.monotonic() - started:.1f} s")
