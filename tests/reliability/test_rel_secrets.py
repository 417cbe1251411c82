"""Secrets: 50+ kinds of credentials planted in tool outputs never reach disk; the model's view is untouched.

The test runs real sessions (the Python API and the proxy, all three wire formats) whose tool outputs
carry every sample of ``rel_secrets.SAMPLES``: each one once inside a long build log (so it is reduced
and archived) and once as a short output (left in context as is). Then it reads EVERY file under
``LIGHTMEM2_HOME`` (artifacts, ledger, its WAL and shared-memory files, anything else) and looks for
each secret value byte for byte. Registry dirs must be 0700 and every file 0600.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
from rel_convo import head, tool_output, turn
from rel_secrets import SAMPLES
from rel_stack import ledger_stack

from lightmem_plugin.config import Config
from lightmem_plugin.ledger import Ledger
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import PassContext, stub_keys
from lightmem_plugin.reduction.reduce import reduce_text
from lightmem_plugin.registry import KEY_RE, NAMES_DIR
from lightmem_plugin.sealing import MAGIC

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
    assert lm.ledger is not None
    leaks_open = _leaks(isolated_home)  # while the ledger is open: WAL and shared-memory files exist
    lm.ledger.close()
    leaks_closed = _leaks(isolated_home)
    assert leaks_open == [] and leaks_closed == []
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
        f"{archived} archived, {kept} kept in context unaltered, {proxied} proxied requests; "
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
    from lightmem_plugin.registry import Registry

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
    from lightmem_plugin.hooks import claude_code

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
