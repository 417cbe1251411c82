"""A bounded soak of ``lightmem2 serve`` on loopback: no errors, no leaked descriptors, no memory growth.

The proxy runs as a real ``serve()`` process (its own config file, ledger and registry in a temporary
``LIGHTMEM2_HOME``) in front of the fake provider (another process). Sixteen sessions, driven by eight
client threads, replay a six-call agent conversation over and over, alternating Chat Completions
(plain and streamed) and Anthropic Messages (streamed). After a warm-up the test reads the proxy
process's open descriptors (``/proc/PID/fd``) and resident memory (``VmRSS``); at the end both must be
back within a small margin. Default: 2,000 requests. ``LIGHTMEM2_SOAK=1``: 20,000 requests or 10
minutes, whichever comes first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from rel_convo import calls

from lightmem_plugin.store.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "server" / "fake_upstream.py"
SOAK = os.environ.get("LIGHTMEM2_SOAK") == "1"
REQUESTS = 20_000 if SOAK else 2_000
DEADLINE_S = 600.0 if SOAK else 240.0
SESSIONS = 16
THREADS = 16
TURNS = 6
WARMUP = 0.25
MAX_FD_GROWTH = 8
MAX_RSS_GROWTH_MB = 48.0

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux /proc")


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            assert time.monotonic() < deadline, f"{url} did not come up"
            time.sleep(0.1)


@contextmanager
def _processes(home: Path) -> Iterator[tuple[str, int]]:
    """The fake provider and ``serve()`` as child processes; yields (proxy URL, proxy PID)."""
    up_port, px_port = _free_port(), _free_port()
    home.mkdir(exist_ok=True)
    config = {
        "server": {
            "upstreams": {
                "openai": f"http://127.0.0.1:{up_port}/v1",
                "anthropic": f"http://127.0.0.1:{up_port}",
            }
        }
    }
    (home / "config.json").write_text(json.dumps(config))
    env = {**os.environ, "LIGHTMEM2_HOME": str(home), "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    code = "import sys\nfrom lightmem_plugin.server import serve\nserve(port=int(sys.argv[1]))\n"
    fake = subprocess.Popen([sys.executable, str(FAKE), str(up_port)], env=env, stderr=subprocess.PIPE)
    proxy = subprocess.Popen([sys.executable, "-c", code, str(px_port)], env=env, stderr=subprocess.PIPE)
    try:
        _wait_up(f"http://127.0.0.1:{up_port}/v1/models", fake)
        _wait_up(f"http://127.0.0.1:{px_port}/healthz", proxy)
        yield f"http://127.0.0.1:{px_port}", proxy.pid
    finally:
        for p in (proxy, fake):
            p.terminate()
            p.wait(timeout=20)
            if p.stderr is not None:
                p.stderr.close()


def _anthropic(chat: list[dict[str, Any]]) -> dict[str, Any]:
    """The chat conversation as an Anthropic Messages request (tool calls and results as blocks)."""
    system = chat[0]["content"]
    msgs: list[dict[str, Any]] = []
    for m in chat[1:]:
        if m["role"] == "user":
            msgs.append({"role": "user", "content": m["content"]})
        elif m["role"] == "assistant":
            call = m["tool_calls"][0]
            block = {"type": "tool_use", "id": call["id"], "name": "bash", "input": {"cmd": "make"}}
            msgs.append({"role": "assistant", "content": [block]})
        else:
            result = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            msgs.append({"role": "user", "content": [result]})
    return {"model": "m", "max_tokens": 20, "stream": True, "system": system, "messages": msgs}


class Soak:
    """Shared counters of the client threads."""

    def __init__(self, total: int, deadline: float) -> None:
        self.lock = threading.Lock()
        self.total = total
        self.deadline = deadline
        self.sent = 0
        self.errors: list[str] = []
        self.marks: dict[str, tuple[int, float]] = {}
        self.convos = {f"soak{i}": calls(f"soak{i}", TURNS) for i in range(SESSIONS)}

    def take(self) -> int | None:
        with self.lock:
            if self.sent >= self.total or time.monotonic() > self.deadline:
                return None
            self.sent += 1
            return self.sent


def _worker(soak: Soak, proxy: str, sessions: list[str], hook: Any) -> None:
    with httpx.Client(timeout=60) as client:
        k = 0
        while (n := soak.take()) is not None:
            hook(n)
            sid = sessions[k % len(sessions)]
            msgs = soak.convos[sid][(k // len(sessions)) % TURNS]
            k += 1
            kind = n % 3
            try:
                if kind == 0:
                    r = client.post(
                        proxy + "/v1/chat/completions",
                        json={"model": "m", "messages": msgs},
                        headers={"x-lightmem2-session": sid},
                    )
                    ok = r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "ok"
                elif kind == 1:
                    body = {"model": "m", "stream": True, "messages": msgs}
                    r = client.post(
                        proxy + "/v1/chat/completions", json=body, headers={"x-lightmem2-session": sid}
                    )
                    ok = r.status_code == 200 and r.text.rstrip().endswith("data: [DONE]")
                else:
                    headers = {
                        "x-lightmem2-session": sid,
                        "anthropic-version": "2023-06-01",
                        "x-api-key": "sk-ant-soak",
                    }
                    r = client.post(proxy + "/v1/messages", json=_anthropic(msgs), headers=headers)
                    ok = r.status_code == 200 and "message_stop" in r.text
                if not ok:
                    with soak.lock:
                        soak.errors.append(f"request {n}: HTTP {r.status_code} {r.text[:120]}")
            except httpx.HTTPError as err:
                with soak.lock:
                    soak.errors.append(f"request {n}: {type(err).__name__}: {err}")


@pytest.mark.slow
def test_soak_has_no_errors_no_fd_leak_and_no_memory_growth(tmp_path: Path) -> None:
    soak = Soak(REQUESTS, time.monotonic() + DEADLINE_S)
    warm_at = int(REQUESTS * WARMUP)
    home = tmp_path / "home"
    with _processes(home) as (proxy, pid):

        def hook(n: int) -> None:
            if n == warm_at:
                soak.marks["warm"] = (_fds(pid), _rss_mb(pid))

        names = sorted(soak.convos)
        threads = [
            threading.Thread(target=_worker, args=(soak, proxy, names[i::THREADS], hook))
            for i in range(THREADS)
        ]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=DEADLINE_S + 120)
        took = time.monotonic() - start
        time.sleep(0.5)  # let the closed client connections finish closing
        end_fds, end_rss = _fds(pid), _rss_mb(pid)
        sessions = httpx.get(proxy + "/healthz").json()["sessions"]
    with Ledger(home / "ledger.sqlite3") as ledger:
        rows = sum(len(ledger.calls(sid)) for sid in names)
        errors = [(r.session_id, r.errors) for sid in names for r in ledger.calls(sid) if r.errors]
    warm_fds, warm_rss = soak.marks["warm"]
    print(
        f"\nsoak: {soak.sent} requests in {took:.1f}s ({soak.sent / took:.0f}/s), {len(soak.errors)} errors, "
        f"{len(errors)} pass errors, {rows} ledger rows; proxy fds {warm_fds} -> {end_fds}; "
        f"proxy RSS {warm_rss:.1f} -> {end_rss:.1f} MB"
    )
    assert soak.errors == []
    assert errors == []
    assert soak.sent == REQUESTS or SOAK
    assert sessions == SESSIONS
    assert rows == soak.sent
    assert end_fds - warm_fds <= MAX_FD_GROWTH
    assert end_rss - warm_rss <= MAX_RSS_GROWTH_MB


@pytest.mark.slow
def test_finished_sessions_do_not_accumulate_memory(tmp_path: Path) -> None:
    import gc

    from lightmem_plugin.config import Config
    from lightmem_plugin.pipeline import LightMem

    cfg = Config()
    cfg.registry.dir = str(tmp_path / "artifacts")
    lm = LightMem(cfg, ledger=Ledger(tmp_path / "ledger.sqlite3"))
    lm.session("warm").before_model_call(calls("warm", 1)[0])
    gc.collect()
    base = _rss_mb(os.getpid())
    for n in range(200):
        s = lm.session(f"gone{n}")
        for msgs in calls(f"gone{n}", 4):
            s.before_model_call(msgs)
    gc.collect()
    grown = _rss_mb(os.getpid()) - base
    assert lm.ledger is not None
    lm.ledger.close()
    assert grown < 32, f"{grown:.0f} MB retained by 200 finished sessions"
