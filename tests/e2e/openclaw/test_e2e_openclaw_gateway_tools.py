"""Gateway chat with tool calls, with and without lightmem2: no output may become a reference to itself.

On the Gateway path OpenClaw 2026.9.6 hands a tool output to lightmem2 twice: through the tool-result
middleware (``/sidecar/toolResult``) within the turn, and through the context engine's ``assemble()``
(``/sidecar/assemble``) on every later turn. Both sightings must give the model the same bytes, and
dedup must never turn an output into "identical to the output of tool call X" where X is its own
call. Checked request by request at the fake provider, against the same chat without lightmem2:
every tool output the model received is verbatim, or a reduction whose stub key recovers it byte for
byte, and never a reference to its own call; the history only grows (prefix kept).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from pathlib import Path
from typing import Any

from e2e_support import STUB_KEY, cache_figures
from fake_wire import Reply
from test_e2e_openclaw_gateway import Gateway, on_gateway, wait_for

from lightmem_plugin.reduction.dedup import call_key as dedup_key

SELF_REF = re.compile(r"\[lightmem2: identical to the output of tool call (\S+) ")
# ~670 chars of grep output: under every reduction trigger, over dedup's minimum
NOTES = "".join(
    f"note {i}: the {'read' if i % 2 else 'write'} cache for shard {i} keeps {i * 37 % 101} entries\n"
    if i % 3 != 2
    else f"note {i}: unrelated line {i}\n"
    for i in range(24)
)
GREP = "grep -n cache notes.txt"
BIG = "seq -f 'row %g: compiled module ok' 1 400"  # ~10 KB: reduced with a stub
TURNS = [
    ("where is the cache configured?", [("exec", {"command": GREP}), "It is in notes.txt."]),
    ("and count the rows", [("exec", {"command": BIG}), "Counted."]),
    ("grep it once more", [("exec", {"command": GREP}), "Same as before."]),
    ("thanks", ["bye"]),
]


def _replies(steps: list[Any]) -> list[Reply]:
    return [
        Reply(text="", tool_calls=[(s[0], json.dumps(s[1]))]) if isinstance(s, tuple) else Reply(s)
        for s in steps
    ]


def _tool_outputs(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(tool_call_id, text) of every tool message in a chat-completions request."""
    out = []
    for m in body.get("messages") or []:
        if m.get("role") == "tool":
            c = m.get("content")
            out.append(
                (
                    str(m.get("tool_call_id")),
                    c if isinstance(c, str) else "".join(p.get("text", "") for p in c),
                )
            )
    return out


def _last_answer(gateway: Gateway) -> str | None:
    """The text of the transcript's last message when it is the assistant's, else None."""
    msgs = gateway.call("chat.history", {"sessionKey": "agent:main:main"})["messages"]
    final = msgs[-1] if msgs else {}
    content = final.get("content")
    shown = content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])
    return shown if final.get("role") == "assistant" else None


def run_chat(gateway: Gateway) -> list[dict[str, Any]]:
    """Every turn of :data:`TURNS` through ``chat.send``; the request bodies the provider received."""
    env = gateway.env
    (env.workspace / "notes.txt").write_text(NOTES, encoding="utf-8")
    expected_calls = 0
    for n, (text, steps) in enumerate(TURNS):
        env.fake.queue(*_replies(steps))
        expected_calls += len(steps)
        params = {"sessionKey": "agent:main:main", "message": text, "idempotencyKey": f"tools-{n}"}
        ack = gateway.call("chat.send", params)
        assert ack.get("status") in ("started", "ok", "completed"), ack
        wait_for(lambda c=expected_calls: len(env.fake.received) >= c, 180, f"the model calls of {text!r}")
        wait_for(lambda a=steps[-1]: _last_answer(gateway) == a, 120, f"the answer to {text!r}")
    assert len(env.fake.received) == expected_calls
    return [r.body for r in env.fake.received]


def test_gateway_tool_outputs_are_never_references_to_themselves(make_env: Any, tmp_path: Path) -> None:
    plain_env = make_env("plain", plugin=False)
    plain = on_gateway(plain_env, run_chat)
    env = make_env("lightmem2")
    if os.environ.get("LIGHTMEM2_E2E_SIDECAR_LOGGER"):
        env.set_plugin_settings(command=os.environ["LIGHTMEM2_E2E_SIDECAR_LOGGER"])
    bodies = on_gateway(env, run_chat)
    assert len(bodies) == len(plain) == sum(len(steps) for _, steps in TURNS)

    recovered: dict[str, bytes] = {}

    def recovers(key: str, expected: str) -> bool:
        if key not in recovered:
            done = env.lightmem2_cli("recover", key)
            assert done.returncode == 0, done.stderr
            recovered[key] = done.stdout
        return recovered[key] == expected.encode()

    stubbed = 0
    for n, (body, vanilla) in enumerate(zip(bodies, plain, strict=True)):
        seen, want = _tool_outputs(body), _tool_outputs(vanilla)
        assert [c for c, _ in seen] == [c for c, _ in want], f"request {n}: other tool calls"
        for j, ((cid, text), (_, expected)) in enumerate(zip(seen, want, strict=True)):
            ref = SELF_REF.search(text)
            if ref is not None:  # a repeat names an earlier call of this request, never itself
                earlier = [dedup_key(c) for c, _ in seen[:j]]
                assert dedup_key(ref.group(1)) != dedup_key(cid), (
                    f"request {n}: {cid} refers to itself: {text}"
                )
                assert dedup_key(ref.group(1)) in earlier, (
                    f"request {n}: {cid} refers to an unknown call: {text}"
                )
            if text == expected:
                continue
            keys = STUB_KEY.findall(text)
            assert keys, f"request {n}, {cid}: changed without a stub: {text[:300]!r}"
            assert any(recovers(k, expected) for k in keys), f"request {n}, {cid}: no key recovers the output"
            stubbed += 1
    assert stubbed, "nothing was reduced: the big output should carry a stub"
    # the history only grows: each request starts with the previous one's history
    for before, after in itertools.pairwise(bodies):
        history = before["messages"][:-1]
        assert after["messages"][: len(history)] == history

    with_lm, without = cache_figures(env.fake.reported), cache_figures(plain_env.fake.reported)
    figures = {
        "host": "openclaw 2026.9.6 gateway chat, 4 turns",
        "with_lightmem2": with_lm,
        "without": without,
    }
    print("\nopenclaw gateway tool figures:", json.dumps(figures))
    (env.host.cache.parent / "openclaw-gateway-tools-results.json").write_text(
        json.dumps(figures, indent=1) + "\n"
    )
    assert with_lm["prompt_tokens"] < without["prompt_tokens"]
    assert with_lm["K"] < without["K"]
