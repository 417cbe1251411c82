"""Codex CLI from npm (0.169.0 pinned, 0.171.0 the newest), end to end: the host compacts anyway
(issue #42 item 3).

Codex compacts through its provider: with a small ``model_auto_compact_token_limit`` (and a provider
that is not OpenAI's own) it sends, between two calls of a turn, one summarising request (the
history, then a user message with its "CONTEXT CHECKPOINT COMPACTION" prompt, no tools) and then
rebuilds the history as its initial context, the user's messages and one user message "Another
language model started to solve this problem ...\\n<summary>".

One scripted ``codex exec`` session, straight at the fake provider and with ``lightmem2 install
codex`` (normal mode), with the same HOME and work folder: the agent reads ``notes.txt`` (a line
:data:`TOKEN` in it) and ``more.txt`` (each ~10 KB, file views kept whole); the token usage passes
the limit, Codex compacts (the fake's summary does not name the token), the agent runs one more
command and answers. Checked at the fake provider, request by request:

- each run sent exactly one summarising request, at the same place, the read in it, and after it no
  request holds the token (the summary dropped it, in both runs);
- the first request after it carries lightmem2's note once, appended to Codex's summary message (the
  head, the session record's goal, the ``lightmem2 search ... --session ID`` and ``lightmem2
  recover`` lines, the conversation's key), the run without lightmem2 none, no request before it
  one; otherwise its conversation is the one Codex sends without lightmem2; the next request extends
  it byte for byte (and the fake's cache reads all of it);
- ``wire_audit.audit``: outputs verbatim or recoverable, success unchanged, each request extending the
  one before except the first after the compaction;
- ``lightmem2 search TOKEN --session ID --json`` finds the read and ``lightmem2 recover KEY`` prints
  it byte-exact as Codex sent it; the conversation's key recovers the goal and names that key;
- ``lightmem2 status`` names the host's compaction, the ledger row of the summarising request and of
  the first request after it say what they were.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    ScriptedUpstream,
    base_env,
    lightmem2_cli,
    log_tail,
    npm_cli,
    run_bounded,
    stop_pid,
    write_lightmem_config,
)
from fake_wire import Reply
from server_harness import ServerThread, free_port
from test_e2e_codex import (
    CODEX_TIMEOUT_S,
    PACKAGE,
    VERSIONS,
    _codex_home,
    _tool_names,
    fake_provider,
    namespaced,
)
from test_e2e_codex_wire import _recoverer
from wire_audit import audit

from lightmem_plugin.eviction.compaction_note import HEAD
from lightmem_plugin.hosts.codex import install as installer
from lightmem_plugin.hosts.shared import serve_ctl
from lightmem_plugin.server.codex_compaction import AFTER, SUMMARISING

TOKEN = "canary region: zebra-4417-kilo"  # not secret-like: the index redacts those
GOAL = "Read notes.txt and more.txt, then restart the deploy."
SUMMARY = "The user asked to read two settings files; both were read."
ASK = "You are performing a CONTEXT CHECKPOINT COMPACTION."  # Codex's templates/compact/prompt.md
PREFIX = "Another language model started to solve this problem"  # its summary_prefix.md
LIMIT = 14_000
"""model_auto_compact_token_limit: above Codex's first request with lightmem2 (~10,600 fake tokens:
instructions, tools, our MCP tool) and the rebuilt history with the note (~10,900), below what the
two reads bring (~15,000: Codex compacts before the call that would read them both)."""


def _notes() -> str:
    lines = [f"setting {i}: replicas={i % 5 + 1} region=eu-{i % 3} timeout={i * 7}s" for i in range(200)]
    lines.insert(120, TOKEN)
    return "\n".join(lines) + "\n"


def _more() -> str:
    return "".join(f"host {i}: zone=eu-{i % 3} weight={i * 3} drain=false\n" for i in range(220))


def _items(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in body.get("input") or [] if isinstance(i, dict)]


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def is_summarising(body: dict[str, Any]) -> bool:
    items = _items(body)
    return bool(items) and items[-1].get("role") == "user" and _text(items[-1]).startswith(ASK)


def summary_at(body: dict[str, Any]) -> int | None:
    """The index of Codex's summary message, None without one."""
    found = [n for n, i in enumerate(_items(body)) if i.get("role") == "user" and _text(i).startswith(PREFIX)]
    assert len(found) <= 1, found
    return found[0] if found else None


def _outputs(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for i in items if i.get("type") == "function_call_output"]


def policy(api: str, body: dict[str, Any]) -> Reply:
    """Read notes.txt, read more.txt, check; the compaction: a summary without TOKEN; after it one
    command, then Done."""
    if is_summarising(body):
        return Reply(text=SUMMARY)
    if "exec_command" not in _tool_names(body):
        return Reply(text="ok")
    items = _items(body)
    at = summary_at(body)
    if at is not None:
        if not _outputs(items[at:]):
            return Reply(text="", tool_calls=[("exec_command", json.dumps({"cmd": "echo deploy restarted"}))])
        return Reply(text="Done.")
    cmds = ["cat notes.txt", "cat more.txt", "echo settings ok"]
    done = len(_outputs(items))
    if done < len(cmds):
        return Reply(text="", tool_calls=[("exec_command", json.dumps({"cmd": cmds[done]}))])
    return Reply(text="Read, no compaction.")


@pytest.fixture(scope="module", params=VERSIONS)
def codex(request: pytest.FixtureRequest) -> Path:
    return npm_cli(PACKAGE, str(request.param), "codex", "codex")


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _session(exe: Path, env: dict[str, str], work: Path) -> str:
    """The scripted session in a fresh work folder; Codex's last answer."""
    _fresh(work)
    (work / "notes.txt").write_text(_notes(), encoding="utf-8")
    (work / "more.txt").write_text(_more(), encoding="utf-8")
    cmd = [str(exe), "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", "--json", GOAL]
    done = run_bounded(cmd, env, work, CODEX_TIMEOUT_S)
    lm_home = Path(env["LIGHTMEM2_HOME"])
    assert done.returncode == 0, (
        f"codex exec failed ({done.returncode}):\n{done.stderr[-3000:]}\n"
        f"serve.log: {log_tail(lm_home / 'serve.log')}"
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    texts = [
        e["item"].get("text")
        for e in events
        if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"
    ]
    return str(texts[-1]) if texts else ""


RUN_VARIES = re.compile(r"^(Chunk ID:|Wall time:) .*$", re.M)
"""Lines of Codex's tool-output header that differ from run to run (a random chunk id, the time)."""


def _conversation(body: dict[str, Any], note: str = "") -> list[tuple[str, str, str]]:
    """The conversation a request carries: (type, role, text) of every item but Codex's developer
    messages and environment context (they name lightmem2's MCP tool and the stabilizer's
    placeholders in one run only), the note taken out of the summary, :data:`RUN_VARIES` masked."""
    out = []
    for item in _items(body):
        text = _text(item) if "content" in item else str(item.get("output", item.get("arguments", "")))
        if item.get("role") == "developer" or text.startswith("<environment_context>"):
            continue
        if note:
            text = text.replace("\n\n" + note, "")
        text = RUN_VARIES.sub(r"\1 -", text)
        out.append((str(item.get("type", "message")), str(item.get("role", "")), text))
    return out


def test_codex_compaction_note_and_what_it_dropped_recoverable(
    codex: Path, tmp_path: Path, host_home: Path, isolated_home: Path
) -> None:
    work = tmp_path / "work"
    limit = f'model = "fake-model"\nmodel_auto_compact_token_limit = {LIMIT}\n'

    # without lightmem2: Codex straight at the fake provider
    vanilla = ScriptedUpstream(policy, namespaced)
    with ServerThread(vanilla.app) as up:
        folder = _codex_home(_fresh(host_home), limit + fake_provider(up.url))
        env = {
            **base_env(host_home, tmp_path / "vanilla-lm"),
            "CODEX_HOME": str(folder),
            "OPENAI_API_KEY": "dummy",
        }
        assert _session(codex, env, work) == "Done."
    without = [b for api, b in vanilla.model_bodies if api == "responses"]

    # with lightmem2 installed (normal mode)
    fake = ScriptedUpstream(policy, namespaced)
    with ServerThread(fake.app) as up:
        write_lightmem_config(isolated_home, free_port(), up.url)
        _codex_home(_fresh(host_home), limit)
        print(installer.run(uninstall=False, project=None))
        env = {**base_env(host_home, isolated_home), "OPENAI_API_KEY": "dummy"}
        try:
            assert _session(codex, env, work) == "Done."
        finally:
            stop_pid(serve_ctl.pid_file())
    bodies = [b for api, b in fake.model_bodies if api == "responses"]
    check_env = base_env(host_home, isolated_home)

    # the case under test: one summarising request in each run, at the same place, the read in it,
    # and after it no request holds the token
    assert len(bodies) == len(without), (len(bodies), len(without))
    asks = [n for n, b in enumerate(bodies) if is_summarising(b)]
    assert asks == [n for n, b in enumerate(without) if is_summarising(b)] and len(asks) == 1, asks
    ask = asks[0]
    first = ask + 1
    assert len(bodies) == first + 2, f"{len(bodies)} requests: {[len(_items(b)) for b in bodies]}"
    for run in (bodies, without):
        assert TOKEN in json.dumps(run[ask]), "the read was not in the history Codex summarised"
        assert run[ask]["tools"] == [] and summary_at(run[first]) is not None
        for body in run[first:]:
            assert TOKEN.split(": ")[1] not in json.dumps(body), "the read survived the compaction"
    # the summarising request reached the provider with Codex's prompt, as Codex wrote it
    assert _items(bodies[ask])[-1] == _items(without[ask])[-1]
    assert _conversation(bodies[ask]) == _conversation(without[ask]), "the summariser read otherwise"

    # the note: once, after Codex's summary, in the first request after the compaction
    escaped = json.dumps(HEAD)[1:-1]
    assert json.dumps(bodies[first]).count(escaped) == 1, "the note is not there exactly once"
    assert not any(escaped in json.dumps(b) for b in without)
    assert not any(escaped in json.dumps(b) for b in bodies[:first]), "a note before the compaction"
    at = summary_at(bodies[first])
    assert at is not None
    summary = _text(_items(bodies[first])[at])
    plain = _text(_items(without[first])[at])
    assert plain.endswith("\n" + SUMMARY) and summary.startswith(plain + "\n\n" + HEAD)
    note = summary[len(plain) + 2 :]
    print(f"\nthe note the model read after the compaction (request {first + 1}):\n{note}")
    sid = bodies[first]["prompt_cache_key"]
    assert f'run: lightmem2 search "WORDS" --session {sid}' in note
    assert "run: lightmem2 recover KEY [--lines A:B]" in note
    assert f"Goal (turn 0): {GOAL}" in note
    conversation = re.search(r"lightmem2 recover ([0-9a-f]{12,32}) \[--lines A:B\]", note)
    assert conversation is not None, note

    # otherwise the request Codex sends without lightmem2, and the next one extends it byte for byte
    assert _conversation(bodies[first], note) == _conversation(without[first])
    later = _items(bodies[first + 1])
    assert later[: len(_items(bodies[first]))] == _items(bodies[first]), "the next request does not extend it"
    assert fake.reported[first + 1]["cached"] >= fake.reported[first]["prompt"] - 16
    # every tool output verbatim or stubbed with a key that recovers it, its success unchanged, each
    # request extending the one before but the first after the compaction (the summarising request
    # only appends Codex's prompt)
    audit("responses", bodies, without, _recoverer(), batches=[first]).raise_if_faulty()

    # what the compaction dropped: found by `lightmem2 search`, recovered byte-exact
    read = next(o["output"] for o in _outputs(_items(bodies[ask])) if TOKEN in str(o["output"]))
    found = json.loads(
        lightmem2_cli(check_env, work, "search", TOKEN.split(": ")[1], "--session", sid, "--json")
    )
    print("lightmem2 search:", json.dumps(found)[:1000])
    keys = [h["key"] for h in found["hits"] if h["excerpt"] == TOKEN]
    assert keys, found
    recovered = {k: lightmem2_cli(check_env, work, "recover", k) for k in keys}
    whole = [k for k, text in recovered.items() if text == read]
    assert whole, f"no hit recovers the read byte-exact: {[t[:120] for t in recovered.values()]}"
    assert _notes() in read
    archived = lightmem2_cli(check_env, work, "recover", conversation.group(1))
    assert GOAL in archived and whole[0] in archived, archived[:2000]

    # status and the ledger name the host's compaction
    status = lightmem2_cli(check_env, work, "status", "--session", sid)
    print(status)
    assert f"the host compacted: 1 time (its summarising call {first})" in status, status
    (data,) = json.loads(lightmem2_cli(check_env, work, "report", "--session", sid, "--json"))["sessions"]
    reasons = [c["breakReason"] for c in data["calls"]]
    assert len(reasons) == len(bodies), reasons
    assert reasons[ask] == SUMMARISING and reasons[first] == AFTER, reasons
    assert "host_compaction" not in json.dumps(data), "a host_compaction fault"
    # every uncached token the fake provider reported has its cause (issue #43): the summarising
    # request (no tools: nothing of it cached) and the rebuilt history are the host's compaction
    for n, row in enumerate(data["calls"]):
        causes = {c["cause"]: c["tokens"] for c in row["missCauses"]}
        reported = fake.reported[n]["prompt"] - fake.reported[n]["cached"]
        assert sum(causes.values()) == reported, (n, causes, fake.reported[n])
        assert "provider drop" not in causes, (n, causes)
        if n == 0:
            assert set(causes) == {"first call"}, causes
        elif n in (ask, first):
            assert "host compaction" in causes and causes["host compaction"] >= reported // 2, (n, causes)
        else:
            assert set(causes) <= {"new content"}, (n, causes)
