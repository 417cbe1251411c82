"""What the model received from the real OpenClaw host, request by request, with lightmem2 and without.

``openclaw agent --local`` runs the shared scripted session (:data:`wire_audit.STEPS`: ten tool calls,
shell steps through OpenClaw's ``exec`` tool, the file read through its ``read`` tool, then
:data:`wire_audit.FINAL`) in one agent turn, once without the plugin and once with it (normal mode),
against a fake OpenAI-compatible provider that counts tokens with o200k. Checked, and why:

- :func:`wire_audit.audit` over the two runs' Chat Completions bodies: every tool output is verbatim
  or reduced to lines of itself plus stubs whose keys ``lightmem2 recover`` turns into part of the
  original; no stub refers to its own call (the once-seen bug: the repeated listing replaced by a
  reference to itself, which leaves the model nothing); the failing step's exit code and outcome
  words equal the run without lightmem2; each request extends the one before (OpenClaw's last
  message, its runtime context, is rebuilt on every call: ``transient_tail=1``).
- :func:`wire_audit.audit_ledger`: ``lightmem2 report --all --json`` has one row per model call, tokens
  sent equal to the provider's count, and ``realBaselineTokens`` (the provider's count plus what
  lightmem2 removed) within 2% of what the provider counted for the same call without lightmem2.
- sanity, so the audit cannot pass on a run that reduced nothing: >= 3 outputs stubbed, the repeated
  listing is a repeat stub with the first listing's key (naming no call: OpenClaw respells ids within
  a turn, after the plugin sees them), the failing step still shows its FAILED
  and "checks failed" lines and the nonzero exit as OpenClaw words it without lightmem2, and the
  session costs fewer prompt tokens than without.

Both runs' per-call figures go to ``wire-openclaw-<version>.json`` in the e2e cache folder.
"""

from __future__ import annotations

import json
import time
from typing import Any

import wire_audit
from fake_wire import Reply
from openclaw_e2e import VERSION, OpenClawEnv

CHAT_PATH = "/v1/chat/completions"


def replies() -> list[Reply]:
    """One model call per step (``exec`` for shell, ``read`` for the file), then the final text."""
    out: list[Reply] = []
    for step in wire_audit.STEPS:
        if step.kind == "read":
            out.append(Reply(text="", tool_calls=[("read", json.dumps({"path": step.path}))]))
        else:
            out.append(Reply(text="", tool_calls=[("exec", json.dumps({"command": step.command}))]))
    out.append(Reply(wire_audit.FINAL))
    return out


def run_session(env: OpenClawEnv) -> list[dict[str, Any]]:
    """The scripted session in one agent turn; the Chat Completions bodies the provider received."""
    wire_audit.write_workspace(env.workspace)
    env.fake.queue(*replies())
    done = env.agent(wire_audit.PROMPT)
    assert not env.fake.script, f"OpenClaw made fewer model calls than scripted:\n{done.stdout[-2000:]}"
    return [r.body for r in env.fake.received if r.path == CHAT_PATH]


def output_of(body: dict[str, Any], command: str, nth: int = 0) -> wire_audit.ToolOutput:
    """The ``nth`` output (0-based) of the exec call running ``command`` in a request."""
    found = [
        o
        for o in wire_audit.tool_outputs("chat", body)
        if json.loads(o.arguments or "{}").get("command") == command
    ]
    assert len(found) > nth, f"no output {nth + 1} of {command!r} in the request"
    return found[nth]


def test_what_the_model_received_with_lightmem2_is_the_same_session_reduced(make_env: Any) -> None:
    started = time.monotonic()
    counter = wire_audit.o200k_counter()
    vanilla = make_env("vanilla", plugin=False, counter=counter)
    without = run_session(vanilla)
    env = make_env("lightmem2", counter=counter)
    with_lm = run_session(env)
    assert len(with_lm) == len(without) == len(wire_audit.STEPS) + 1

    def recover(key: str) -> str | None:
        done = env.lightmem2_cli("recover", key)
        return done.stdout.decode("utf-8") if done.returncode == 0 else None

    checked = wire_audit.audit("chat", with_lm, without, recover, transient_tail=1)
    checked.raise_if_faulty()

    shown = env.lightmem2_cli("report", "--all", "--json")
    assert shown.returncode == 0, shown.stderr
    rows = [c for s in json.loads(shown.stdout)["sessions"] for c in s["calls"]]
    wire_audit.audit_ledger(rows, env.fake.reported, vanilla.fake.reported).raise_if_faulty()

    # sanity: the run reduced something, and the cases the audit exists for are in it
    assert checked.stubbed >= 3, checked
    last, plain_last = with_lm[-1], without[-1]
    first, again = output_of(last, wire_audit.LISTING, 0), output_of(last, wire_audit.LISTING, 1)
    # within one turn OpenClaw respells ids after the plugin sees them (call_1_0 -> call10 for an
    # openai-completions provider), so the repeat names no call; its key is the first listing's
    assert wire_audit.REPEAT_UNNAMED.match(again.text), again.text[:400]
    # for the same reason the listing's head again is a marker naming no call, recovered by its stub
    head = output_of(last, wire_audit.HEAD_AGAIN, 0)
    assert "[lightmem2 repeat: lines 1:20 of this output, as shown in an earlier output]" in head.text, (
        head.text[:400]
    )
    key = wire_audit.KEY.search(again.text)
    assert key is not None and key.group(1) in first.text, (first.text[-300:], again.text)
    failing, plain_failing = output_of(last, wire_audit.FAILING), output_of(plain_last, wire_audit.FAILING)
    for line in (
        "check_137 ... FAILED: expected 3 replicas, found 2 (quorum lost)",
        "1 of 180 checks failed",
    ):
        assert line in plain_failing.text and line in failing.text, failing.text[-1500:]
    codes = wire_audit.EXIT_CODE.findall(plain_failing.text)
    assert codes and codes[-1] == "3", plain_failing.text[-600:]  # how OpenClaw words the exit
    assert wire_audit.EXIT_CODE.findall(failing.text) == codes, failing.text[-600:]
    figures = {
        "without": wire_audit.per_call_figures(vanilla.fake.reported),
        "with": wire_audit.per_call_figures(env.fake.reported),
    }
    assert figures["with"]["prompt_tokens"] < figures["without"]["prompt_tokens"], figures

    results = {
        "host": f"openclaw {VERSION} agent --local, 1 turn, {len(with_lm)} model calls, normal mode",
        "tokens": "o200k",
        **figures,
        "audit": {
            "stubbed": checked.stubbed,
            "verbatim": checked.verbatim,
            "repeats": checked.repeats,
            "recovered": checked.recovered,
        },
        "runtime_s": round(time.monotonic() - started, 1),
    }
    out = env.host.cache.parent / f"wire-openclaw-{VERSION}.json"
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"\nopenclaw {VERSION} wire e2e ({out}):\n{json.dumps(results, indent=1)}")
