"""OpenClaw 2026.9.6 on the Gateway, end to end: aggressive mode compacts before the host does (issue #42).

OpenClaw's provider speaks Anthropic Messages to the fake provider with a small window
(``contextWindow`` = :data:`WINDOW`). OpenClaw compacts past ``WINDOW - reserve`` (the reserve
``min(max(reserveTokens, 20000), WINDOW / 4)``: :data:`HOST_AT`), and before that, past
``HOST_AT - 4000`` (:data:`FLUSH_AT`), runs a "Pre-compaction memory flush" turn through the agent;
both are decided before a turn from the last turn's usage. Its summary comes in calls of their own,
recognised at the fake by OpenClaw's prompts (:func:`host_call`) and answered apart from the chat's
script. lightmem2 is in aggressive mode with its compaction defaults (``batchTurns`` 1, ``finishedTasks``
off: every turn here is a new goal, and a finished task collapsing would be another test's subject):
no threshold is configured, so the one it compacts under is the budget OpenClaw tells ``assemble()``
for the messages (its window less the reserve and the prompt, ~34,000 here), not the 180,000 of a
200k window; its margin and kept window are the defaults scaled to that budget (41% and 25% of it, the kept window at least the newest read).

The chat: :data:`READS` turns that each read one file of ~:data:`FILE_CHARS` chars (~6,550 o200k
tokens) and answer, then :data:`SMALL` turns of one small command each. OpenClaw calls ``assemble()``
once per turn, so lightmem2 compacts at a turn's first call, with the history before the turn.
Observed: without lightmem2 the memory flush came before turn 6 (after 45,830 tokens) and the summary
inside it, after its last reply (50,647); with lightmem2, told a budget of 34,086, compactions at
requests 7 and 11 (turns 4 and 6; messages ~24,400 -> ~8,500 each time), the provider's input never
past 33,007.

Checked request by request at the fake provider, against the same chat without lightmem2:

- without lightmem2 OpenClaw flushes its memory and summarises (its calls reach the fake, its
  transcript gets a ``compaction`` entry);
- with lightmem2 each compaction's ledger row names the threshold it was under, this window's budget
  (between ``HOST_AT - 20000`` and ``HOST_AT``), not a 200k window's 180,000;
- at the first (request ``N``, a turn's first) the older reads are stubs, the first carrying the
  session record, the newest read whole; by the last request every stubbed read's key and lines give
  it back byte-exact through ``lightmem2 recover``; at each compaction the user's prompts and every
  other message are as the request before sent them; between compactions each request extends the
  last compaction's; no memory flush, no summarising request, no ``compaction`` entry in OpenClaw's
  transcript;
- ``report --json``: one row per request at the provider's count, only the compactions' rows page
  anything out, each with miss causes naming "lightmem2 change"; each row's miss causes sum to what
  the provider reported uncached; ``status`` counts the compactions.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import wire_audit
from e2e_support import STUB_KEY
from fake_upstream import FakeUpstream, strip_marks
from fake_wire import Reply
from gateway_chat import chat_turns, history, is_compaction
from test_e2e_openclaw_gateway import Gateway, on_gateway

API = "anthropic-messages"
WINDOW = 64_000
HOST_AT = WINDOW - min(20_000, WINDOW // 4)  # 48,000: OpenClaw compacts past it
FLUSH_AT = HOST_AT - 4_000  # its memory flush
MODEL = {"id": "fake-model", "reasoning": False, "contextWindow": WINDOW}
READS = 6
SMALL = 2
FILE_CHARS = 16_000
RECORD = "[lightmem2 session record]"
HINT = re.compile(r'archived as ([0-9a-f]{12,32}) .*?lightmem2_recover\(key, lines="(\d+):(\d+)"\)')
"""A compaction stub on OpenClaw names the recover tool's form (the host has it), with the lines of
the output in the batch's archive."""
LIMIT = re.compile(r"the host's limit ([0-9,]+)\)")
"""The threshold a compaction's ledger row names (:meth:`lightmem_plugin.eviction.state.Compaction.describe`)."""
FLUSH = "Pre-compaction memory flush"
SUMMARISE = (
    "The messages above are a conversation to summarize",
    "The messages above are NEW conversation messages",
    "This is the PREFIX of a turn that was too large to keep",
)


def _file(n: int) -> str:
    """~FILE_CHARS chars of distinct lines: file ``n`` (under fileViewChars: it arrives whole)."""
    lines, i = [], 0
    while sum(map(len, lines)) < FILE_CHARS:
        lines.append(
            f"part {n} row {i}: owner=team-{(n * 7 + i) % 13} quota={n * 100 + i * 3} zone=z{i % 4}\n"
        )
        i += 1
    return "".join(lines)


def _name(n: int) -> str:
    return f"part_{n}.txt"


def turns() -> list[Any]:
    out: list[Any] = [
        (f"Read {_name(n)} and note its owners.", [("read", {"path": _name(n)}), f"Part {n} noted."])
        for n in range(READS)
    ]
    out += [
        (f"Run check {k}.", [("exec", {"command": f"echo check {k} ok"}), f"Check {k} passed."])
        for k in range(SMALL)
    ]
    return out


def _text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content or [])


def _last_user(body: dict[str, Any]) -> str:
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    return _text(users[-1].get("content")) if users else ""


def host_call(body: dict[str, Any]) -> str | None:
    """ "flush" for OpenClaw's memory-flush turn, "summary" for a summarising call, None for the chat."""
    system = _text(body.get("system"))
    last = _last_user(body)
    if FLUSH in last or FLUSH in system:
        return "flush"
    if any(s in last or s in system for s in SUMMARISE):
        return "summary"
    return None


class HostAwareUpstream(FakeUpstream):
    """The fake provider answering OpenClaw's own calls (memory flush, summary) apart from the chat's
    queued replies, and remembering which requests they were."""

    def __init__(self, counter: Any = None, ttl_s: float | None = None) -> None:
        super().__init__(counter, ttl_s)
        self.host_calls: list[tuple[int, str]] = []
        """(index among the model requests, "flush" or "summary") of each of OpenClaw's own calls."""
        self.kinds: list[str | None] = []
        """Per model request (in the order of :attr:`reported`): its :func:`host_call` kind."""

    async def _read(self, request: Any) -> Any:
        body = await super()._read(request)
        if request.url.path == "/v1/messages" and isinstance(body, dict):
            kind = host_call(body)
            self.kinds.append(kind)
            if kind is not None:
                self.host_calls.append((len(self.kinds) - 1, kind))
                reply = (
                    Reply("NO_REPLY") if kind == "flush" else Reply("## Goal\nNote the owners of each part.")
                )
                self.script.appendleft(reply)
        return body


def run(gateway: Gateway) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The chat's request bodies at the provider, and the compaction entries of OpenClaw's transcript
    (``chat.history``)."""
    for n in range(READS):
        (gateway.env.workspace / _name(n)).write_text(_file(n), encoding="utf-8")
    try:
        bodies = chat_turns(gateway, turns(), "compact", agent=lambda body: host_call(body) is None)
        return bodies, [m for m in history(gateway) if is_compaction(m)]
    except AssertionError:
        fake = gateway.env.fake
        assert isinstance(fake, HostAwareUpstream)
        for n, r in enumerate(r for r in fake.received if r.path == "/v1/messages"):
            u = fake.reported[n] if n < len(fake.reported) else None
            print(n, fake.kinds[n], u, len(r.body.get("messages") or []), repr(_last_user(r.body)[:150]))
        msgs = gateway.call("chat.history", {"sessionKey": "agent:main:main"})["messages"]
        for m in msgs[-4:]:
            print("HISTORY", json.dumps(m)[:600])
        raise


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def _reads(body: dict[str, Any]) -> dict[int, str]:
    """The text of each file's read in a request, by file number."""
    out = {}
    for o in wire_audit.tool_outputs("anthropic", body):
        for n in range(READS):
            if _name(n) in o.arguments:
                out[n] = o.text
    return out


def test_openclaw_aggressive_compacts_before_the_host(make_env: Any) -> None:
    started = time.monotonic()
    files = [_file(n) for n in range(READS)]
    counter = wire_audit.o200k_counter()
    plain_env = make_env("plain", plugin=False, counter=counter, api=API, fake=HostAwareUpstream, **MODEL)
    plain, plain_compactions = on_gateway(plain_env, run)
    env = make_env("lightmem2", counter=counter, api=API, fake=HostAwareUpstream, **MODEL)
    eviction = {
        "batchTurns": 1,
        "finishedTasks": False,
    }
    env.set_lightmem2_keys(mode="aggressive", eviction=eviction)
    bodies, compactions = on_gateway(env, run)
    fake, plain_fake = env.fake, plain_env.fake
    assert isinstance(fake, HostAwareUpstream) and isinstance(plain_fake, HostAwareUpstream)
    assert len(fake.kinds) == len(fake.reported) and len(plain_fake.kinds) == len(plain_fake.reported)
    usage = [u for u, k in zip(fake.reported, fake.kinds, strict=True) if k is None]
    plain_usage = [u for u, k in zip(plain_fake.reported, plain_fake.kinds, strict=True) if k is None]
    print(f"\nwith lightmem2, provider's input per request: {[u['prompt'] for u in usage]}")
    print(f"without it:                                  {[u['prompt'] for u in plain_usage]}")
    print(f"OpenClaw's own calls without lightmem2: {plain_fake.host_calls}; with it: {fake.host_calls}")
    print(f"OpenClaw's compaction entries without lightmem2: {[c['__openclaw'] for c in plain_compactions]}")

    # without lightmem2 OpenClaw flushes its memory and summarises; the same chat reached the fake
    n_calls = sum(len(steps) for _, steps in turns())
    assert len(bodies) == len(plain) == n_calls, (len(bodies), len(plain))
    assert {k for _, k in plain_fake.host_calls} == {"flush", "summary"}, plain_fake.host_calls
    assert len(plain_compactions) == 1
    # with lightmem2 none of it: no memory flush, no summarising request, no compaction entry
    assert fake.host_calls == [], fake.host_calls
    assert compactions == [], compactions
    assert max(u["prompt"] for u in usage) < FLUSH_AT, usage

    # what OpenClaw's read tool gave the model for each file, without lightmem2 (the request before its
    # compaction holds them all); the same in every request until then
    seen = _reads(plain[2 * READS - 1])
    assert sorted(seen) == list(range(READS)), sorted(seen)
    for k, text in seen.items():
        if text != files[k]:
            print(f"file {k}: the read tool gave {len(text)} chars for {len(files[k])}: {text[-300:]!r}")
        assert files[k].rstrip("\n")[:1000] in text, k
    for n, body in enumerate(plain[: 2 * READS]):
        assert all(t == seen[k] for k, t in _reads(body).items()), f"vanilla request {n + 1}"

    # the ledger names each compaction, and the threshold it was under: OpenClaw's budget for this window
    report = env.lightmem2_cli("report", "--all", "--json")
    assert report.returncode == 0, report.stderr
    (session,) = json.loads(report.stdout)["sessions"]
    rows = session["calls"]
    assert len(rows) == len(bodies)
    compacted = [
        n for n, r in enumerate(rows) if "compaction before the host's limit" in (r["breakReason"] or "")
    ]
    print("compactions:", [(n + 1, rows[n]["breakReason"]) for n in compacted])
    assert compacted, "no compaction: the threshold OpenClaw tells was not the one in force"
    for n in compacted:
        limit = int(LIMIT.search(rows[n]["breakReason"]).group(1).replace(",", ""))
        assert HOST_AT - 20_000 < limit < HOST_AT, limit  # this window's budget, not a 200k window's 180,000

    # the first compaction: the first request in which a read is a stub, a turn's first
    stubbed = [n for n, b in enumerate(bodies) if any(STUB_KEY.search(t) for t in _reads(b).values())]
    assert stubbed, "no read was ever paged out: the compaction did not happen"
    at = stubbed[0]
    assert at == compacted[0] and stubbed == list(range(at, len(bodies))) and at % 2 == 0, (
        stubbed,
        compacted,
    )
    for n in range(at):
        assert _reads(bodies[n]) == _reads(plain[n]), (
            f"request {n + 1}: a read not whole before the compaction"
        )
    reads = _reads(bodies[at])
    gone = sorted(k for k, t in reads.items() if STUB_KEY.search(t))
    whole = sorted(k for k, t in reads.items() if t == seen[k])
    print(f"request {at + 1} ({usage[at]['prompt']:,} tokens, {plain_usage[at]['prompt']:,} without):")
    print(f"reads {gone} paged out, {whole} whole")
    print(f"file {gone[0]} as the model saw it: {reads[gone[0]][:700]!r}")
    assert gone and gone == list(range(len(gone))), gone  # the oldest went
    assert whole == list(range(len(gone), at // 2)) and whole, whole  # the newest stayed whole
    assert RECORD in reads[gone[0]] and all(RECORD not in reads[k] for k in gone[1:])
    # every read paged out by any compaction comes back byte-exact from its stub's key and lines
    last = _reads(bodies[-1])
    assert sorted(k for k, t in last.items() if STUB_KEY.search(t)) == sorted(
        k for k in last if last[k] != seen.get(k)
    ) and set(gone) <= set(last)
    for k, text in sorted(last.items()):
        if not STUB_KEY.search(text):
            continue
        (key,) = set(STUB_KEY.findall(text))
        hint = HINT.search(text)
        assert hint is not None and hint.group(1) == key, text
        got = env.lightmem2_cli("recover", key, "--lines", f"{hint.group(2)}:{hint.group(3)}")
        assert got.returncode == 0 and got.stdout.decode().rstrip("\n") == seen[k].rstrip("\n"), k
    # at each compaction every other message is as the request before sent it: the user's prompts, what
    # the assistant wrote; only reads became stubs
    for c in compacted:
        before, now = strip_marks(bodies[c - 1]), strip_marks(bodies[c])
        assert now["system"] == before["system"] and now["tools"] == before["tools"]
        for n in range(READS):
            prompt = f"Read {_name(n)} and note its owners."
            users = [m for m in now["messages"] if m["role"] == "user"]
            assert sum(prompt in _text(m.get("content")) for m in users) == (n <= c // 2)
        changed = 0
        for i, msg in enumerate(before["messages"][:-1]):  # the last: OpenClaw's transient runtime context
            was, got_blocks = _blocks(msg), _blocks(now["messages"][i])
            assert len(got_blocks) == len(was), f"message {i} changed at the compaction of request {c + 1}"
            for b_was, b_got in zip(was, got_blocks, strict=True):
                if (
                    b_got != b_was
                    and b_got.get("type") == "tool_result"
                    and STUB_KEY.search(_text(b_got["content"]))
                ):
                    changed += 1
                    continue
                assert b_got == b_was, f"message {i} changed at the compaction of request {c + 1}"
        assert changed >= 1, c
    # between compactions the prefix is stable: each request extends the last compaction's
    for n in range(at + 1, len(bodies)):
        if n in compacted:
            continue
        base = max(c for c in compacted if c < n)
        kept = wire_audit.history("anthropic", bodies[base])[:-1]
        assert wire_audit.history("anthropic", bodies[n])[: len(kept)] == kept, f"request {n + 1}"

    # every request until OpenClaw compacted the run without lightmem2 (after it, that run's outputs are
    # gone into its summary, so there is nothing to compare with): outputs verbatim or recoverable from
    # their stubs (the tool form's lines), success unchanged, each request extending the one before but
    # at a compaction
    def recover(key: str) -> str | None:
        done = env.lightmem2_cli("recover", key)
        return done.stdout.decode("utf-8") if done.returncode == 0 else None

    upto = next(n for n, k in enumerate(plain_fake.kinds) if k is not None)  # its first own call
    upto -= sum(1 for k in plain_fake.kinds[:upto] if k is not None)  # among the chat's requests
    checked = wire_audit.audit("anthropic", bodies[:upto], plain[:upto], recover, compacted, transient_tail=1)
    checked.raise_if_faulty()
    assert checked.recovered >= 2, checked  # the first compaction's stubs were read and recovered

    # the ledger: one row per request at the provider's count; each compaction's row names it
    for n, (row, got_usage) in enumerate(zip(rows, usage, strict=True)):
        assert row["realInputTokens"] == got_usage["prompt"], (n, row["realInputTokens"], got_usage)
        causes = row["missCauses"] or []
        assert sum(c["tokens"] for c in causes) == got_usage["prompt"] - got_usage["cached"], (n, causes)
    for n in compacted:
        row = rows[n]
        print(f"ledger row {n + 1}: miss causes {row['missCauses']}")
        assert any(c["cause"] == "lightmem2 change" for c in row["missCauses"]), row["missCauses"]
    assert all((r["evictedTokens"] > 0) == (n in compacted) for n, r in enumerate(rows)), rows
    status = env.lightmem2_cli("status").stdout.decode()
    print(status)
    assert f"compactions before the host's limit: {len(compacted)}" in status, status
    print(f"openclaw compaction-before-the-host run: {time.monotonic() - started:.1f} s")
