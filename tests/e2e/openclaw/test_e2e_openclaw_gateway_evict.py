"""Gateway chat in aggressive mode: a finished task leaves the context as one summary message.

OpenClaw 2026.9.6 calls the context engine's ``assemble()`` once per turn, with the history before
the turn; the turn's model calls are counted from ``commitTurn`` (one ledger row each), and eviction
checks run at an assemble at least three calls after the last one. The chat: task 1 (two large
reads, four large file writes, an answer: 7 model calls), then eight more goals of one small command
each (2 calls). Turn t assembles at call 8 + 2 (t - 2); the checks run at turns 2, 4, 6, ... The
plugin sends each turn's prompt with the history it assembles (OpenClaw hands ``assemble()`` the
history without it), so goal 2 is in sight at turn 2's assemble and task 1 closes at that check
(``completed``, then ``evictable``: a goal closes in the first batch after the next goal; before the
plugin sent the prompt, goal 2 was first seen at turn 3 and task 1 left at turn 4); there the cost rule (the
default one) pays, and from that turn on the model
must see task 1 as one assistant message, built by the plugin in OpenClaw's own shape from the
sidecar's ``collapsed`` ranges.

Checked request by request at the fake provider, against the same chat without lightmem2: every
request from the batch on is shorter than the host's own and holds the one summary; what stood before
it (system prompt, the first goal) is as before; no tool result lacks its call; each request
extends the one before; the summary's key recovers task 1 (every output the model saw and every file
written, byte for byte, and through the outputs' own stubs the files read); the later commands ran
and every turn got its answer; ``lightmem2 report`` names the batch.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from typing import Any

from e2e_support import STUB_KEY, cache_figures
from gateway_chat import chat_turns
from test_e2e_openclaw_gateway import Gateway, on_gateway
from test_e2e_openclaw_gateway_tools import _tool_outputs

GOAL1 = "Read both logs, then write the design notes for every shard."
MARKER = "[lightmem2: task 1 finished"
NOTES = 4
LATER = 8  # goals after the first: enough turns for two checks and a few turns after the batch
BATCH_TURN = 2  # see the module docstring


def log_text(name: str) -> str:
    """~26 KB of log lines, distinct per file: over fileViewChars (24,000), so a read of it is cut with
    a stub."""
    return "".join(
        f"2026-01-01 12:{i // 60:02d}:{i % 60:02d} INFO {name}[{i % 7}] batch {i} took {(i * 7919) % 997} ms\n"
        for i in range(520)
    )


def notes(i: int) -> str:
    """~12 KB of notes the model writes (tool-call arguments: no reduction shortens them)."""
    return "".join(
        f"## Shard {i}.{n}\nThe handler for shard {n} routes requests to table {n * 7919 % 997} "
        f"and retries {n % 5} times.\n"
        for n in range(115)
    )


def assert_task1_archived(
    archived: str, seen: dict[str, str], task1: set[str], recover: Callable[[str], str | None]
) -> None:
    """Task 1's archive holds each of its outputs as the model saw them (``seen``: call id -> text)
    and each notes file it wrote, byte for byte; the two reads, reduced, name stubs that ``recover``
    turns into the logs."""
    assert task1 <= set(seen)
    for cid in sorted(task1):
        assert seen[cid] in archived, f"the output of {cid} is not archived verbatim"
    for i in range(NOTES):
        assert f"\n{notes(i)}\n" in archived, f"notes {i} are not archived whole"
    reads = [seen[c] for c in sorted(task1) if "Successfully wrote" not in seen[c]]
    assert len(reads) == 2
    for output in reads:
        inner = STUB_KEY.findall(output)
        assert inner, f"a read should have been reduced with a stub: {output[:200]!r}"
        assert recover(inner[0]) in {log_text("a"), log_text("b")}


def turns() -> list[tuple[str, list[Any]]]:
    first: list[Any] = [("read", {"path": "logs/a.log"}), ("read", {"path": "logs/b.log"})]
    first += [("write", {"path": f"notes/shard_{i}.md", "content": notes(i)}) for i in range(NOTES)]
    first.append("Read the logs and wrote the notes.")
    later = [
        (f"run release step {k}", [("exec", {"command": f"echo release step {k} ok"}), f"Step {k} done."])
        for k in range(1, LATER + 1)
    ]
    return [(GOAL1, first), *later]


def run_chat(gateway: Gateway) -> list[dict[str, Any]]:
    """Every turn through ``chat.send``; the request bodies the provider received."""
    env = gateway.env
    (env.workspace / "logs").mkdir()
    for name in ("a", "b"):
        (env.workspace / "logs" / f"{name}.log").write_text(log_text(name), encoding="utf-8")
    return chat_turns(gateway, turns(), "evict")


def _text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])


def _calls(body: dict[str, Any]) -> list[str]:
    return [c["id"] for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]


def test_gateway_aggressive_collapses_a_finished_task(make_env: Any) -> None:
    plain_env = make_env("plain", plugin=False)
    plain = on_gateway(plain_env, run_chat)

    env = make_env("lightmem2")
    # aggressive mode set where an OpenClaw user sets it: in openclaw.json (DESIGN 6: it takes effect)
    env.set_lightmem2_keys(mode="aggressive")
    bodies = on_gateway(env, run_chat)
    assert len(bodies) == len(plain)
    # the plugin wrote it into lightmem2's own config, so the CLI and doctor see the same mode
    config = json.loads((env.lightmem2_home / "config.json").read_text(encoding="utf-8"))
    assert config["mode"] == "aggressive" and config["server"]["port"] == env.sidecar_port

    # the batch: the first turn whose requests carry task 1's summary
    first_of_turn = list(itertools.accumulate([0] + [len(steps) for _, steps in turns()]))
    batch = next((n for n, b in enumerate(bodies) if MARKER in json.dumps(b)), None)
    assert batch == first_of_turn[BATCH_TURN - 1], f"task 1 left at request {batch}"
    before = bodies[batch - 1]
    task1_calls = set(_calls(bodies[first_of_turn[1] - 1]))
    assert len(task1_calls) == 2 + NOTES
    for n in range(batch, len(bodies)):
        msgs = bodies[n]["messages"]
        # shorter than what OpenClaw sent without lightmem2 (the first one even than the request
        # before it, though the host only appends)
        assert len(msgs) < len(plain[n]["messages"]), n
        assert n > batch or len(msgs) < len(before["messages"])
        at = [i for i, m in enumerate(msgs) if m["role"] == "assistant" and MARKER in _text(m.get("content"))]
        assert len(at) == 1, f"request {n}: {len(at)} summaries"
        summary = msgs[at[0]]
        assert not summary.get("tool_calls") and at[0] == 2
        # the system prompt and the first goal, verbatim, as before the batch
        assert msgs[: at[0]] == before["messages"][: at[0]]
        assert GOAL1 in _text(msgs[1]["content"])
        # task 1's calls left with their results; no tool result without its call
        calls = _calls(bodies[n])
        assert not task1_calls & set(calls)
        assert all(m["tool_call_id"] in calls for m in msgs if m["role"] == "tool"), n
    # each request extends the one before (the last message is OpenClaw's transient runtime context)
    for a, b in itertools.pairwise(bodies[batch:]):
        history = a["messages"][:-1]
        assert b["messages"][: len(history)] == history

    # the summary's key recovers task 1: each output the model saw and each file written, byte for
    # byte; the reduced reads' own stubs recover the logs
    text = _text(bodies[-1]["messages"][2]["content"])
    assert re.match(
        r"\[lightmem2: task 1 finished; its 13 messages \(6 tool calls\) archived as [0-9a-f]{12,32}", text
    )
    print("\nopenclaw task 1 summary, as the model received it:\n" + text)
    # what it did and how it ended, as the model reads it in later tasks: the files it wrote (new
    # files, so created), no test run (none ran), its last reply
    shards = ", ".join(f"notes/shard_{i}.md" for i in range(NOTES))
    assert f"\nFiles created: {shards}\n" in text and "Files modified" not in text, text
    assert "Tests run" not in text and "Ended failing" not in text, text
    assert text.endswith("\nLast reply:\nRead the logs and wrote the notes."), text
    key = STUB_KEY.search(text)
    assert key is not None, text
    archive = env.lightmem2_cli("recover", key.group(1))
    assert archive.returncode == 0, archive.stderr
    archived = archive.stdout.decode()

    def recover(key: str) -> str | None:
        got = env.lightmem2_cli("recover", key)
        return got.stdout.decode() if got.returncode == 0 else None

    assert_task1_archived(archived, dict(_tool_outputs(before)), task1_calls, recover)

    # the session went on: each later step ran (its output reached the model) and was answered
    outputs = [t for _, t in _tool_outputs(bodies[-1])]
    assert outputs == [f"release step {k} ok" for k in range(1, LATER + 1)]

    report = env.lightmem2_cli("report", "--all")
    assert report.returncode == 0, report.stderr
    shown = report.stdout.decode()
    print("\nopenclaw aggressive report:\n" + shown)
    # named at the call that is the provider's request number: one ledger row per model call
    named = re.search(r"^evictions: 1 batches, [\d,]+ tokens \(calls (\d+)\)$", shown, re.M)
    assert named is not None and int(named.group(1)) == batch + 1, shown
    assert f"call {batch + 1} at message " in shown and ": eviction batch" in shown
    with_lm, without = cache_figures(env.fake.reported), cache_figures(plain_env.fake.reported)
    print("openclaw aggressive cache figures:", json.dumps({"with_lightmem2": with_lm, "without": without}))
    assert with_lm["prompt_tokens"] < without["prompt_tokens"]
