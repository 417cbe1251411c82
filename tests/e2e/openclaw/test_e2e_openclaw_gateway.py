"""The Gateway chat path: ``/lightmem2 ...`` typed in a chat is answered by the plugin, no model call.

``openclaw gateway run`` starts the plugin's service (the sidecar); ``chat.send`` carries the
command; the reply is read back from ``chat.history``. ``/lightmem2 mode aggressive`` must land in
lightmem2's config file and in the running sidecar (the next call runs aggressive); ``doctor`` must
report the OpenClaw side; stopping the Gateway stops the sidecar; the Gateway logs no
MaxListenersExceededWarning.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import httpx
import pytest
from openclaw_e2e import OpenClawEnv, free_port

TOKEN = "lightmem2-e2e-token"
SESSION = "agent:main:main"


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


class Gateway:
    def __init__(self, env: OpenClawEnv) -> None:
        self.env = env
        self.port = free_port()
        self.log = env.root / "gateway.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.sent = 0

    def start(self) -> None:
        argv = [str(self.env.host.openclaw), "gateway", "run", "--port", str(self.port)]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [*argv, "--auth", "token", "--bind", "loopback"],
                env={**self.env.env(), "OPENCLAW_GATEWAY_TOKEN": TOKEN},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        wait_for(lambda: listening(self.port) or self._died(), 180, "the Gateway to listen")

    def _died(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"gateway exited: {self.log.read_text(errors='replace')[-3000:]}")
        return False

    def call(self, method: str, params: dict[str, Any]) -> Any:
        done = self.env.openclaw(
            "gateway", "call", method, "--url", f"ws://127.0.0.1:{self.port}", "--token", TOKEN,
            "--json", "--params", json.dumps(params), "--timeout", "60000", timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, f"gateway call {method}: {done.stdout[-1500:]}{done.stderr[-1500:]}"
        return json.loads(done.stdout[done.stdout.index("{") :])

    def chat(self, text: str) -> str:
        """Send ``text`` to the main session; the reply the Gateway wrote into the transcript."""
        self.sent += 1
        ack = self.call(
            "chat.send", {"sessionKey": SESSION, "message": text, "idempotencyKey": f"e2e-{self.sent}"}
        )
        assert ack.get("status") in ("started", "ok", "completed"), ack

        def reply() -> str | None:
            messages = self.call("chat.history", {"sessionKey": SESSION})["messages"]
            asked = [i for i, m in enumerate(messages) if m["role"] == "user" and m.get("content") == text]
            if not asked or asked[-1] + 1 >= len(messages):
                return None
            answer = messages[asked[-1] + 1]
            assert answer["role"] == "assistant" and answer.get("provider") != "fake", answer
            content = answer["content"]
            return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)

        found: str = wait_for(reply, 120, f"the reply to {text!r}")
        return found

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)


T = TypeVar("T")


def on_gateway(env: OpenClawEnv, chat: Callable[[Gateway], T]) -> T:
    """``chat`` run on a Gateway started for ``env``, stopped after it whatever happens."""
    gw = Gateway(env)
    try:
        gw.start()
        return chat(gw)
    finally:
        gw.stop()


@pytest.fixture
def gateway(make_env: Any) -> Iterator[Gateway]:
    gw = Gateway(make_env("gateway"))
    try:
        gw.start()
        yield gw
    finally:
        gw.stop()


def test_lightmem2_commands_on_the_gateway_chat_path(gateway: Gateway) -> None:
    env = gateway.env
    sidecar = f"http://127.0.0.1:{env.sidecar_port}/sidecar/health"

    def health() -> dict[str, Any] | None:
        """The sidecar's health as the plugin sees it (with the secret the plugin and serve share)."""
        try:
            secret = (env.lightmem2_home / "sidecar.secret").read_text(encoding="utf-8").strip()
            body: dict[str, Any] = httpx.get(
                sidecar, timeout=2, headers={"x-lightmem2-secret": secret}
            ).json()
            return body
        except (httpx.HTTPError, OSError):
            return None

    assert wait_for(health, 60, "the sidecar the plugin's service starts")["status"] == "ok"

    status = gateway.chat("/lightmem2 status")
    assert status.startswith("lightmem2 mode: normal"), status

    switched = gateway.chat("/lightmem2 mode aggressive")
    assert switched.startswith("mode set to aggressive"), switched
    config = json.loads((env.lightmem2_home / "config.json").read_text(encoding="utf-8"))
    assert config["mode"] == "aggressive"
    assert wait_for(
        lambda: (health() or {}).get("mode") == "aggressive", 30, "the sidecar in aggressive mode"
    )
    assert gateway.chat("/lightmem2 status").startswith("lightmem2 mode: aggressive")

    doctor = gateway.chat("/lightmem2 doctor")
    assert f"[pass] openclaw plugin: sidecar at http://127.0.0.1:{env.sidecar_port}" in doctor, doctor
    assert "mode aggressive" in doctor.splitlines()[0]
    assert "[pass] config:" in doctor and "doctor:" in doctor
    # one truth: the plugin's sidecar is the server lightmem2's config names (it said "not running")
    assert "[warn] server" not in doctor and "[fail] server" not in doctor, doctor

    assert env.fake.received == []  # the commands never reached the model

    gateway.stop()
    wait_for(lambda: not listening(env.sidecar_port), 30, "the sidecar to stop with the Gateway")
    # one exit hook for the plugin's sidecars, however often OpenClaw loads it (before: one per copy of
    # the module, and on top of OpenClaw's own the Gateway warned of a leak at every start)
    log = gateway.log.read_text(errors="replace")
    assert "MaxListenersExceededWarning" not in log, [x for x in log.splitlines() if "MaxListeners" in x]
