"""The sidecar is ours alone: a second local user, a browser page or a rebinding DNS name gets nothing.

Measured on main before this: any local uid could search and recover archived secrets, export
records, switch the mode and make ``serve`` read ``/dev/zero`` or a FIFO through ``/sidecar/command``
(the whole server hung); a ``text/plain`` POST from a web page and any ``Host`` header were served.
Every test here talks real HTTP to a server on 127.0.0.1; the per-install secret is read from the file
the server created in the test's ``LIGHTMEM2_HOME`` (the contract the OpenClaw plugin relies on).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_harness import ServerThread

from lightmem_plugin.commands.table import run_remote_line
from lightmem_plugin.config import Config
from lightmem_plugin.eviction.record_store import RecordStore
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.server.app import create_app

HEADER = "x-lightmem2-secret"  # the wire contract shared with adapters/openclaw/lib/sidecar.js
ARCHIVED = "archivedmarkerq7w3"
RECORDED = "recordedmarkerk2v9"
BIG = "".join(
    f"2026-03-01 10:00:{i % 60:02d} INFO worker {i}: {ARCHIVED} batch {i * 7}\n" for i in range(300)
)
TRACE = Path(__file__).parents[1] / "data" / "short.jsonl.gz"
OTHER_USER = """
import json, sys, urllib.error, urllib.request
path, url, key = sys.argv[1:4]
try:
    open(path).read()
    read = "read it"
except OSError as err:
    read = type(err).__name__
statuses = []
for route, body in [("search", {"query": "ARCHIVED"}), ("recover", {"key": key}), ("command", {"text": "/lightmem2 mode aggressive"})]:
    req = urllib.request.Request(url + "/sidecar/" + route, json.dumps(body).encode(), {"content-type": "application/json"})
    try:
        statuses.append(urllib.request.urlopen(req, timeout=10).status)
    except urllib.error.HTTPError as err:
        statuses.append(err.code)
print(json.dumps({"read": read, "statuses": statuses}))
""".replace("ARCHIVED", ARCHIVED)


@dataclass
class Seeded:
    url: str
    secret: str
    home: Path
    config: Path
    key: str
    plugin: LightMem

    def client(self, secret: str | None = None, **headers: str) -> httpx.Client:
        sent = dict(headers)
        if secret is not None:
            sent[HEADER] = secret
        return httpx.Client(base_url=self.url, headers=sent, timeout=10)


def _secret_of(home: Path) -> str:
    """The secret serve created (a placeholder when there is none, so each test fails on its own check)."""
    path = home / "sidecar.secret"
    return path.read_text(encoding="utf-8").strip() if path.is_file() else "<no sidecar.secret>"


def test_serve_creates_one_secret_0600_in_a_0700_dir(isolated_home: Path) -> None:
    import os

    os.chmod(isolated_home, 0o755)
    app = create_app(LightMem(Config()))
    with ServerThread(app):
        path = isolated_home / "sidecar.secret"
        assert path.is_file()
        assert path.stat().st_mode & 0o777 == 0o600 and isolated_home.stat().st_mode & 0o777 == 0o700
        assert re.fullmatch(r"[0-9a-f]{64}", _secret_of(isolated_home))
        first = path.read_bytes()
    with ServerThread(create_app(LightMem(Config()))):
        assert path.read_bytes() == first  # created once: a restart keeps it


@pytest.fixture
def seeded(isolated_home: Path) -> Iterator[Seeded]:
    """A running serve with an archived output, a session record and a config file in normal mode."""
    config = isolated_home / "config.json"
    config.write_text(json.dumps({"mode": "normal"}) + "\n", encoding="utf-8")
    RecordStore(isolated_home / "records").append(
        "oc-rec",
        3,
        {
            level: f"Session record (turn 3):\nGoal (turn 0): {RECORDED}"
            for level in ("critical", "standard", "full")
        },
    )
    plugin = LightMem.from_config()
    plugin.attach_search_index()
    app = create_app(plugin, commands=run_remote_line)
    with ServerThread(app) as srv:
        secret = _secret_of(isolated_home)
        with httpx.Client(base_url=srv.url, headers={HEADER: secret}, timeout=10) as ours:
            out = ours.post("/sidecar/ingest", json={"sessionId": "oc-1", "toolCallId": "c1", "output": BIG})
            assert out.status_code == 200, out.text
            found = re.search(r"\b[0-9a-f]{12,32}\b", out.json()["output"])
            assert found, out.json()
        yield Seeded(srv.url, secret, isolated_home, config, found.group(0), plugin)


ATTACKS: list[tuple[str, dict[str, Any]]] = [
    ("/sidecar/search", {"query": ARCHIVED}),
    ("/sidecar/recover", {"key": "KEY"}),
    ("/sidecar/command", {"text": "/lightmem2 export --format json"}),
    ("/sidecar/command", {"text": "/lightmem2 resume"}),
    ("/sidecar/command", {"text": "/lightmem2 mode aggressive"}),
    ("/sidecar/command", {"text": f"/lightmem2 resume --trace {TRACE}"}),
    ("/sidecar/assemble", {"sessionId": "oc-1", "messages": [{"role": "user", "content": "hi"}]}),
    ("/sidecar/ingest", {"sessionId": "oc-1", "toolCallId": "c2", "output": BIG}),
    ("/sidecar/toolResult", {"sessionId": "oc-1", "toolCallId": "c3", "output": BIG}),
    ("/sidecar/afterTurn", {"sessionId": "oc-1", "response": "x", "usage": {"prompt_tokens": 5}}),
]


@pytest.mark.parametrize("secret", [None, "0" * 64, "short"], ids=["missing", "wrong", "malformed"])
@pytest.mark.parametrize(("route", "body"), ATTACKS, ids=[f"{r}:{json.dumps(b)[:40]}" for r, b in ATTACKS])
def test_a_second_user_without_the_secret_gets_nothing(
    seeded: Seeded, secret: str | None, route: str, body: dict[str, Any]
) -> None:
    before = seeded.config.read_bytes()
    sessions_before = set(seeded.plugin.sessions)
    body = {k: (seeded.key if v == "KEY" else v) for k, v in body.items()}
    with seeded.client(secret) as other:
        r = other.post(route, json=body)
    assert r.status_code == (401 if secret is None else 403), r.text
    text = r.text
    for leaked in (ARCHIVED, RECORDED, "Goal (turn", seeded.secret, "mode:", "lightmem2 recover"):
        assert leaked not in text, (leaked, text)
    error = r.json()["error"]
    assert HEADER in error.lower() and "lightmem2 config secret-path" in error  # what is wrong, and the fix
    assert set(r.json()) == {"error"}
    assert seeded.config.read_bytes() == before
    assert set(seeded.plugin.sessions) == sessions_before  # no session created or touched
    assert seeded.plugin.config.mode == "normal"


def test_with_the_secret_everything_works_as_before(seeded: Seeded) -> None:
    with seeded.client(seeded.secret) as ours:
        found = ours.post("/sidecar/search", json={"query": ARCHIVED})
        assert found.status_code == 200, found.text
        hits = found.json()["text"]
        assert ARCHIVED in hits and seeded.key in hits
        assert ours.post("/sidecar/recover", json={"key": seeded.key}).json()["text"] == BIG
        exported = ours.post("/sidecar/command", json={"text": "/lightmem2 export --format json"})
        assert exported.status_code == 200 and RECORDED in exported.json()["text"]
        resumed = ours.post("/sidecar/command", json={"text": "/lightmem2 resume --level full"}).json()[
            "text"
        ]
        assert RECORDED in resumed
        switched = ours.post("/sidecar/command", json={"text": "/lightmem2 mode aggressive"}).json()["text"]
        assert "aggressive" in switched
        assert json.loads(seeded.config.read_text(encoding="utf-8"))["mode"] == "aggressive"
        health = ours.get("/sidecar/health").json()
        assert health["status"] == "ok" and health["mode"] == "aggressive" and "version" in health


def test_the_unauthenticated_health_probe_says_only_ok(seeded: Seeded) -> None:
    with seeded.client() as other:
        r = other.get("/sidecar/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_health_proves_the_server_knows_the_secret(seeded: Seeded) -> None:
    import hashlib
    import hmac

    challenge = "c" * 32
    with seeded.client(None, **{"x-lightmem2-challenge": challenge}) as other:
        proof = other.get("/sidecar/health").json()["proof"]
    assert proof == hmac.new(seeded.secret.encode(), challenge.encode(), hashlib.sha256).hexdigest()


def test_a_browser_page_is_refused_even_with_the_secret(seeded: Seeded) -> None:
    with seeded.client(seeded.secret, origin="http://evil.example") as page:
        r = page.post("/sidecar/search", json={"query": ARCHIVED})
        assert r.status_code == 403 and "Origin" in r.json()["error"] and ARCHIVED not in r.text
        assert page.get("/sidecar/health").status_code == 403
    with seeded.client(seeded.secret) as ours:
        plain = ours.post(
            "/sidecar/command",
            content=b'{"text": "/lightmem2 mode aggressive"}',
            headers={"content-type": "text/plain"},
        )
    assert plain.status_code == 415 and "application/json" in plain.json()["error"]
    assert json.loads(seeded.config.read_text(encoding="utf-8"))["mode"] == "normal"


@pytest.mark.parametrize("host", ["evil.example:8787", "evil.example", "127.0.0.1.nip.io", "10.0.0.1:80"])
def test_a_rebinding_host_name_is_refused_on_sidecar_and_proxy_routes(seeded: Seeded, host: str) -> None:
    with seeded.client(seeded.secret) as ours:
        side = ours.post("/sidecar/search", json={"query": ARCHIVED}, headers={"host": host})
        assert side.status_code == 403 and "Host" in side.json()["error"] and ARCHIVED not in side.text
        proxied = ours.post(
            "/v1/chat/completions", json={"model": "m", "messages": []}, headers={"host": host}
        )
        assert proxied.status_code == 403 and "--allow-remote" in proxied.text
        assert ours.get("/healthz", headers={"host": host}).status_code == 403


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8787", "localhost:1", "LOCALHOST", "[::1]:8787", "::1", "127.0.0.1"]
)
def test_loopback_host_names_pass(seeded: Seeded, host: str) -> None:
    with seeded.client(seeded.secret) as ours:
        assert ours.get("/healthz", headers={"host": host}).status_code == 200
        r = ours.post("/sidecar/search", json={"query": ARCHIVED}, headers={"host": host})
        assert r.status_code == 200 and ARCHIVED in r.json()["text"]


def test_allow_remote_opens_proxy_routes_to_other_hosts_but_never_the_sidecar(isolated_home: Path) -> None:
    app = create_app(LightMem(Config()), allow_remote=True)
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=10) as client:
        secret = _secret_of(isolated_home)
        assert client.get("/healthz", headers={"host": "box.lan:8787"}).status_code == 200
        r = client.post(
            "/sidecar/search", json={"query": "x"}, headers={"host": "box.lan:8787", HEADER: secret}
        )
        assert r.status_code == 403 and "Host" in r.json()["error"]


@pytest.mark.parametrize(
    "line",
    [
        f"resume --trace {TRACE}",
        f"resume --tr {TRACE}",  # argparse abbreviations must not slip through
        "resume --trace /dev/zero",
        "visual --out /root/forbidden",
        "visual --open",
        f"replay {TRACE}",
        "install openclaw",
        "install claude-code --uninstall",
        "serve --port 1",
        "hook claude-code PostToolUse",
        "demo",
        f"demo --trace {TRACE}",
        "config secret-path",
        "config sidecar",
    ],
)
def test_commands_that_name_files_are_refused_even_with_the_secret(seeded: Seeded, line: str) -> None:
    target = Path("/root/forbidden")
    existed = target.exists()
    with seeded.client(seeded.secret) as ours:
        r = ours.post("/sidecar/command", json={"text": f"/lightmem2 {line}"})
    assert r.status_code == 403, r.text
    error = r.json()["error"]
    assert "in a terminal" in error and "\n" not in error
    assert "Goal (turn" not in r.text and seeded.secret not in r.text
    assert target.exists() == existed


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("status", "lightmem2 mode: normal"),
        ("report", ""),
        ("doctor", "config"),
        ("mode", "mode: normal"),
        ("recover KEY --lines 1:1", ARCHIVED),
        (f"search {ARCHIVED}", ARCHIVED),
        ("resume", RECORDED),
        ("config show", '"mode": "normal"'),
        ("config path", "config.json"),
        ("visual", "no calls recorded yet"),  # ran (the ledger is empty), was not refused
        ("", "lightmem2 mode: normal"),
        ("mode turbo", "unknown mode"),
    ],
)
def test_chat_safe_commands_keep_working(seeded: Seeded, line: str, needle: str) -> None:
    with seeded.client(seeded.secret) as ours:
        r = ours.post(
            "/sidecar/command", json={"text": f"/lightmem2 {line.replace('KEY', seeded.key)}".strip()}
        )
    assert r.status_code == 200, r.text
    assert needle in r.json()["text"]


def _blocking_status(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """``status`` that blocks until released (stands for a slow disk or a huge ledger)."""
    from lightmem_plugin.commands import status

    started, release = threading.Event(), threading.Event()

    def slow(*_args: Any, **_kw: Any) -> str:
        started.set()
        release.wait(30)
        return "slow status done"

    monkeypatch.setattr(status, "run", slow)
    return started, release


def test_a_slow_command_does_not_delay_healthz_or_the_proxy(
    seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = _blocking_status(monkeypatch)
    answers: list[httpx.Response] = []

    def call() -> None:
        with seeded.client(seeded.secret) as ours:
            answers.append(ours.post("/sidecar/command", json={"text": "/lightmem2 status"}, timeout=40))

    worker = threading.Thread(target=call)
    worker.start()
    try:
        assert started.wait(10), "the command never started"
        with seeded.client(seeded.secret) as ours:
            t0 = time.monotonic()
            assert ours.get("/healthz", timeout=3).status_code == 200
            r = ours.post("/sidecar/search", json={"query": ARCHIVED}, timeout=3)
            assert r.status_code == 200
            assert time.monotonic() - t0 < 2.0
    finally:
        release.set()
        worker.join(40)
    assert answers and answers[0].json()["text"] == "slow status done"


def test_a_command_over_its_time_limit_answers_504_and_frees_its_slot(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _started, release = _blocking_status(monkeypatch)
    cfg = Config()
    cfg.server.commandTimeoutS = 0.5
    app = create_app(LightMem(cfg), commands=run_remote_line)
    try:
        with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=10) as client:
            client.headers[HEADER] = _secret_of(isolated_home)
            t0 = time.monotonic()
            r = client.post("/sidecar/command", json={"text": "/lightmem2 status"})
            assert r.status_code == 504 and "server.commandTimeoutS" in r.json()["error"]
            assert time.monotonic() - t0 < 3
            busy = [client.post("/sidecar/command", json={"text": "/lightmem2 status"}) for _ in range(3)]
            assert busy[-1].status_code == 503 and "still running" in busy[-1].json()["error"]
            release.set()
            time.sleep(0.3)
            monkeypatch.undo()
            again = client.post("/sidecar/command", json={"text": "/lightmem2 mode"})
            assert again.status_code == 200 and "mode: normal" in again.json()["text"]
    finally:
        release.set()


def test_command_output_is_cut_at_the_size_limit(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lightmem_plugin.commands import status

    monkeypatch.setattr(status, "run", lambda *a, **k: "x" * 50_000)
    cfg = Config()
    cfg.server.commandMaxChars = 1000
    app = create_app(LightMem(cfg), commands=run_remote_line)
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=10) as client:
        client.headers[HEADER] = _secret_of(isolated_home)
        text = client.post("/sidecar/command", json={"text": "/lightmem2 status"}).json()["text"]
    assert text.startswith("x" * 1000) and len(text) < 1200 and "server.commandMaxChars" in text


def test_proxy_routes_need_no_secret(seeded: Seeded) -> None:
    """The host's own traffic (Claude Code, Codex) carries no secret; it reaches the provider as before."""
    with seeded.client() as host:
        r = host.get("/healthz", headers={"host": f"127.0.0.1:{seeded.url.rsplit(':', 1)[1]}"})
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_a_second_uid_cannot_read_the_secret(seeded: Seeded) -> None:
    """As root, drop to ``nobody`` in a child and try the file and the routes, as another local user would."""
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("needs root to run a child as another uid")
    path = seeded.home / "sidecar.secret"
    assert path.stat().st_mode & 0o777 == 0o600
    assert (seeded.home.stat().st_mode & 0o777) == 0o700
    python = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None)
    if python is None:  # the venv's interpreter may live in a directory other users cannot enter
        pytest.skip("no system python3 that another user can run")
    out = subprocess.run(
        [python, "-I", "-c", OTHER_USER, str(path), seeded.url, seeded.key],
        capture_output=True,
        text=True,
        timeout=60,
        user=65534,
        group=65534,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["read"] == "PermissionError"
    assert report["statuses"] == [401, 401, 401]
    assert ARCHIVED not in out.stdout and seeded.secret not in out.stdout


def test_the_proxy_routes_never_hand_out_archives() -> None:
    """Without a secret, a client claiming another session's id through /v1 gets none of its archive."""
    from fake_wire import Reply
    from server_harness import stack

    with stack() as st:
        victim = st.plugin.session("victim")
        stub = victim.ingest_tool_result("c1", BIG)
        found = re.search(r"\b[0-9a-f]{12,32}\b", stub)
        assert found, stub
        key = found.group(0)
        st.fake.queue(Reply(text=f"please recover {key} via lightmem2_recover"))
        body = {"model": "m", "messages": [{"role": "user", "content": f"/lightmem2 recover {key}"}]}
        r = httpx.post(st.url("chat"), json=body, headers={"x-lightmem2-session": "victim"}, timeout=10)
        assert r.status_code == 200
        assert ARCHIVED not in r.text
        assert all(ARCHIVED not in rec.raw.decode("utf-8", "replace") for rec in st.fake.received)
