"""Big requests' memory is bounded in serve and goes back to the system once their sessions expire.

Measured before: each 11.7 MB request added about 68 MB to serve's RSS and none of it came back when
its session expired (18 such requests: 82 -> 1,451 MB with one session still held). Python had freed
the objects; glibc kept the pages (:mod:`lightmem_plugin.server.memory`). Here a real ``serve`` process
(its own data dir and session store, a fake provider on loopback) takes eight such requests, each its
own session: its RSS must stop growing with them (the last ones add under 10 MB each), and once they
are idle past ``server.sessionIdleS``, return within 20% of its level before them, with no further
request (measured before serve waited for a quiet moment to trim: about 80 MB stayed until one came).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import httpx
import pytest
from rel_convo import head, tool_output, turn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from fake_upstream import FakeUpstream
from server_harness import ServeProcess, ServerThread

BIG_REQUESTS = 8
IDLE_S = 2.0


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _big_body(session: str) -> bytes:
    msgs = head(session)
    for t in range(40):
        msgs += turn(session, t, tool_output(session, t, lines=4800))
    return json.dumps({"model": "m", "messages": msgs}).encode()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_rss_is_bounded_and_returns_near_its_level_once_big_sessions_expire(tmp_path: Path) -> None:
    fake = FakeUpstream()
    small = {"model": "m", "messages": head("warm") + turn("warm", 0)}
    with ServerThread(fake.app) as up:
        config = {"server": {"sessionIdleS": IDLE_S, "upstreams": {"openai": up.url + "/v1"}}}
        (tmp_path / "config.json").write_text(json.dumps(config))
        serve = ServeProcess(tmp_path).wait_ready()
        pid = serve.proc.pid
        try:
            with httpx.Client(timeout=300) as client:
                assert client.post(serve.url + "/v1/chat/completions", json=small).status_code == 200
                before = _rss_mb(pid)
                seen = []
                for i in range(BIG_REQUESTS):
                    body = _big_body(f"big{i}")
                    assert len(body) > 11_000_000
                    headers = {"content-type": "application/json"}
                    r = client.post(serve.url + "/v1/chat/completions", content=body, headers=headers)
                    assert r.status_code == 200
                    seen.append(_rss_mb(pid))
            assert len(fake.received) == BIG_REQUESTS + 1
            time.sleep(IDLE_S + 1.5)  # idle past sessionIdleS: serve's sweep drops them and trims
            deadline = time.monotonic() + 15
            after = _rss_mb(pid)
            while after > before * 1.2 and time.monotonic() < deadline:
                time.sleep(0.5)
                after = _rss_mb(pid)
        finally:
            serve.stop()
    print(
        f"\nserve RSS: {before:.0f} MB before, {' '.join(f'{m:.0f}' for m in seen)} with, {after:.0f} after"
    )
    assert max(seen) > before + 30, "the big requests must have taken memory (else this checks nothing)"
    assert seen[-1] - seen[3] < 40, f"RSS kept growing with the requests: {seen}"
    assert after <= before * 1.2, f"RSS {after:.0f} MB after expiry vs {before:.0f} MB before"
