"""Kill ``lightmem2 serve`` by PID mid-session and restart it: every later request is byte-equal.

A real recorded session (bundled) is replayed as Chat Completions requests through a real ``serve``
process (aggressive mode, an eviction batch at call 20) to a fake provider on loopback, once without
interruption and once with a SIGKILL after call 26 and a fresh process for the rest. The fake upstream
records the raw bytes it received; the two runs must agree on every one of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from fake_upstream import FakeUpstream
from server_harness import ServeProcess, ServerThread

from lightmem_plugin.measure.traces import load_trace

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz"
KILL_AFTER = 24  # between the batches at calls 23 and 26: the second is decided after the restart


def Serve(home: Path) -> ServeProcess:
    """A ready ``lightmem2 serve`` process on ``home``."""
    return ServeProcess(home).wait_ready()


def _replay(home: Path, upstream: str, fake: FakeUpstream, kill_after: int | None) -> list[bytes]:
    home.mkdir()
    config = {
        "mode": "aggressive",
        "eviction": {"expectedRemainingCalls": 500, "keepRecentTurns": 2},
        "server": {"upstreams": {"openai": upstream + "/v1"}},
    }
    (home / "config.json").write_text(json.dumps(config))
    trace = load_trace(TRACE)
    start = len(fake.received)
    serve = Serve(home)
    try:
        with httpx.Client(timeout=30) as client:
            for i, call in enumerate(trace.calls):
                body = {"model": "fake-model", "messages": call.prompt}
                r = client.post(serve.url + "/v1/chat/completions", json=body)
                assert r.status_code == 200, r.text
                if i == kill_after:
                    serve.kill()
                    serve = Serve(home)
    finally:
        serve.stop()
    return [r.raw for r in fake.received[start:]]


def test_sigkill_and_restart_send_the_same_bytes(tmp_path: Path) -> None:
    fake = FakeUpstream()
    with ServerThread(fake.app) as up:
        straight = _replay(tmp_path / "straight", up.url, fake, None)
        restarted = _replay(tmp_path / "restarted", up.url, fake, KILL_AFTER)
    assert len(straight) == len(restarted) == len(load_trace(TRACE).calls)
    # the feature under test really happened: an eviction batch before the kill, re-applied after it
    evicted = [i for i, raw in enumerate(straight) if b"[lightmem2: output archived as " in raw]
    assert evicted and evicted[0] < KILL_AFTER < evicted[-1]
    differ = [i for i, (a, b) in enumerate(zip(straight, restarted, strict=True)) if a != b]
    assert differ == []
