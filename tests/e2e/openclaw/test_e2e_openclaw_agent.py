"""``openclaw agent --local`` over a scripted session with tool calls, with and without lightmem2.

What must hold on the real host: the plugin loads from our installer's config; a large tool output
reaches the provider reduced, with a stub whose key ``lightmem2 recover KEY`` turns back into the
original byte for byte; the transcript replays that same reduced form on later turns (the head and
history stay byte-stable, so the provider's prefix cache keeps hitting); the session costs fewer
tokens than the same session without the plugin; and with the sidecar broken OpenClaw still works,
unmodified. The fake provider's cache figures for both runs go to ``openclaw-agent-results.json`` in
the e2e cache folder.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from fake_wire import Reply
from openclaw_e2e import OpenClawEnv

from lightmem_plugin.store.registry import SHORT_KEY_CHARS, content_key

STUB = re.compile(r"\[lightmem2: [^\]]*?([0-9a-f]{12,32})[^\]]*\]")
TURNS = [
    (
        "please read big.log",
        [Reply(text="", tool_calls=[("read", '{"path":"big.log"}')]), Reply("I read it.")],
    ),
    (
        "now count to 1500",
        [Reply(text="", tool_calls=[("exec", '{"command":"seq 1 1500"}')]), Reply("Counted.")],
    ),
    ("thanks", [Reply("bye")]),
]


VIEW_CHARS = 8000  # reduction.normal.fileViewChars in the session whose read is cut


def big_log() -> bytes:
    """~23 KB of log lines, different enough that no pass can shrink it without a stub."""
    lines = [
        f"2026-01-01 12:{i // 60:02d}:{i % 60:02d} INFO worker[{i % 7}] batch {i} took {(i * 7919) % 997} ms"
        for i in range(400)
    ]
    return ("\n".join(lines) + "\n").encode()


def run_session(env: OpenClawEnv) -> list[dict[str, Any]]:
    (env.workspace / "big.log").write_bytes(big_log())
    for message, replies in TURNS:
        env.fake.queue(*replies)
        done = env.agent(message)
        # the plugin adds one exit hook per process, not one per copy of its module OpenClaw loads
        assert "MaxListenersExceededWarning" not in done.stderr, done.stderr[-2000:]
    assert not env.fake.script, "OpenClaw made fewer model calls than scripted"
    return [r.body for r in env.fake.received]


def tool_text(body: dict[str, Any], call_name: str) -> str:
    calls = {
        c["id"]: c["function"]["name"]
        for m in body["messages"]
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
    }
    for m in body["messages"]:
        if m["role"] == "tool" and calls.get(m["tool_call_id"]) == call_name:
            content = m["content"]
            return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    raise AssertionError(f"no {call_name} result in the request")


def k_cost(reported: list[dict[str, int]]) -> float:
    return sum(0.1 * r["cached"] + (r["prompt"] - r["cached"]) for r in reported)


def hit_rate(reported: list[dict[str, int]]) -> float:
    return sum(r["cached"] for r in reported) / sum(r["prompt"] for r in reported)


def test_agent_session_is_reduced_recoverable_and_cheaper(make_env: Any) -> None:
    vanilla = make_env("vanilla", plugin=False)
    plain = run_session(vanilla)
    env = make_env("lightmem2")
    # the reduce-and-recover path needs a read over fileViewChars; OpenClaw's read stops near 32 KB,
    # and the default (24,000) would leave too little to cut, so the view budget is set where a user sets it
    env.set_lightmem2_keys(reduction={"normal": {"fileViewChars": VIEW_CHARS}})
    bodies = run_session(env)
    assert len(bodies) == len(plain) == 5

    # the plugin is loaded as the context engine, from the config our installer wrote
    inspect = env.openclaw("plugins", "inspect", "lightmem2", "--runtime", "--json")
    info = json.loads(inspect.stdout[inspect.stdout.index("{") :])["plugin"]
    assert info["status"] == "loaded" and info["contextEngineIds"] == ["lightmem2"]

    # a reduced tool output with a recoverable stub; recovery is byte-exact
    original = big_log().decode()
    assert tool_text(plain[1], "read") == original
    seen = tool_text(bodies[1], "read")
    # a file the agent read is a file view (the middleware names the tool): whole up to fileViewChars,
    # set to 8,000 here (the default, 24,000, keeps this whole), then its outline, head and tail
    assert len(original) > VIEW_CHARS and len(seen) < len(original) // 2
    stub = STUB.search(seen)
    assert stub is not None, seen[:2000]
    assert "lightmem2_recover" in stub.group(0)
    assert seen.splitlines()[0] == original.splitlines()[0]  # kept lines are verbatim
    recovered = env.lightmem2_cli("recover", stub.group(1))
    assert recovered.returncode == 0, recovered.stderr
    assert recovered.stdout == big_log()
    count = tool_text(bodies[3], "exec")
    assert STUB.search(count) and len(count) < len(tool_text(plain[3], "exec"))

    # stable head and append-only history: every request starts with the previous one's history
    for body in bodies:
        assert body["messages"][0] == bodies[0]["messages"][0]  # the system prompt
        assert body["messages"][1] == bodies[0]["messages"][1]  # the first user message
    for before, after in itertools.pairwise(bodies):
        history = before["messages"][:-1]  # the last message is OpenClaw's transient runtime context
        assert after["messages"][: len(history)] == history
        assert tool_text(after, "read") == seen

    # the ledger has one row per model call, each with the usage the provider reported for that call
    # (OpenClaw assembles once per turn: before, 3 turns showed as 3 calls, and turn 1 not at all)
    shown = env.lightmem2_cli("report", "--all", "--json")
    assert shown.returncode == 0, shown.stderr
    rows = [c for s in json.loads(shown.stdout)["sessions"] for c in s["calls"]]
    assert [r["call"] for r in rows] == [1, 2, 3, 4, 5], rows
    assert [(r["realInputTokens"], r["realCacheRead"]) for r in rows] == [
        (r["prompt"], r["cached"]) for r in env.fake.reported
    ]
    # status says what the provider received in the newest call (its own count, system prompt and
    # tools included), and more without lightmem2 (the tool outputs whole)
    state = env.lightmem2_cli("status", "--json")
    assert state.returncode == 0, state.stderr
    summary = json.loads(state.stdout)["session"]
    assert summary["calls"] == 5 and summary["contextCountedBy"] == "provider", summary
    assert summary["contextTokens"] == env.fake.reported[-1]["prompt"]
    assert summary["contextTokensWithout"] > summary["contextTokens"]
    assert all(r["baselineTokens"] >= r["inputTokens"] for r in rows)
    assert rows[-1]["baselineTokens"] > 2 * rows[-1]["inputTokens"]  # the outputs count whole without us

    # cheaper by the fake provider's own cache figures; the head stays cached
    with_plugin, without = env.fake.reported, vanilla.fake.reported
    assert sum(r["prompt"] for r in with_plugin) < 0.85 * sum(r["prompt"] for r in without)
    assert k_cost(with_plugin) < 0.85 * k_cost(without)
    assert hit_rate(with_plugin) >= hit_rate(without) - 0.02
    for r in with_plugin[1:]:
        assert r["cached"] >= 0.9 * with_plugin[0]["prompt"]
    results = {
        "host": "openclaw 2026.9.6 agent --local, 3 turns, 5 model calls",
        "vanilla": {"hit_rate": hit_rate(without), "prompt_tokens": sum(r["prompt"] for r in without)},
        "lightmem2": {
            "hit_rate": hit_rate(with_plugin),
            "prompt_tokens": sum(r["prompt"] for r in with_plugin),
        },
        "k_ratio": k_cost(with_plugin) / k_cost(without),
        "calls": {"vanilla": without, "lightmem2": with_plugin},
    }
    out = env.host.cache.parent / "openclaw-agent-results.json"
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(
        f"\nopenclaw e2e: hit rate vanilla {hit_rate(without):.1%}, lightmem2 {hit_rate(with_plugin):.1%}; "
        f"prompt tokens {results['vanilla']['prompt_tokens']} -> {results['lightmem2']['prompt_tokens']}; "
        f"K ratio {results['k_ratio']:.2f} ({out})"
    )


def test_a_broken_sidecar_leaves_openclaw_unmodified(make_env: Any, tmp_path: Path) -> None:
    env = make_env("failopen")
    env.set_plugin_settings(command=str(tmp_path / "no-such-lightmem2"), startTimeoutMs=3000)
    (env.workspace / "big.log").write_bytes(big_log())
    env.fake.queue(*TURNS[0][1])
    done = env.agent(TURNS[0][0])
    assert '"stopReason": "stop"' in done.stdout or "I read it." in done.stdout
    assert tool_text(env.fake.received[1].body, "read") == big_log().decode()


def _result_of(body: dict[str, Any], call_id: str) -> str:
    for m in body["messages"]:
        if m["role"] == "tool" and m["tool_call_id"] == call_id:
            content = m["content"]
            return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    raise AssertionError(f"no result of {call_id} in the request")


def _call_ids(body: dict[str, Any], name: str) -> list[str]:
    return [
        c["id"]
        for m in body["messages"]
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == name
    ]


def test_the_model_recovers_a_stub_through_tool_search_under_the_coding_profile(make_env: Any) -> None:
    """OpenClaw 2026.9.6 offers plugin tools through Tool Search (tool_search, then tool_call by id) and
    keeps them under a tool profile only when the manifest's toolMetadata names it. The model finds
    lightmem2_recover there and gets the original back whole: before, the catalog was cut to its first
    items and the recovered original was reduced again, into a stub of itself."""
    env = make_env("coding-profile")
    data = env.config()
    data.setdefault("tools", {})["profile"] = "coding"
    env.write_config(data)
    env.set_lightmem2_keys(reduction={"normal": {"fileViewChars": VIEW_CHARS}})  # the read gets a stub
    (env.workspace / "big.log").write_bytes(big_log())
    key = content_key(big_log())
    env.fake.queue(*TURNS[0][1])
    env.agent(TURNS[0][0])
    recover = {"id": "openclaw:lightmem2:lightmem2_recover", "args": {"key": key}}
    env.fake.queue(
        Reply(
            text="",
            tool_calls=[("tool_search", json.dumps({"query": "recover archived original lightmem2"}))],
        ),
        Reply(text="", tool_calls=[("tool_call", json.dumps(recover))]),
        Reply("Recovered."),
    )
    env.agent("recover the whole log")
    bodies = [r.body for r in env.fake.received]
    assert len(bodies) == 5
    assert key[:SHORT_KEY_CHARS] in json.dumps(bodies[1]) and big_log().decode() not in json.dumps(
        bodies[1]
    )  # the read: a stub
    catalog = _result_of(bodies[3], _call_ids(bodies[3], "tool_search")[0])
    assert "[lightmem2:" not in catalog, catalog[-400:]  # the catalog reached the model whole
    assert '"name": "lightmem2_recover"' in catalog and '"name": "lightmem2_search"' in catalog
    wrapped = json.loads(_result_of(bodies[4], _call_ids(bodies[4], "tool_call")[0]))  # OpenClaw's envelope
    assert wrapped["tool"]["name"] == "lightmem2_recover"
    assert [p["text"] for p in wrapped["result"]["content"]] == [big_log().decode()]
