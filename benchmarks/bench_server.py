"""Added time-to-first-byte of the ``lightmem2 serve`` proxy, against the fake provider, on loopback.

Runs the fake provider (``tests/server/fake_upstream.py``) and the proxy each in its own process, then
times streamed Chat Completions calls straight to the fake and through the proxy: once one call at a
time (the added latency a single agent feels) and once with 200 in flight (the load case). Prints
p50/p99 TTFB for both paths and the difference. Everything stops by itself; nothing leaves loopback.

    .venv/bin/python benchmarks/bench_server.py [--n 200] [--concurrency 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "server"))
from load_client import Batch, run_batch  # noqa: E402

PROXY = (
    "import sys\n"
    "from lightmem_plugin.config import Config\n"
    "from lightmem_plugin.server import serve\n"
    "c = Config()\n"
    "c.server.upstreams.openai = sys.argv[1]\n"
    "serve(c, port=int(sys.argv[2]))\n"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_up(url: str, deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            httpx.get(url, timeout=1.0, trust_env=False)
            return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise SystemExit(f"bench: {url} did not come up in {deadline_s:.0f}s")


def line(name: str, direct: Batch, proxied: Batch) -> str:
    return (
        f"{name:<22} direct p50 {direct.p50:7.2f} p99 {direct.pct(0.99):7.2f} | "
        f"proxy p50 {proxied.p50:7.2f} p99 {proxied.pct(0.99):7.2f} | "
        f"added p50 {proxied.p50 - direct.p50:+7.2f} p99 {proxied.pct(0.99) - direct.pct(0.99):+7.2f} ms | "
        f"errors {len(direct.errors)}/{len(proxied.errors)}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=200)
    args = ap.parse_args()
    fake_port, proxy_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{fake_port}"
    proxy = f"http://127.0.0.1:{proxy_port}"
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "LIGHTMEM2_HOME": home, "PYTHONPATH": str(ROOT)}
        fake_script = str(ROOT / "tests" / "server" / "fake_upstream.py")
        procs = [
            subprocess.Popen([sys.executable, fake_script, str(fake_port)], env=env),
            subprocess.Popen([sys.executable, "-c", PROXY, upstream + "/v1", str(proxy_port)], env=env),
        ]
        try:
            wait_up(upstream + "/v1/models")
            wait_up(proxy + "/healthz")
            path = "/v1/chat/completions"
            asyncio.run(run_batch(proxy + path, 20, 4))  # warm both paths (pools, first-call imports)
            asyncio.run(run_batch(upstream + path, 20, 4))
            seq_d = asyncio.run(run_batch(upstream + path, args.n, 1))
            seq_p = asyncio.run(run_batch(proxy + path, args.n, 1))
            con_d = asyncio.run(run_batch(upstream + path, args.n, args.concurrency))
            con_p = asyncio.run(run_batch(proxy + path, args.n, args.concurrency))
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
    print(
        f"TTFB over loopback, {args.n} streamed Chat Completions calls each "
        "(fake provider and proxy in own processes)"
    )
    print(line("sequential (1 at once)", seq_d, seq_p))
    print(line(f"concurrent ({args.concurrency})", con_d, con_p))
    errors = seq_d.errors + seq_p.errors + con_d.errors + con_p.errors
    for err in errors[:5]:
        print("error:", err)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
