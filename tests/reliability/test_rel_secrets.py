"""Secrets: 50+ kinds of credentials planted in tool outputs never reach disk; the model's view is untouched.

The test runs real sessions through every entry point (the Python API; the proxy, all three wire
formats; the Claude Code hook; the OpenClaw sidecar routes; the CLI, its hooks and the commands that
take user text or outputs) whose tool outputs and user messages carry every sample of
``rel_secrets.SAMPLES``: each one once inside a long build log (so it is reduced and archived) and once
as a short output (left in context as is); through the sidecar and the CLI also all of them in one long
file shown as tools show one (numbered, grepped, a JSON string). Then it reads EVERY file under
``LIGHTMEM2_HOME`` (artifacts, ledger, its WAL and shared-memory files, anything else) and looks for
each secret value byte for byte. Registry dirs must be 0700 and every file 0600.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from rel_convo import head, tool_output, turn
from rel_secrets import SAMPLES, all_secrets_text
from rel_stack import ServerThread, ledger_stack

from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import PassContext, stub_keys
from lightmem_plugin.reduction.reduce import reduce_text
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.store.registry import KEY_RE, NAMES_DIR
from lightmem_plugin.store.sealing import MAGIC

API_KEYS = {
    "anthropic": "sk-ant-api03-" + "Q" * 40 + "planted-anthropic-header-key-AA",
    "openai": "sk-proj-" + "Z" * 40 + "planted-openai-header-key",
}


def _secrets() -> list[tuple[str, bytes]]:
    rows = [(kind, secret.encode()) for kind, _text, secret in SAMPLES]
    return rows + [(f"header:{name}", key.encode()) for name, key in API_KEYS.items()]


def _files(home: Path) -> list[Path]:
    return sorted(p for p in home.rglob("*") if p.is_file())


def _leaks(home: Path) -> list[str]:
    found = []
    blobs = {p: p.read_bytes() for p in _files(home)}
    for kind, secret in _secrets():
        for path, blob in blobs.items():
            if secret in blob:
                found.append(f"{kind} in {path.relative_to(home)}")
    return found


def _embedded(i: int, text: str) -> str:
    """A long build log with the planted text in the middle (the part reduction elides)."""
    return tool_output(f"s{i}", i, lines=90, extra=text)


def _run_python_api(lm: LightMem) -> tuple[int, int]:
    """One session whose tool outputs hold every sample, reduced and not; returns (archived, kept)."""
    s = lm.session("secrets-api")
    msgs = head("secrets-api")
    archived = kept = 0
    for i, (_kind, text, secret) in enumerate(SAMPLES):
        msgs = msgs + turn("secrets-api", 2 * i, _embedded(i, text)) + turn("secrets-api", 2 * i + 1, text)
        out = s.before_model_call(msgs)
        big, small = out[-3]["content"], out[-1]["content"]
        assert stub_keys(big), f"sample {i} was not archived"
        assert small == text, "by default redaction must not alter what the model sees"
        assert secret in small
        archived += 1
        kept += 1
    msgs = msgs + turn("secrets-api", 10_000, _embedded(0, SAMPLES[0][1]))  # a repeat: dedup archives it
    s.before_model_call(msgs)
    odd = "stray \ud800 surrogate\n" + _embedded(
        1, "\n".join(t for _k, t, _s in SAMPLES)
    )  # not UTF-8 on disk
    msgs = msgs + turn("secrets-api", 10_001, odd)
    assert stub_keys(s.before_model_call(msgs)[-1]["content"]), "the odd output was archived too"
    return archived, kept


def _run_proxy(home: Path) -> int:
    """The same outputs through the proxy in each wire format, with API keys in the headers; the proxy's
    plugin keeps its session state and search index as ``serve``'s does (:meth:`LightMem.from_config`).
    Each sample sits in the middle of one output (archived) and at the head of another (kept in the
    reduced form the session store remembers)."""
    sent = 0
    with ledger_stack(home, full=True) as st, httpx.Client(timeout=60) as client:
        for i, (_kind, text, _secret) in enumerate(SAMPLES):
            out = _embedded(i, text) if i % 2 else text + "\n" + tool_output(f"p{i}", i, lines=200)
            sid = f"secrets-proxy-{i}"
            chat = {
                "model": "m",
                "messages": [*head(sid), *turn(sid, 0, out)],
            }
            r = client.post(
                st.proxy + "/v1/chat/completions",
                json=chat,
                headers={"authorization": f"Bearer {API_KEYS['openai']}"},
            )
            assert r.status_code == 200
            anth = {
                "model": "m",
                "max_tokens": 10,
                "system": f"agent {sid}",
                "messages": [
                    {"role": "user", "content": f"go {sid}"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "tu1", "name": "bash", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": out}],
                    },
                ],
            }
            headers = {"x-api-key": API_KEYS["anthropic"], "anthropic-version": "2023-06-01"}
            assert client.post(st.proxy + "/v1/messages", json=anth, headers=headers).status_code == 200
            resp = {
                "model": "m",
                "instructions": f"agent {sid}",
                "input": [
                    {"type": "message", "role": "user", "content": f"go {sid}"},
                    {"type": "function_call", "call_id": "fc1", "name": "bash", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "fc1", "output": out},
                ],
            }
            auth = {"authorization": f"Bearer {API_KEYS['openai']}"}
            assert client.post(st.proxy + "/v1/responses", json=resp, headers=auth).status_code == 200
            sent += 3
        bodies = [r.raw for r in st.fake.received]
    assert all(stub_keys(b.decode("utf-8", "replace")) for b in bodies), "every proxied output was archived"
    return sent


@pytest.mark.slow
def test_no_planted_secret_reaches_disk(isolated_home: Path) -> None:
    kinds = {kind for kind, _, _ in SAMPLES}
    assert len(kinds) >= 50
    lm = LightMem.from_config()
    archived, kept = _run_python_api(lm)
    proxied = _run_proxy(isolated_home)
    _run_claude_code_hook()
    sidecar_open = _run_sidecar(isolated_home)
    cli_runs = _run_cli(isolated_home)
    assert lm.ledger is not None
    leaks_open = _leaks(isolated_home)  # while the ledger is open: WAL and shared-memory files exist
    lm.ledger.close()
    leaks_closed = _leaks(isolated_home)
    leaks = sorted({*sidecar_open, *leaks_open, *leaks_closed})
    assert leaks == [], f"{len(leaks)} planted secrets on disk: {leaks}"
    root = isolated_home / "artifacts"
    files = [p for p in root.rglob("*") if p.is_file() and NAMES_DIR not in p.relative_to(root).parts]
    assert files and all(p.read_bytes().startswith(MAGIC) for p in files), "every artifact is sealed"
    # the short names' claims hold only a key (the artifact's own file name), nothing of its content
    claims = list((root / NAMES_DIR).rglob("*.alias"))
    assert claims and all(KEY_RE.match(p.read_text()) for p in claims)
    recovered = "".join(lm.registry.recover(p.name) for p in files)
    missing = sorted(k for k, _, secret in SAMPLES if secret not in recovered)
    assert missing == [], "every kind must have been archived, and recover gives it back byte-exact"
    print(
        f"\nsecrets: {len(SAMPLES)} planted ({len(kinds)} kinds) + {len(API_KEYS)} API keys; "
        f"{archived} archived, {kept} kept in context unaltered, {proxied} proxied requests, "
        f"{cli_runs} CLI runs; "
        f"{len(_files(isolated_home))} files scanned; leaked 0"
    )


def test_registry_and_ledger_files_are_private(isolated_home: Path) -> None:
    lm = LightMem.from_config()
    s = lm.session("perm")
    s.before_model_call(head("perm") + turn("perm", 0))
    assert lm.ledger is not None
    root = isolated_home / "artifacts"
    dirs = [root, *(p for p in root.rglob("*") if p.is_dir())]
    files = [p for p in isolated_home.rglob("*") if p.is_file()]
    assert len(dirs) >= 2 and any(p.name.startswith("ledger") for p in files)
    assert {oct(stat.S_IMODE(d.stat().st_mode)) for d in dirs} == {"0o700"}
    assert {
        (p.name.split("-")[-1], oct(stat.S_IMODE(p.stat().st_mode))) for p in files if "ledger" in p.name
    } <= {
        ("ledger.sqlite3", "0o600"),
        ("wal", "0o600"),
        ("shm", "0o600"),
    }
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in root.rglob("*") if p.is_file()} == {"0o600"}
    lm.ledger.close()


def test_redaction_can_be_turned_off_and_then_archives_are_byte_exact(tmp_path: Path) -> None:
    cfg = Config()
    cfg.registry.dir = str(tmp_path / "artifacts")
    cfg.redaction.enabled = False
    lm = LightMem(cfg)
    text = _embedded(0, SAMPLES[5][1])
    out = lm.session("off").before_model_call(head("off") + turn("off", 0, text))
    (key,) = set(stub_keys(out[-1]["content"]))
    assert lm.registry.recover(key) == text


def test_a_failing_pass_does_not_write_the_secret_it_quotes_into_the_ledger(isolated_home: Path) -> None:
    lm = LightMem(Config(), ledger=Ledger(isolated_home / "ledger.sqlite3"))
    s = lm.session("quoting")
    _kind, text, _secret = next(row for row in SAMPLES if row[0] == "anthropic_key")

    def quoting_pass(output: str, ctx: PassContext) -> str:
        raise ValueError(f"cannot parse line {output.splitlines()[0]!r}")

    s.passes_override["text"] = quoting_pass
    s.before_model_call(head("quoting") + turn("quoting", 0, text + "\n" + tool_output("q", 0)))
    assert s.fail.errors["reduction"] == 1
    assert lm.ledger is not None
    lm.ledger.close()
    assert _leaks(isolated_home) == []


def test_reduction_archives_through_the_redactor_only(tmp_path: Path) -> None:
    """A pass gets only the registry's ``put``, which redacts when it cannot seal: there is no way to
    archive a plaintext secret."""
    from lightmem_plugin.store.registry import Registry

    reg = Registry(tmp_path / "r")
    cfg = Config()
    ctx = PassContext(cfg.mode_table(), cfg.reduction, reg.put)
    text = "\n".join(_embedded(i, t) for i, (_k, t, _s) in enumerate(SAMPLES[:20]))
    out = reduce_text(text, ctx)
    (key,) = set(stub_keys(out))
    stored: Any = reg.get(key)
    assert [s for _k, _t, s in SAMPLES[:20] if s.encode() in stored] == []
    assert os.stat(reg.path_of(key)).st_mode & 0o077 == 0


def _run_claude_code_hook() -> None:
    """The Claude Code PostToolUse hook (its own process in real use; it keeps its decisions under
    ``hook:<session>`` in the same store): ``export TOKEN=AKIA...`` atop a 3,000-line output."""
    from lightmem_plugin.hosts.claude_code import hooks as claude_code

    _kind, text, _secret = next(row for row in SAMPLES if row[0] == "aws_access_key_id")
    stdout = text + "\n" + tool_output("hook", 0, lines=3000)
    response = {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}
    answer = claude_code.handle(
        "PostToolUse",
        {
            "session_id": "secrets-hook",
            "tool_name": "Bash",
            "tool_use_id": "toolu_1",
            "tool_response": response,
        },
    )
    assert answer is not None and stub_keys(answer["hookSpecificOutput"]["updatedToolOutput"]["stdout"])


def _run_goals_and_heads(session_id: str) -> LightMem:
    """Every sample where the model keeps seeing it: in a user's goal (quoted by the session record)
    and at the head of a long output (the reduced form the session store keeps), in aggressive mode so
    finished tasks leave as records too."""
    from lightmem_plugin.config import config_path

    config_path().write_text('{"mode": "aggressive"}')
    lm = LightMem.from_config()
    s = lm.session(session_id)
    msgs = head(session_id)
    for i, (_kind, text, secret) in enumerate(SAMPLES):
        big = text + "\n" + tool_output(session_id, i, lines=400)
        msgs = [*msgs, {"role": "user", "content": f"deploy it; my creds: {text}"}, *turn(session_id, i, big)]
        out = s.before_model_call(msgs)
        assert stub_keys(out[-1]["content"]) and secret in out[-1]["content"], "the head is kept as it was"
    return lm


def test_what_the_model_was_shown_is_sealed_in_the_session_store_and_records(isolated_home: Path) -> None:
    """Before: all 120 samples readable in sessions.sqlite3 (the memo keeps each reduced output's head,
    the core and retry blobs the session record), and two in records/*.jsonl (a YAML password and an
    XML one, folded onto one line by the record so their patterns no longer matched)."""
    lm = _run_goals_and_heads("heads")
    assert lm.records is not None and lm.records.sessions() == ["heads"], "records were written"
    assert lm.ledger is not None and lm.states is not None
    leaks = _leaks(isolated_home)
    lm.ledger.close()
    lm.states.close()
    assert leaks == [] and _leaks(isolated_home) == []
    # the store still gives back what the model saw: a new process sends the same bytes
    again = LightMem.from_config().session("heads")
    assert again.calls == len(SAMPLES)
    record = lm.records.snapshot("heads")
    assert "Goal (turn" in record["full"], "the record reads back with the key"


def _numbered(text: str, mark: str = "\t") -> str:
    """``text`` as ``cat -n`` shows it (``mark="→"``: as Claude Code's Read shows a file to the model)."""
    return "".join(f"{n:6}{mark}{line}\n" for n, line in enumerate(text.splitlines(), 1))


def _grepped(text: str, path: str = "deploy/secrets.txt") -> str:
    """``text`` as ``grep -rn . deploy/`` shows it."""
    return "".join(f"{path}:{n}:{line}\n" for n, line in enumerate(text.splitlines(), 1))


def _decorated_outputs(tag: str) -> list[tuple[str, str, str]]:
    """(tool, arguments, output): every sample in a long file, shown as tools show a file: numbered,
    grepped, or as the string of a JSON result. Before, the rules that read a line's start or a block
    of lines (a Kubernetes Secret's data block among them) missed there, and the search index kept
    those secrets in plaintext."""
    body = all_secrets_text() + tool_output(tag, 0, lines=1500) + "\n"
    return [
        ("exec", json.dumps({"command": "cat -n deploy/secrets.txt"}), _numbered(body)),
        ("read", json.dumps({"path": "deploy/secrets.txt"}), _numbered(body, "\u2192")),
        ("exec", json.dumps({"command": "grep -rn . deploy/"}), _grepped(body)),
        (
            "fetch_file",
            json.dumps({"url": "https://ci.example.com/a/secrets.txt"}),
            json.dumps({"content": body}),
        ),
    ]


SIDECAR_SESSION_SIZE = 20
"""Samples per sidecar session: each assemble sends the conversation so far, as OpenClaw does."""


def _run_sidecar(home: Path) -> list[str]:
    """OpenClaw's plugin through the sidecar routes of ``serve``'s app (its plugin keeps session state,
    search index and records, :meth:`LightMem.from_config`), in aggressive mode so finished tasks leave
    as records: per sample a ``toolResult`` with the sample at the head of a long output (kept in the
    reduced form), a user message quoting it, an ``assemble`` of the conversation with the sample in the
    middle of a tool output (archived), and an ``afterTurn`` whose reply and, every other sample, whole
    turn quote it; every sample in a long file shown as tools show one (:func:`_decorated_outputs`).
    Then ``search``, ``recover`` and chat commands given a secret. Returns the leaks
    found while the sidecar's stores are still open (their WAL files exist)."""
    from lightmem_plugin.commands.table import run_remote_line
    from lightmem_plugin.config import config_path
    from lightmem_plugin.server.app import create_app
    from lightmem_plugin.server.secret import HEADER, load_or_create

    config_path().write_text('{"mode": "aggressive"}')
    plugin = LightMem.from_config()
    assert plugin.ledger is not None and plugin.states is not None and plugin.records is not None
    conversations: dict[str, list[dict[str, Any]]] = {}
    keys: list[str] = []
    with (
        ServerThread(create_app(plugin, commands=run_remote_line)) as srv,
        httpx.Client(base_url=srv.url, timeout=60) as client,
    ):
        client.headers[HEADER] = load_or_create()

        def post(route: str, body: dict[str, Any]) -> Any:
            r = client.post(route, json=body)
            assert r.status_code == 200, (route, r.status_code, r.text[:300])
            return r.json()

        for i, (_kind, text, _secret) in enumerate(SAMPLES):
            sid = f"secrets-sidecar-{i // SIDECAR_SESSION_SIZE}"
            msgs = conversations.setdefault(sid, head(sid))
            result = {
                "sessionId": sid,
                "toolCallId": f"exec_{sid}_{i}",
                "output": text + "\n" + tool_output(sid, i, lines=200),
                "toolName": "exec",
                "arguments": json.dumps({"command": f"make deploy-{i}"}),
            }
            out = post("/sidecar/toolResult", result)["output"]
            assert stub_keys(out), f"sample {i} was not archived by /sidecar/toolResult"
            keys += stub_keys(out)
            msgs += [
                {"role": "user", "content": f"deploy it; my creds: {text}"},
                *turn(sid, i, _embedded(i, text)),
            ]
            whole = i % 2 == 1
            post("/sidecar/assemble", {"sessionId": sid, "messages": msgs, "wholeTurn": whole})
            reply = {"role": "assistant", "content": f"Deployed with {text}"}
            usage = {"prompt_tokens": 2000 + i, "completion_tokens": 12}
            if whole:
                turn_msgs = [msgs[-3], reply]
                post(
                    "/sidecar/afterTurn",
                    {"sessionId": sid, "turn": turn_msgs, "calls": [{"at": 1, "usage": usage}]},
                )
            else:
                post(
                    "/sidecar/afterTurn",
                    {"sessionId": sid, "response": reply, "usage": usage, "api": "openai"},
                )
            msgs.append(reply)
        for n, (tool, arguments, output) in enumerate(_decorated_outputs("sidecar-decorated")):
            body = {
                "sessionId": "secrets-sidecar-decorated",
                "toolCallId": f"decorated_{n}",
                "output": output,
            }
            out = post("/sidecar/toolResult", {**body, "toolName": tool, "arguments": arguments})["output"]
            assert stub_keys(out), f"decorated output {n} ({tool}) was not archived"
        for _kind, _text, secret in SAMPLES[::16]:
            post("/sidecar/search", {"query": secret, "limit": 5})
            post("/sidecar/command", {"text": f"/lightmem2 search --all {json.dumps(secret)}"})
        assert "secrets-sidecar" in post("/sidecar/recover", {"key": keys[0]})["text"]
        for line in ("status", "report", "resume --level full", "export --format markdown", "doctor"):
            post("/sidecar/command", {"text": f"/lightmem2 {line}"})
        leaks = _leaks(home)
    plugin.ledger.close()
    plugin.states.close()
    return leaks


def _cli(
    home: Path, *args: str, stdin: str | None = None, codes: tuple[int, ...] = (0,)
) -> subprocess.CompletedProcess[str]:
    """``lightmem2 ARGS`` in a process of its own, on ``home``; it must exit with one of ``codes``."""
    env = {**os.environ, "LIGHTMEM2_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", "lightmem_plugin.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )
    assert done.returncode in codes, (args, done.returncode, done.stderr[-2000:])
    return done


def _secrets_trace(path: Path) -> Path:
    """A recorded session (the swe format ``replay``, ``resume --trace`` and ``demo --trace`` read) in
    which the user's task quotes credentials, commands carry them and tool outputs print them, at the
    head of one output and in the middle of the next."""
    per = 8
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant that can interact with a computer shell."},
        {
            "role": "user",
            "content": "Deploy the service with these creds:\n" + "\n".join(t for _k, t, _s in SAMPLES[:per]),
        },
    ]
    calls: list[dict[str, Any]] = []
    for n, first in enumerate(range(0, len(SAMPLES), per)):
        texts = [t for _k, t, _s in SAMPLES[first : first + per]]
        for m, output in enumerate(
            ("\n".join(texts) + "\n" + tool_output(f"t{n}", n, lines=150), _embedded(n, "\n".join(texts)))
        ):
            call_id = f"call_{n}_{m}"
            command = f"cat secrets_{n}.env && export TOKEN={SAMPLES[first][2]} && ./deploy.sh"
            calls.append(
                {
                    "message_index": len(msgs),
                    "prompt_tokens": 1000 * (len(msgs) + 1),
                    "cached_tokens": 0,
                    "completion_tokens": 40,
                }
            )
            msgs.append(
                {
                    "role": "assistant",
                    "content": f"Running step {n}.{m}.",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                        }
                    ],
                }
            )
            msgs.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": f"<returncode>0</returncode>\n<output>\n{output}\n</output>",
                }
            )
    calls.append(
        {
            "message_index": len(msgs),
            "prompt_tokens": 1000 * (len(msgs) + 1),
            "cached_tokens": 0,
            "completion_tokens": 5,
        }
    )
    msgs.append({"role": "assistant", "content": "Done."})
    trace = {
        "id": "secrets-trace",
        "source": "test",
        "provider": "deepseek",
        "model": None,
        "exit_status": "Submitted",
        "messages": msgs,
        "calls": calls,
    }
    path.write_text(json.dumps(trace), encoding="utf-8")
    return path


def _run_cli(home: Path) -> int:
    """The CLI, each command a process of its own as a user or a host runs it: the hooks (Claude Code's
    PostToolUse on outputs with every sample at the head, in the middle and grepped, a prompt quoting
    them, chat commands given a secret), ``search`` and ``recover`` given secrets and keys, and the commands that
    read a recorded session (``resume --trace``, ``replay``, ``demo --trace``, which records it in the
    ledger, the records and the search index), then ``export``, ``visual``, ``status``, ``report``.
    Returns how many commands ran."""
    runs = 0

    def cli(*args: str, stdin: str | None = None, codes: tuple[int, ...] = (0,)) -> str:
        nonlocal runs
        runs += 1
        return _cli(home, *args, stdin=stdin, codes=codes).stdout

    every = "\n".join(t for _k, t, _s in SAMPLES)
    keys: list[str] = []
    for n, stdout in enumerate((every + "\n" + tool_output("cli", 0, lines=3000), _embedded(1, every))):
        event = {
            "session_id": "secrets-cli-hook",
            "tool_name": "Bash",
            "tool_use_id": f"toolu_cli_{n}",
            "tool_input": {"command": f"cat .env && export TOKEN={SAMPLES[0][2]} && make"},
            "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False},
        }
        answer = json.loads(cli("hook", "claude-code", "PostToolUse", stdin=json.dumps(event)))
        keys += stub_keys(answer["hookSpecificOutput"]["updatedToolOutput"]["stdout"])
    assert keys, "the hook archived the outputs"
    grep = {
        "session_id": "secrets-cli-hook",
        "tool_name": "Grep",
        "tool_use_id": "toolu_cli_grep",
        "tool_input": {"pattern": ".", "path": "deploy/", "output_mode": "content", "-n": True},
        "tool_response": {
            "mode": "content",
            "content": _grepped(every + "\n" + tool_output("cli", 1, lines=3000)),
        },
    }
    answer = json.loads(cli("hook", "claude-code", "PostToolUse", stdin=json.dumps(grep)))
    assert stub_keys(answer["hookSpecificOutput"]["updatedToolOutput"]["content"])
    # the hook does not index what it archives: `doctor --fix` does (before, the grepped file's
    # Kubernetes secret, PuTTY key, pgpass line ... reached search.sqlite3 so)
    assert "[fixed] search index" in cli("doctor", "--fix", codes=(0, 1))
    for host in ("claude-code", "codex"):
        prompt = {"session_id": f"secrets-cli-{host}", "prompt": f"deploy it; my creds:\n{every}"}
        assert cli("hook", host, "UserPromptSubmit", stdin=json.dumps(prompt)) == ""
        for line in (
            f"/lightmem2 search --all {json.dumps(SAMPLES[3][2])}",
            f"/lightmem2 recover {keys[0]} --lines 1:40",
        ):
            asked = {"session_id": f"secrets-cli-{host}", "prompt": line}
            assert (
                json.loads(cli("hook", host, "UserPromptSubmit", stdin=json.dumps(asked)))["decision"]
                == "block"
            )
    for _kind, _text, secret in SAMPLES[::20]:
        cli("search", "--all", secret)
    cli("search", "--all", "--json", "kind: Secret")
    cli("search", "--all", "--regex", "AKIA[0-9A-Z]{16}")
    assert SAMPLES[0][2] in cli("recover", keys[0]), "recover gives the archived original back"
    trace = _secrets_trace(home.parent / "secrets-trace.json")
    cli("resume", "--trace", str(trace), "--level", "full")
    cli("replay", str(trace), "--mode", "aggressive")
    cli("demo", "--trace", str(trace))
    for args in (
        ("export", "--format", "json"),
        ("export", "--format", "canvas"),
        ("visual",),
        ("status", "--all"),
        ("report", "--all"),
    ):
        cli(*args)
    return runs
