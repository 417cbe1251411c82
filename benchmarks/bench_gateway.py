"""A team gateway under load: three ``lightmem2 serve`` processes on one PostgreSQL against one process.

Replays ``--sessions`` real recorded sessions (default 50: the shared swe traces when present, else the
bundled ones, each replayed as several sessions) concurrently, every session's calls in order, as
Chat Completions to the fake provider (``tests/server/fake_upstream.py``, in its own process, which
keeps a digest of every body it receives), four times with the same client:

- ``direct``: straight to the fake (the latency every other run is compared with);
- ``single``: through one ``serve`` process on the embedded store (the default);
- ``single_pg``: through one ``serve`` process on PostgreSQL (what the database costs by itself);
- ``fleet``: through ``--processes`` (3) ``serve`` processes, each with its own home, sharing only
  ``store.url``; each call goes to a process drawn at random (seeded per session, so the routing is the
  same on every run of the benchmark);
- ``fleet_kill``: the same, with process 1 SIGKILLed (by PID) halfway through; its calls in flight and
  those drawn for it later go to the next live process, as a load balancer retries.

Mode aggressive (eviction batches: the most state a session carries from call to call), ``--users``
gateway users (tokens, sessions and archives scoped per user). Every request the fake received in
``single_pg`` and ``fleet`` must be byte-equal to the one it received for the same call in ``single``.
Reported: throughput (calls/s over the whole replay) and p50/p99 latency per call, each against one
process (``single``); ``direct`` is context (on a small machine the fake itself saturates under 50
concurrent sessions, so what a proxy "adds" to it is not a meaningful difference of percentiles). PostgreSQL is a throwaway cluster (``tests/pg_cluster.py``,
as the tests use), stopped by PID; without ``initdb`` or psycopg the benchmark says so and exits 0.

Every artifact key a request named in a PostgreSQL run must come back byte-exact from the database.
Writes ``benchmarks/results/gateway.json`` and the gateway block of docs/BENCHMARKS.md; exits 1 when a
call failed, an artifact was lost or a request differed.

    .venv/bin/python benchmarks/bench_gateway.py [--sessions 50] [--calls 30] [--processes 3] [--seed 7]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "server"))
sys.path.insert(0, str(HERE))
from bench_server import free_port, wait_up  # noqa: E402
from readme_table import BENCHMARKS, update_readme_gateway  # noqa: E402

PATH = "/v1/chat/completions"
CALL_HEADER = "x-bench-call"
ARCHIVE_KEY = base64.b64encode(bytes(range(32))).decode()
UPSTREAM = (
    "import hashlib, sys\n"
    f"sys.path.insert(0, {str(ROOT / 'tests' / 'server')!r})\n"
    "import uvicorn\n"
    "from fake_upstream import FakeUpstream\n"
    "from starlette.responses import JSONResponse\n"
    "from starlette.routing import Route\n"
    "fake = FakeUpstream()\n"
    "from lightmem_plugin.reduction.base import STUB_RE\n"
    "async def digests(request):\n"
    "    out, keys = {}, set()\n"
    "    for r in fake.received:\n"
    f"        out.setdefault(r.headers.get({CALL_HEADER!r}, '?'), []).append(hashlib.sha256(r.raw).hexdigest())\n"
    "        keys.update(STUB_RE.findall(r.raw.decode('utf-8', 'replace')))\n"
    "    fake.received.clear(); fake.reported.clear()\n"
    "    return JSONResponse({'digests': out, 'keys': sorted(keys)})\n"
    "fake.app.router.routes.append(Route('/bench/digests', digests, methods=['POST']))\n"
    "uvicorn.run(fake.app, host='127.0.0.1', port=int(sys.argv[1]), log_level='warning', access_log=False, timeout_keep_alive=300)\n"
)
SERVE = "import sys\nfrom lightmem_plugin.server import serve\nserve(port=int(sys.argv[1]))\n"


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop each process by its PID (SIGTERM, then SIGKILL after 10 s)."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


@dataclass
class Session:
    name: str
    user: str
    prompts: list[Any]


def load_sessions(traces: Path, wanted: int, calls: int, users: int) -> tuple[list[Session], str, int]:
    """``wanted`` sessions of at most ``calls`` calls; where they come from; how many distinct traces."""
    from lightmem_plugin.measure.traces import load_trace

    swe = traces / "swe"
    files = sorted(swe.glob("*.json*")) if swe.is_dir() else []
    source = str(swe)
    if not files:
        files = sorted((ROOT / "tests" / "data").glob("*__*.json.gz"))
        source = "tests/data (bundled)"
    prompts = [p for p in ([c.prompt for c in load_trace(f).calls[:calls]] for f in files) if len(p) >= 2]
    if not prompts:
        raise SystemExit(f"bench: no usable trace under {source}")
    out = [Session(f"bench-{i:03d}", f"user{i % users}", prompts[i % len(prompts)]) for i in range(wanted)]
    return out, source, min(len(prompts), wanted)


@dataclass
class Run:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    served: dict[int, int] = field(default_factory=dict)
    wall_s: float = 0.0

    def pct(self, q: float) -> float:
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else 0.0

    def figures(self) -> dict[str, Any]:
        return {
            "calls": len(self.latencies),
            "wall_s": round(self.wall_s, 2),
            "rps": round(len(self.latencies) / self.wall_s, 1) if self.wall_s else 0.0,
            "p50_ms": round(self.pct(0.5), 1),
            "p99_ms": round(self.pct(0.99), 1),
            "errors": len(self.errors),
            "first_errors": self.errors[:3],
            "served_by": {str(k): v for k, v in sorted(self.served.items())},
        }


@dataclass
class Kill:
    """SIGKILL process ``index`` once ``after`` calls have been answered; calls then go to the others."""

    after: int
    index: int
    procs: list[subprocess.Popen[bytes]]
    done: bool = False
    retried: int = 0


async def replay(
    targets: list[str], sessions: list[Session], seed: int, tokens: dict[str, str], kill: Kill | None = None
) -> Run:
    """Every session concurrently, its calls in order, each call to a target drawn from a per-session
    seeded generator (the same routing on every run). With ``kill``, one target is killed by PID
    mid-run; a call that was in flight on it, or drawn for it afterwards, goes to the next live target
    (as a load balancer retries)."""
    run = Run()
    limits = httpx.Limits(max_connections=len(sessions) * 2, max_keepalive_connections=len(sessions))
    dead: set[int] = set()
    async with httpx.AsyncClient(timeout=600, limits=limits, trust_env=False) as client:

        async def one(s: Session) -> None:
            rng = random.Random(f"{seed}:{s.name}")
            for j, prompt in enumerate(s.prompts):
                n = rng.randrange(len(targets))
                body = json.dumps({"model": "fake-model", "messages": prompt}).encode()
                headers = {
                    "content-type": "application/json",
                    "authorization": "Bearer sk-bench-provider-key",
                    "x-lightmem2-session": s.name,
                    CALL_HEADER: f"{s.name}/{j}",
                    "x-lightmem2-token": tokens[s.user],
                }
                start = time.perf_counter()
                for attempt in range(len(targets)):
                    while n in dead:
                        n = (n + 1) % len(targets)
                    try:
                        r = await client.post(targets[n] + PATH, content=body, headers=headers)
                        await r.aread()
                        break
                    except httpx.HTTPError as err:
                        if kill is None or not kill.done or attempt == len(targets) - 1:
                            run.errors.append(f"{s.name}/{j}: {type(err).__name__}")
                            return
                        kill.retried += 1
                        dead.add(n)
                run.latencies.append(time.perf_counter() - start)
                run.served[n] = run.served.get(n, 0) + 1
                if r.status_code != 200:
                    run.errors.append(f"{s.name}/{j}: HTTP {r.status_code} {r.text[:200]}")
                    return
                if kill is not None and not kill.done and len(run.latencies) >= kill.after:
                    kill.done = True
                    os.kill(kill.procs[kill.index].pid, signal.SIGKILL)
                    dead.add(kill.index)

        start = time.perf_counter()
        await asyncio.gather(*(one(s) for s in sessions))
        run.wall_s = time.perf_counter() - start
    return run


def warm(targets: list[str], session: Session, tokens: dict[str, str]) -> None:
    """A few calls of a throwaway session on every target (first-call imports, pools, the tokenizer),
    not measured and not compared."""
    for n, target in enumerate(targets):
        for j, prompt in enumerate(session.prompts[:3]):
            r = httpx.post(
                target + PATH,
                json={"model": "fake-model", "messages": prompt},
                headers={"x-lightmem2-session": f"warm-{n}", "x-lightmem2-token": tokens[session.user]},
                timeout=120,
                trust_env=False,
            )
            if r.status_code != 200:
                raise SystemExit(
                    f"bench: warm-up call {j} to {target} failed: HTTP {r.status_code} {r.text[:200]}"
                )


def received(upstream: str) -> dict[str, Any]:
    """What the fake received since the last ask: ``digests`` by call, the stub ``keys`` named."""
    r = httpx.post(upstream + "/bench/digests", timeout=120, trust_env=False)
    r.raise_for_status()
    out: dict[str, Any] = r.json()
    return out


def unrecoverable(store_url: str, keys: list[str]) -> list[str]:
    """Keys the requests named that the shared registry cannot give back byte-exact."""
    from lightmem_plugin.config import Config
    from lightmem_plugin.errors import LightMemError
    from lightmem_plugin.store import open_stores
    from lightmem_plugin.store.registry import Registry, content_key
    from lightmem_plugin.store.sealing import Sealer

    stores = open_stores(Config.model_validate({"store": {"url": store_url}}))
    lost = []
    try:
        with tempfile.TemporaryDirectory() as unused:
            registry = stores.registry_like(
                Registry(Path(unused), sealer=Sealer(base64.b64decode(ARCHIVE_KEY)))
            )
            for key in keys:
                try:
                    if content_key(registry.get(key)) != registry.resolve(key):  # stubs: short names
                        lost.append(key)
                except LightMemError:
                    lost.append(key)
    finally:
        stores.close()
    return lost


def start_serves(
    root: Path, n: int, upstream: str, store_url: str | None, users: list[dict[str, str]]
) -> tuple[list[str], list[subprocess.Popen[bytes]]]:
    """``n`` serve processes, each with its own home (as on ``n`` machines), ready."""
    from lightmem_plugin.store.sealing import KEY_ENV

    urls, procs = [], []
    for i in range(n):
        home = root / f"home{i}"
        home.mkdir(parents=True)
        config: dict[str, Any] = {
            "mode": "aggressive",
            "eviction": {"expectedRemainingCalls": 200},
            "server": {"upstreams": {"openai": upstream + "/v1"}},
            "gateway": {"users": users},
        }
        if store_url:
            config["store"] = {"url": store_url}
        (home / "config.json").write_text(json.dumps(config))
        port = free_port()
        env = {**os.environ, "LIGHTMEM2_HOME": str(home), "PYTHONPATH": str(ROOT), KEY_ENV: ARCHIVE_KEY}
        procs.append(subprocess.Popen([sys.executable, "-c", SERVE, str(port)], env=env))
        urls.append(f"http://127.0.0.1:{port}")
    for url, proc in zip(urls, procs, strict=True):
        wait_up(url + "/healthz", 60.0, proc)
    return urls, procs


def compare(reference: dict[str, list[str]], other: dict[str, list[str]]) -> dict[str, Any]:
    """Calls whose request bytes (the last sent, for a call retried after a kill) differ from the
    reference run, or are missing; and calls the provider received twice (in flight on a killed
    process, then retried)."""
    calls = (reference.keys() | other.keys()) - {"?"}  # "?": the warm-up calls
    differ = sorted(k for k in calls if (reference.get(k) or [""])[-1:] != (other.get(k) or [""])[-1:])
    twice = sorted(k for k in calls if len(other.get(k) or []) > 1)
    return {"compared": len(calls), "differ": len(differ), "first_differ": differ[:5], "twice": len(twice)}


def derive(result: dict[str, Any]) -> None:
    """The figures computed from the measured ones: each proxied run against one process (and against
    the fake alone, which under this load is itself saturated, so its percentiles are context only)."""
    direct, single = result["runs"]["direct"], result["runs"]["single"]
    for name in [n for n in ("single", "single_pg", "fleet", "fleet_kill") if n in result["runs"]]:
        r = result["runs"][name]
        r["added_p50_ms"] = round(r["p50_ms"] - direct["p50_ms"], 1)
        r["added_p99_ms"] = round(r["p99_ms"] - direct["p99_ms"], 1)
        r["rps_vs_single"] = round(r["rps"] / single["rps"], 3)
        r["p50_vs_single_ms"] = round(r["p50_ms"] - single["p50_ms"], 1)
        r["p99_vs_single_ms"] = round(r["p99_ms"] - single["p99_ms"], 1)


def rerender(out: Path, readme: Path) -> int:
    """Derive and render again from a results file (no measuring): after a change to what is derived."""
    result = json.loads(out.read_text(encoding="utf-8"))
    derive(result)
    out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    update_readme_gateway(readme, result)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default=str(HERE.parent.parent / "shared" / "traces"))
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--calls", type=int, default=30, help="calls per session (the first N of its trace)")
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--users", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--kill-after",
        type=int,
        default=-1,
        help="a fifth run, the fleet with process 1 SIGKILLed after this many calls (default: half; 0: none)",
    )
    ap.add_argument("--out", default=str(HERE / "results" / "gateway.json"))
    ap.add_argument(
        "--doc", "--readme", dest="readme", default=str(BENCHMARKS), help="the file to update; '' for none"
    )
    ap.add_argument("--rerender", action="store_true", help="only derive and render from --out again")
    args = ap.parse_args()
    if args.rerender:
        return rerender(Path(args.out), Path(args.readme))
    sys.path.insert(0, str(ROOT))
    import pg_cluster

    bin_dir = pg_cluster.find_bin()
    try:
        import psycopg  # noqa: F401
    except ImportError:
        bin_dir = None
    if bin_dir is None:
        print("bench_gateway: skipped: needs PostgreSQL (initdb) and psycopg (pip install -e '.[team]')")
        return 0
    from lightmem_plugin.security import tenancy

    sessions, source, distinct = load_sessions(Path(args.traces), args.sessions, args.calls, args.users)
    if args.kill_after < 0:
        args.kill_after = sum(len(s.prompts) for s in sessions) // 2
    tokens = {f"user{i}": tenancy.new_token() for i in range(args.users)}
    users = [{"name": n, "tokenSha256": tenancy.digest(t)} for n, t in tokens.items()]
    result: dict[str, Any] = {
        "source": source,
        "traces": distinct,
        "sessions": len(sessions),
        "calls": sum(len(s.prompts) for s in sessions),
        "processes": args.processes,
        "users": args.users,
        "seed": args.seed,
        "cpus": os.cpu_count(),
        "runs": {},
    }
    cluster = pg_cluster.PgCluster(bin_dir).start()
    up_port = free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    fake = subprocess.Popen([sys.executable, "-c", UPSTREAM, str(up_port)], env={**os.environ})
    seen: dict[str, dict[str, list[str]]] = {}
    try:
        wait_up(upstream + "/v1/models", 60.0, fake)
        with tempfile.TemporaryDirectory(prefix="lightmem2-bench-gw-") as tmp:
            plan = [
                ("direct", 0, None),
                ("single", 1, None),
                ("single_pg", 1, "single_pg"),
                ("fleet", args.processes, "fleet"),
            ]
            if args.kill_after:
                plan.append(("fleet_kill", args.processes, "fleet_kill"))
            for name, n, db in plan:
                procs: list[subprocess.Popen[bytes]] = []
                url = cluster.create_db(f"bench_{db}") if db else None
                if n:
                    targets, procs = start_serves(Path(tmp) / name, n, upstream, url, users)
                else:
                    targets = [upstream]
                kill = Kill(args.kill_after, 1, procs) if name == "fleet_kill" else None
                try:
                    warm(targets, sessions[0], tokens)
                    print(f"bench_gateway: {name}: {result['calls']} calls over {len(targets)} target(s)")
                    run = asyncio.run(replay(targets, sessions, args.seed, tokens, kill))
                finally:
                    stop(procs)
                result["runs"][name] = run.figures()
                got = received(upstream)
                seen[name] = got["digests"]
                if url:
                    result["runs"][name]["stub_keys"] = len(got["keys"])
                    result["runs"][name]["keys_lost"] = len(unrecoverable(url, got["keys"]))
                if kill is not None:
                    result["runs"][name].update(killed_after=kill.after, retried=kill.retried)
    finally:
        stop([fake])
        cluster.stop()
    derive(result)
    result["byte_equal"] = {
        n: compare(seen["single"], seen[n]) for n in seen if n not in ("direct", "single")
    }
    errors = sum(r["errors"] + r.get("keys_lost", 0) for r in result["runs"].values())
    result["errors"] = errors
    Path(args.out).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if args.readme and not errors:
        update_readme_gateway(Path(args.readme), result)
    print(json.dumps({k: result[k] for k in ("runs", "byte_equal")}, indent=1))
    differ = sum(v["differ"] for v in result["byte_equal"].values())
    return 1 if errors or differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
