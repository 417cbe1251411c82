"""OpenClaw from npm (2026.9.6: the pin, and the newest, ``npm view openclaw version`` on 2026-12-05),
end to end on the Gateway chat path: a typo in lightmem2's config.json, and what ``/lightmem2 status``
says about it (the Claude Code and Codex hooks' answer: test_e2e_claude_code_config.py,
test_e2e_codex_config.py).

A first chat turn runs on the valid file (the plugin's service started ``lightmem2 serve`` on the
test's own port, from config.json, and serve kept a ``config.last-good.json`` beside it). Then
``"mode": "turbo"`` is written into config.json, and:

* ``running``: the Gateway and its serve keep running.
* ``restarted``: the Gateway is stopped (serve stops with it) and started again, so the plugin starts
  serve on the invalid file. Measured before the fix: ``lightmem2 config sidecar`` named no port for
  an invalid file, so the plugin started serve on 8787, not on the last good config's port where the
  hooks, doctor and a restarted serve look for it.
* ``inactive`` (its own test): as ``restarted``, with the last good config's port held by a server
  that cannot prove this install's secret, so the plugin cannot run its sidecar and OpenClaw runs
  unmodified. Measured before the fix: ``/lightmem2 status`` answered with the CLI's "config in force:
  last good (mode normal ...)" alone, as if lightmem2 ran in OpenClaw on that config.

Checked request by request at the fake provider: ``/lightmem2 status`` and ``doctor`` never reach it;
each prompt reaches it once, and (unless inactive) the ledger holds one row per request it received,
in mode ``normal``, the last good config's. The status answer names the bad key (``mode =
"turbo"``) and says the last good config is in force, as the other hosts' status does; inactive, its
first line says so. The Gateway logs no MaxListenersExceededWarning (before, the plugin added an exit
hook per copy of its module OpenClaw loads, on top of OpenClaw's own nine or ten: adapters/openclaw/index.js).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from e2e_support import log_tail
from fake_wire import Reply
from openclaw_e2e import OpenClawEnv
from test_e2e_openclaw_gateway import Gateway, listening, wait_for
from test_e2e_openclaw_gateway_tools import _last_answer

from lightmem_plugin.store.ledger import Ledger

SESSION = "agent:main:main"
BAD_KEY = 'mode = "turbo"'
IN_FORCE = "config in force: last good (mode normal, valid as of "
INACTIVE = "lightmem2 is not active in OpenClaw: its sidecar is unavailable ("
LEAK = "MaxListenersExceededWarning"
DEFAULT_PORT = 8787


def _ledger_rows() -> list[tuple[str, str]]:
    """(session, mode) of every model call the sidecar recorded, oldest first (``LIGHTMEM2_HOME`` is
    the env's: ``make_env`` set it in this process)."""
    ledger = Ledger.default()
    try:
        return [(c.session_id, c.mode) for c in ledger.recent_calls(10_000)]
    finally:
        ledger.close()


def _wait(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.2)
    return check()


class Chat:
    """The main session over a Gateway that may be restarted: idempotency keys never repeat."""

    def __init__(self, env: OpenClawEnv) -> None:
        self.env = env
        self.gateway: Gateway | None = None
        self.sent = 0
        self.logs: list[Path] = []

    def start(self) -> Gateway:
        gw = Gateway(self.env)
        gw.log = self.env.root / f"gateway-{len(self.logs)}.log"
        self.logs.append(gw.log)
        gw.sent = self.sent
        gw.start()
        self.gateway = gw
        return gw

    def stop(self) -> None:
        if self.gateway is not None:
            self.gateway.stop()
            self.sent = self.gateway.sent
            self.gateway = None

    def command(self, text: str) -> str:
        """A ``/lightmem2`` command's reply; it must not reach the provider."""
        assert self.gateway is not None
        before = len(self.env.fake.received)
        reply = self.gateway.chat(text)
        self.sent = self.gateway.sent
        assert len(self.env.fake.received) == before, f"{text!r} reached the provider"
        return reply

    def prompt(self, text: str, reply: str) -> list[dict[str, Any]]:
        """An ordinary prompt, answered by the provider with ``reply``: the request bodies it received."""
        gw = self.gateway
        assert gw is not None
        before = len(self.env.fake.received)
        self.env.fake.queue(Reply(reply))
        self.sent += 1
        gw.sent = self.sent
        params = {"sessionKey": SESSION, "message": text, "idempotencyKey": f"config-{self.sent}"}
        ack = gw.call("chat.send", params)
        assert ack.get("status") in ("started", "ok", "completed"), ack
        wait_for(lambda: len(self.env.fake.received) > before, 180, f"the model call of {text!r}")
        wait_for(lambda: _last_answer(gw) == reply, 120, f"the answer to {text!r}")
        assert not self.env.fake.script, "OpenClaw made fewer model calls than scripted"
        return [r.body for r in self.env.fake.received[before:]]

    def log_text(self) -> str:
        return "".join(p.read_text(errors="replace") for p in self.logs if p.exists())


@pytest.fixture
def chat(make_env: Any) -> Iterator[Chat]:
    c = Chat(make_env("typo"))
    try:
        yield c
    finally:
        c.stop()


def _health(env: OpenClawEnv) -> dict[str, Any] | None:
    """The sidecar's health on the test's port, with this install's secret (None: nothing answers)."""
    try:
        secret = (env.lightmem2_home / "sidecar.secret").read_text(encoding="utf-8").strip()
        url = f"http://127.0.0.1:{env.sidecar_port}/sidecar/health"
        body: dict[str, Any] = httpx.get(url, timeout=2, headers={"x-lightmem2-secret": secret}).json()
        return body
    except (httpx.HTTPError, OSError, ValueError):
        return None


def _first_turn_then_typo(chat: Chat) -> None:
    """A turn on the valid file, then ``"mode": "turbo"`` written into it, the rest as it was."""
    env = chat.env
    chat.start()
    wait_for(lambda: _health(env), 60, "the sidecar the plugin's service starts")
    bodies = chat.prompt("Hello.", "Hello there.")
    assert len(bodies) == 1
    assert _wait(lambda: len(_ledger_rows()) == 1, 15), _ledger_rows()
    last_good = env.lightmem2_home / "config.last-good.json"
    assert last_good.exists(), "serve read the valid config, yet no config.last-good.json beside it"
    assert json.loads(last_good.read_text(encoding="utf-8")) == {"server": {"port": env.sidecar_port}}
    assert env.sidecar_port != DEFAULT_PORT
    path = env.lightmem2_home / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["mode"] = "turbo"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")


def _restart(chat: Chat) -> None:
    chat.stop()
    wait_for(lambda: not listening(chat.env.sidecar_port), 30, "the sidecar to stop with the Gateway")


@pytest.mark.parametrize("gateway", ["running", "restarted"])
def test_openclaw_runs_on_the_last_good_config_and_status_says_so(chat: Chat, gateway: str) -> None:
    env = chat.env
    _first_turn_then_typo(chat)
    if gateway == "restarted":
        _restart(chat)
        chat.start()
    # the plugin's serve answers on the port of the config in force (the last good one), not 8787
    health = wait_for(lambda: _health(env), 60, f"the sidecar on the last good port {env.sidecar_port}")
    assert health["mode"] == "normal", health

    # 1. /lightmem2 status: the bad key and the config in force, as the other hosts' status says it
    status = chat.command("/lightmem2 status")
    print(f"\n/lightmem2 status ({gateway}):\n{status}")
    assert status.startswith("lightmem2 mode: normal"), status
    assert BAD_KEY in status, status
    assert IN_FORCE in status, status
    assert INACTIVE not in status, status

    # 2. an ordinary prompt: one request at the provider, recorded once by the sidecar, in mode normal
    rows_before = _ledger_rows()
    bodies = chat.prompt("Are you still there?", "Still here, on the last good config.")
    assert len(bodies) == 1
    assert "Are you still there?" in json.dumps(bodies[0]["messages"][-2:])
    _wait(lambda: len(_ledger_rows()) >= len(rows_before) + len(bodies), 15)
    rows = _ledger_rows()[len(rows_before) :]
    assert len(rows) == len(bodies), f"{len(bodies)} requests at the provider, {len(rows)} recorded: {rows}"
    assert {mode for _sid, mode in rows} == {"normal"}, rows

    # 3. doctor: the sidecar and serve on the port in force, and the config to fix
    doctor = chat.command("/lightmem2 doctor")
    print(f"/lightmem2 doctor ({gateway}):\n{doctor}")
    lines = doctor.splitlines()
    assert lines[0].startswith(f"[pass] openclaw plugin: sidecar at http://127.0.0.1:{env.sidecar_port} "), (
        doctor
    )
    assert f"[pass] server: running at http://127.0.0.1:{env.sidecar_port}/healthz" in lines, doctor
    assert f":{DEFAULT_PORT}" not in doctor, doctor
    config_line = next((x for x in lines if x.startswith("[fail] config:")), "")
    assert BAD_KEY in config_line and "last good (mode normal" in config_line, doctor

    chat.stop()
    log = chat.log_text()
    assert LEAK not in log, [x for x in log.splitlines() if LEAK in x]
    serve_log = env.lightmem2_home / "serve.log"
    assert not listening(env.sidecar_port), f"serve outlived the Gateway\n{log_tail(serve_log)}"


class _Squatter(BaseHTTPRequestHandler):
    """Answers everything like a server of another install: ok, without the proof of this secret."""

    seen: ClassVar[list[tuple[str, str, bool]]] = []  # each squat has its own subclass and list

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        self.seen.append((self.command, self.path, "x-lightmem2-secret" in self.headers))
        body = b'{"status": "ok"}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def _squat(port: int) -> Iterator[list[tuple[str, str, bool]]]:
    """A foreign server on ``port`` (loopback) while in the block: the requests it got."""
    seen: ClassVar[list[tuple[str, str, bool]]] = []  # each squat has its own subclass and list
    handler = type("Squatter", (_Squatter,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_openclaw_status_says_lightmem2_is_inactive_when_its_sidecar_cannot_run(chat: Chat) -> None:
    env = chat.env
    _first_turn_then_typo(chat)
    _restart(chat)
    with _squat(env.sidecar_port) as seen:
        chat.start()
        status = chat.command("/lightmem2 status")
        print(f"\n/lightmem2 status (inactive):\n{status}")
        rows_before = _ledger_rows()
        bodies = chat.prompt("Are you still there?", "Still here, without lightmem2.")
        chat.stop()
    # 1. the answer says first that OpenClaw runs without lightmem2, then the CLI's status: the bad
    # key and the config lightmem2 would run on
    first, *rest = status.splitlines()
    assert first.startswith(INACTIVE), status
    assert "cannot prove it knows this install's secret" in first, status
    assert "OpenClaw runs unmodified (fail-open)" in first, status
    assert rest and rest[0].startswith("lightmem2 mode: normal"), status
    assert BAD_KEY in status and IN_FORCE in status, status

    # 2. the prompt reached the provider once, unmodified and unrecorded; the squatter was asked for
    # its proof only, never sent the secret or a message
    assert len(bodies) == 1
    assert "Are you still there?" in json.dumps(bodies[0]["messages"][-2:])
    time.sleep(1)
    assert _ledger_rows() == rows_before
    assert seen and all(path == "/sidecar/health" and not secret for _m, path, secret in seen), seen
    assert LEAK not in chat.log_text()
