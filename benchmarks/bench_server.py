"""The ``lightmem2 serve`` proxy under load, against the fake provider on loopback, with its targets.

Runs the fake provider (``tests/server/fake_upstream.py``) and the proxy each in its own process, then
sends streamed Chat Completions calls straight to the fake and through the proxy, in one run so the
figures are ratios on the same machine:

- one client, one call at a time: the time to first byte the proxy adds (target: p50 <= 5 ms);
- ``--clients`` concurrent clients (default 100): throughput and p99 time to first byte through the
  proxy against direct (targets: >= 50% of direct throughput, p99 <= 3x direct);
- ``--soak`` calls (default 20,000) through the proxy while its resident memory is sampled every
  1,000 calls (target: flat, the last sample within 10% of the one after the first quarter).

Writes ``benchmarks/results/server.json`` and the README's load table; exits 1 on an error, and with
``--check`` also when a target is missed. Everything stops by itself (by PID); nothing leaves loopback.

    .venv/bin/python benchmarks/bench_server.py [--clients 100] [--soak 20000] [--check]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "server"))
sys.path.insert(0, str(HERE))
from load_client import Batch, run_batch  # noqa: E402
from readme_table import update_readme_server  # noqa: E402

PROXY = (
    "import sys\n"
    "from lightmem_plugin.config import Config\n"
    "from lightmem_plugin.server import serve\n"
    "c = Config()\n"
    "c.server.upstreams.openai = sys.argv[1]\n"
    "serve(c, port=int(sys.argv[2]))\n"
)
PATH = "/v1/chat/completions"
TARGETS = {
    "added_p50_ms": ("<=", 5.0),
    "throughput_ratio": (">=", 0.5),
    "p99_ratio": ("<=", 3.0),
    "rss_growth": ("<=", 0.10),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_up(url: str, deadline_s: float = 20.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Wait for ``url`` to answer; stop early when ``proc`` (the server behind it) exited."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"bench: {url} exited with {proc.returncode} before it came up")
        try:
            httpx.get(url, timeout=1.0, trust_env=False)
            return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise SystemExit(f"bench: {url} did not come up in {deadline_s:.0f}s")


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MB (``VmRSS`` in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"bench: no VmRSS for pid {pid}")


def timed(run: Callable[[], Batch]) -> tuple[Batch, float]:
    """A batch and its wall time in seconds."""
    start = time.perf_counter()
    batch = run()
    return batch, time.perf_counter() - start


def figures(args: argparse.Namespace, upstream: str, proxy: str, proxy_pid: int) -> dict[str, Any]:
    """Every measured figure (the proxy process is ``proxy_pid``)."""
    asyncio.run(run_batch(proxy + PATH, 40, 4))  # warm both paths (pools, first-call imports)
    asyncio.run(run_batch(upstream + PATH, 40, 4))
    seq_d = asyncio.run(run_batch(upstream + PATH, args.single, 1))
    seq_p = asyncio.run(run_batch(proxy + PATH, args.single, 1))
    con_d, wall_d = timed(lambda: asyncio.run(run_batch(upstream + PATH, args.load, args.clients)))
    con_p, wall_p = timed(lambda: asyncio.run(run_batch(proxy + PATH, args.load, args.clients)))
    samples: list[float] = [rss_mb(proxy_pid)]
    soak_errors: list[str] = []
    step = 1000
    for _ in range(0, args.soak, step):
        soak = asyncio.run(run_batch(proxy + PATH, step, 20))
        soak_errors += soak.errors
        samples.append(rss_mb(proxy_pid))
    quarter = samples[max(1, len(samples) // 4)]
    errors = seq_d.errors + seq_p.errors + con_d.errors + con_p.errors + soak_errors
    rps_d, rps_p = args.load / wall_d, args.load / wall_p
    return {
        "single": {
            "calls": args.single,
            "direct_p50_ms": round(seq_d.p50, 2),
            "proxy_p50_ms": round(seq_p.p50, 2),
            "added_p50_ms": round(seq_p.p50 - seq_d.p50, 2),
        },
        "load": {
            "calls": args.load,
            "clients": args.clients,
            "direct_rps": round(rps_d, 1),
            "proxy_rps": round(rps_p, 1),
            "throughput_ratio": round(rps_p / rps_d, 3),
            "direct_p99_ms": round(con_d.pct(0.99), 1),
            "proxy_p99_ms": round(con_p.pct(0.99), 1),
            "p99_ratio": round(con_p.pct(0.99) / con_d.pct(0.99), 2),
        },
        "soak": {
            "calls": args.soak,
            "rss_mb": [round(s, 1) for s in samples],
            "rss_growth": round(samples[-1] / quarter - 1, 3),
        },
        "errors": len(errors),
        "errors_by_phase": {
            "single_direct": len(seq_d.errors),
            "single_proxy": len(seq_p.errors),
            "load_direct": len(con_d.errors),
            "load_proxy": len(con_p.errors),
            "soak_proxy": len(soak_errors),
        },
        "first_errors": errors[:5],
        "cpus": os.cpu_count(),
    }


def verdicts(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target: the measured value, the bound and whether it holds."""
    flat = {**result["single"], **result["load"], **result["soak"]}
    out = {}
    for name, (op, bound) in TARGETS.items():
        value = flat[name]
        out[name] = {
            "value": value,
            "target": f"{op} {bound}",
            "met": value <= bound if op == "<=" else value >= bound,
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--single", type=int, default=300, help="sequential calls per path")
    ap.add_argument("--load", type=int, default=3000, help="calls per path under load")
    ap.add_argument("--clients", type=int, default=100, help="concurrent streaming clients")
    ap.add_argument("--soak", type=int, default=20_000, help="calls through the proxy while RSS is sampled")
    ap.add_argument("--out", default=str(HERE / "results" / "server.json"))
    ap.add_argument("--readme", default=str(ROOT / "README.md"), help="'' to leave the README alone")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
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
            result = figures(args, upstream, proxy, procs[1].pid)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
    result["targets"] = verdicts(result)
    Path(args.out).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if args.readme:
        update_readme_server(Path(args.readme), result)
    for name, v in result["targets"].items():
        print(f"{name:<18} {v['value']!s:>8}  target {v['target']:<8} {'met' if v['met'] else 'MISSED'}")
    print(json.dumps({k: result[k] for k in ("single", "load")}, indent=1))
    print("soak RSS MB:", result["soak"]["rss_mb"])
    for err in result["first_errors"]:
        print("error:", err)
    missed = [n for n, v in result["targets"].items() if not v["met"]]
    return 1 if result["errors"] or (args.check and missed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
