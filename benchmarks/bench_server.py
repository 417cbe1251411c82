"""The ``lightmem2 serve`` proxy under host-like load, against a fake provider on loopback, with its targets.

What a call looks like (``host_load.py``): a Claude Code, Codex or OpenClaw session growing call by
call up to ``--turns`` (default 30) tool exchanges, each adding an assistant tool call and its output
(short outputs, file views, test runs, build logs, search results: several KB each, what lightmem2
reduces), spelled as that host sends it and streamed; the fake provider answers each call after
``--delay-ms`` (default 250). For each API (Anthropic Messages, Responses, Chat Completions), the same
load runs straight to the fake and through the proxy, in one run, so the figures are ratios on the
same machine:

- one client, one call at a time: the time to first byte the proxy adds (target: p50 <= 5 ms);
- ``--clients`` concurrent clients (default 100): throughput and p99 time to first byte through the
  proxy against direct (targets: >= 50% of direct throughput, p99 <= 3x direct);
- the proxy's CPU seconds per call (user + system time of its process, from /proc, over each run);
- ``--soak`` calls (default 12,000; the three hosts at once, the fake answering at once) through the
  proxy while its resident memory is sampled every 1,000 calls (target: flat, the last sample within
  10% of the one taken once the proxy holds ``server.maxSessions`` sessions, its whole working set).

Processes: the fake, the proxy (``lightmem2 serve`` as a user runs it: its config file, ledger,
session store and archive in a temporary ``LIGHTMEM2_HOME``) and the load driver each run in their
own process, the driver started anew for each run. On a 2-core machine the three still share the
cores; the driver and the fake are kept cheap (bodies are joined from pre-serialized messages, the
fake parses no JSON) and their own CPU per call is written next to the proxy's, so what the proxy
competes with is on record.

Writes ``benchmarks/results/server.json`` and the load table of docs/BENCHMARKS.md; exits 1 on an
error, and with ``--check`` also when a target is missed. Everything stops by itself (by PID); nothing leaves loopback.

    .venv/bin/python benchmarks/bench_server.py [--clients 100] [--soak 20000] [--apis chat] [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from host_load import APIS, pct  # noqa: E402
from readme_table import BENCHMARKS, S_END, S_START, _update, publish  # noqa: E402

from lightmem_plugin.config import Config  # noqa: E402

TARGETS = {
    "added_p50_ms": ("<=", 5.0),
    "throughput_ratio": (">=", 0.5),
    "p99_ratio": ("<=", 3.0),
    "rss_growth": ("<=", 0.10),
}
MAX_SESSIONS = Config().server.maxSessions
"""Sessions serve keeps in memory (its default): the soak's memory reference is taken once it holds them."""
NOISY_CORES = 0.2
"""Other processes using more than this many cores during a run make its ratios noisy (said in the output)."""
HOST_OF = {
    "anthropic": "Claude Code (Anthropic)",
    "responses": "Codex (Responses)",
    "chat": "OpenClaw (Chat)",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_up(url: str, deadline_s: float = 30.0, proc: subprocess.Popen[bytes] | None = None) -> None:
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


class Bench:
    """The running fake and proxy, and one driver run at a time against either."""

    def __init__(
        self, args: argparse.Namespace, fake: str, proxy: str, fake_pid: int, proxy_pid: int
    ) -> None:
        self.args = args
        self.urls = {"direct": fake, "proxy": proxy}
        self.fake_pid, self.proxy_pid = fake_pid, proxy_pid

    def run(self, api: str, path: str, clients: int, calls: int, tag: str, *extra: str) -> dict[str, Any]:
        """One driver process: ``calls`` calls of ``api`` sessions to ``path`` (direct or proxy), with
        the CPU the fake and the proxy used meanwhile."""
        cmd = [
            sys.executable,
            str(HERE / "host_load.py"),
            "drive",
            api,
            self.urls[path],
            "--clients",
            str(clients),
            "--calls",
            str(calls),
            "--turns",
            str(self.args.turns),
            "--tag",
            tag,
            "--watch",
            str(self.fake_pid),
            "--watch",
            str(self.proxy_pid),
            *extra,
        ]
        done = subprocess.run(cmd, capture_output=True, check=False, timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"bench: driver failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
        run: dict[str, Any] = json.loads(done.stdout)
        watched = run["watched_cpu_s"]
        run["fake_cpu_s"], run["proxy_cpu_s"] = watched[str(self.fake_pid)], watched[str(self.proxy_pid)]
        # CPU the machine spent on anything but these three processes while the run's clock ran: another
        # job sharing the cores makes the ratios noisy, and this says how much there was
        run["others_cpu_s"] = max(
            0.0, run["machine_busy_s"] - run["fake_cpu_s"] - run["proxy_cpu_s"] - run["cpu_s"]
        )
        return run


def _ms(value: float, digits: int = 2) -> float:
    return round(value, digits)


def api_figures(bench: Bench, api: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Every figure of one API, and the errors of each of its runs."""
    args = bench.args
    for path in ("direct", "proxy"):  # warm both paths (pools, first-call imports)
        bench.run(api, path, 4, 40, f"warm-{api}-{path}")
    seq = {p: bench.run(api, p, 1, args.single, f"single-{api}-{p}") for p in ("direct", "proxy")}
    con = {p: bench.run(api, p, args.clients, args.load, f"load-{api}-{p}") for p in ("direct", "proxy")}
    sd, sp, cd, cp = seq["direct"], seq["proxy"], con["direct"], con["proxy"]
    ok_sp, ok_cp = max(1, len(sp["ttfb_ms"])), max(1, len(cp["ttfb_ms"]))
    rps_d, rps_p = len(cd["ttfb_ms"]) / cd["wall_s"], len(cp["ttfb_ms"]) / cp["wall_s"]
    d50, p50 = statistics.median(sd["ttfb_ms"]), statistics.median(sp["ttfb_ms"])
    d50_last, p50_last = statistics.median(sd["total_ms"]), statistics.median(sp["total_ms"])
    body_kb = cp["body_kb"] or [0.0]
    figures = {
        "single": {
            "calls": args.single,
            "direct_p50_ms": _ms(d50),
            "proxy_p50_ms": _ms(p50),
            "added_p50_ms": _ms(p50 - d50),
            "direct_p50_last_byte_ms": _ms(d50_last),
            "proxy_p50_last_byte_ms": _ms(p50_last),
            "added_p50_last_byte_ms": _ms(p50_last - d50_last),
            "proxy_cpu_ms_per_call": _ms(1000 * sp["proxy_cpu_s"] / ok_sp),
            "other_processes_cores": {p: _ms(seq[p]["others_cpu_s"] / seq[p]["wall_s"]) for p in seq},
        },
        "load": {
            "calls": args.load,
            "clients": args.clients,
            "direct_rps": round(rps_d, 1),
            "proxy_rps": round(rps_p, 1),
            "throughput_ratio": round(rps_p / rps_d, 3),
            "direct_p50_ms": _ms(statistics.median(cd["ttfb_ms"]), 1),
            "proxy_p50_ms": _ms(statistics.median(cp["ttfb_ms"]), 1),
            "p50_ratio": round(statistics.median(cp["ttfb_ms"]) / statistics.median(cd["ttfb_ms"]), 2),
            "direct_p99_ms": _ms(pct(cd["ttfb_ms"], 0.99), 1),
            "proxy_p99_ms": _ms(pct(cp["ttfb_ms"], 0.99), 1),
            "p99_ratio": round(pct(cp["ttfb_ms"], 0.99) / pct(cd["ttfb_ms"], 0.99), 2),
            "direct_p99_last_byte_ms": _ms(pct(cd["total_ms"], 0.99), 1),
            "proxy_p99_last_byte_ms": _ms(pct(cp["total_ms"], 0.99), 1),
            "proxy_cpu_ms_per_call": _ms(1000 * cp["proxy_cpu_s"] / ok_cp),
            "proxy_cpu_cores": _ms(cp["proxy_cpu_s"] / cp["wall_s"]),
            "driver_cpu_ms_per_call": {
                p: _ms(1000 * con[p]["cpu_s"] / max(1, len(con[p]["ttfb_ms"]))) for p in con
            },
            "fake_cpu_ms_per_call": {
                p: _ms(1000 * con[p]["fake_cpu_s"] / max(1, len(con[p]["ttfb_ms"]))) for p in con
            },
            "other_processes_cores": {p: _ms(con[p]["others_cpu_s"] / con[p]["wall_s"]) for p in con},
            "iowait_cores": {p: _ms(con[p]["machine_iowait_s"] / con[p]["wall_s"]) for p in con},
            "body_kb_mean": round(statistics.fmean(body_kb), 1),
            "body_kb_max": round(max(body_kb), 1),
            "sessions": cp["sessions"],
        },
    }
    errors = {
        f"{api}_{kind}_{p}": runs[p]["errors"]
        for kind, runs in (("single", seq), ("load", con))
        for p in runs
    }
    return figures, errors


def soak(bench: Bench) -> tuple[dict[str, Any], list[str]]:
    """The three hosts at once through the proxy, the fake answering at once; RSS every 1,000 calls."""
    args = bench.args
    run = bench.run(
        "mixed", "proxy", args.soak_clients, args.soak, "soak", "--delay-ms", "0",
        "--rss-pid", str(bench.proxy_pid), "--rss-every", "1000",
    )  # fmt: skip
    samples = run["rss_mb"]
    # the reference: once the proxy holds its whole working set (server.maxSessions sessions, each
    # 1-3 MB of memos), so the figure shows a leak, not a bounded cache filling up. The soak creates
    # the sessions to fill it after (maxSessions - clients) x turns calls; they are all finished ones
    # (at their largest) after twice that (measured: RSS rose until then, and was flat after)
    fill_calls = 2 * (MAX_SESSIONS - args.soak_clients) * args.turns
    ref_at = min(len(samples) - 2, max(1, len(samples) // 4, -(-fill_calls // 1000)))  # a sample per 1,000
    quarter = samples[ref_at]
    ok = max(1, len(run["ttfb_ms"]))
    figures = {
        "calls": args.soak,
        "clients": args.soak_clients,
        "rss_mb": [round(s, 1) for s in samples],
        "rss_growth": round(samples[-1] / quarter - 1, 3),
        "rss_reference_call": ref_at * 1000,
        "proxy_cpu_ms_per_call": _ms(1000 * run["proxy_cpu_s"] / ok),
        "proxy_rps": round(len(run["ttfb_ms"]) / run["wall_s"], 1),
    }
    return figures, run["errors"]


def figures(args: argparse.Namespace, bench: Bench) -> dict[str, Any]:
    """Every measured figure."""
    result: dict[str, Any] = {"apis": {}, "errors_by_phase": {}}
    errors: list[str] = []
    for api in args.apis:
        result["apis"][api], errs = api_figures(bench, api)
        for phase, found in errs.items():
            result["errors_by_phase"][phase] = len(found)
            errors += found
        print(f"bench: {api} done {json.dumps(result['apis'][api]['load'])}", file=sys.stderr)
    if args.soak:
        result["soak"], soak_errors = soak(bench)
        result["errors_by_phase"]["soak_proxy"] = len(soak_errors)
        errors += soak_errors
    result["errors"] = len(errors)
    result["first_errors"] = errors[:5]
    result["other_processes_cores_max"] = max(
        v
        for r in result["apis"].values()
        for part in (r["single"], r["load"])
        for v in part["other_processes_cores"].values()
    )
    result["cpus"] = os.cpu_count()
    result["workload"] = {
        "turns": args.turns,
        "delay_ms": args.delay_ms,
        "mode": "normal (the default)",
        "bodies": "host_load.py: Claude Code, Codex, OpenClaw sessions; outputs of several KB",
    }
    return result


def verdicts(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target: its worst value over the APIs (and which API), the bound and whether every API meets it."""
    out: dict[str, dict[str, Any]] = {}
    for name, (op, bound) in TARGETS.items():
        if name == "rss_growth":
            if "soak" not in result:
                continue
            by_api = {"all": result["soak"][name]}
        else:
            by_api = {api: {**r["single"], **r["load"]}[name] for api, r in result["apis"].items()}
        worst_api = (max if op == "<=" else min)(by_api, key=lambda a: by_api[a])
        value = by_api[worst_api]
        out[name] = {
            "value": value,
            "api": worst_api,
            "by_api": by_api,
            "target": f"{op} {bound}",
            "met": all((v <= bound if op == "<=" else v >= bound) for v in by_api.values()),
        }
    return out


def render(result: dict[str, Any]) -> str:
    """The proxy-load table (docs/BENCHMARKS.md): per API, each target, what was measured and whether it holds."""
    apis = _in_order(result["apis"])  # the results file has its keys sorted: the table has its own order
    t = result["targets"]

    def cells(fmt: Any) -> str:
        return " | ".join(fmt(result["apis"][a]["single"], result["apis"][a]["load"]) for a in apis)

    def mark(name: str) -> str:
        v = t[name]
        if v["met"]:
            return "met"
        op, bound = TARGETS[name]
        by_api = v["by_api"]
        missed = [
            a for a in _in_order(by_api) if not (by_api[a] <= bound if op == "<=" else by_api[a] >= bound)
        ]
        return f"**missed** ({', '.join(missed)})"

    load0 = result["apis"][apis[0]]["load"]
    rows = [
        (
            "time to first byte added, 1 client (p50)",
            cells(
                lambda s, _: (
                    f"{s['added_p50_ms']:+.2f} ms ({s['direct_p50_ms']:.1f} direct, "
                    f"{s['proxy_p50_ms']:.1f} proxied, {s['calls']} calls)"
                )
            ),
            "added_p50_ms",
        ),
        (
            f"throughput, {load0['clients']} streaming clients",
            cells(
                lambda _, x: (
                    f"{x['throughput_ratio']:.0%} of direct ({x['proxy_rps']:,.0f} vs "
                    f"{x['direct_rps']:,.0f} calls/s, {x['calls']:,} calls)"
                )
            ),
            "throughput_ratio",
        ),
        (
            f"p99 time to first byte, {load0['clients']} clients",
            cells(
                lambda _, x: (
                    f"{x['p99_ratio']:.2f}x direct ({x['proxy_p99_ms']:,.0f} vs {x['direct_p99_ms']:,.0f} ms)"
                )
            ),
            "p99_ratio",
        ),
    ]
    out = [
        S_START,
        "",
        f"**The proxy under host-like load** (`benchmarks/bench_server.py`: sessions growing to "
        f"{result['workload']['turns']} tool calls, streamed, request bodies {load0['body_kb_mean']:.0f} KB on "
        f"average; a fake provider answering in {result['workload']['delay_ms']:.0f} ms; fake, proxy and load "
        f"driver each in its own process on loopback, {result['cpus']} CPUs{_noise(result)}; {_failed(result)})",
        "",
        "| what | " + " | ".join(HOST_OF.get(a, a) for a in apis) + " | target | |",
        "|---|" + "---|" * len(apis) + "---|---|",
    ]
    out += [f"| {what} | {measured} | {t[name]['target']} | {mark(name)} |" for what, measured, name in rows]
    out.append(
        f"| proxy CPU per call, {load0['clients']} clients | "
        + cells(lambda s, x: f"{x['proxy_cpu_ms_per_call']:.1f} ms ({x['proxy_cpu_cores']:.2f} cores busy)")
        + " | | |"
    )
    if "soak" in result:
        soak = result["soak"]
        out.append(
            f"| resident memory over {soak['calls']:,} calls, the three hosts at once | "
            f"{soak['rss_growth']:+.1%} after call {soak.get('rss_reference_call', 0):,}, once "
            f"{MAX_SESSIONS} sessions are held ({soak['rss_mb'][0]:.0f} -> "
            f"{soak['rss_mb'][-1]:.0f} MB) |" + " |" * (len(apis) - 1) + f" {t['rss_growth']['target']} "
            f"| {mark('rss_growth')} |"
        )
    out += ["", S_END]
    return "\n".join(out)


def _in_order(by_api: dict[str, Any]) -> list[str]:
    """The APIs of ``by_api`` in the benchmark's order (Anthropic, Responses, Chat), any other after."""
    return [a for a in APIS if a in by_api] + sorted(a for a in by_api if a not in APIS)


def _noise(result: dict[str, Any]) -> str:
    """Said when other processes took a share of the CPUs during a run."""
    busy = result.get("other_processes_cores_max", 0.0)
    return f" (other processes used up to {busy:.1f} of them during a run)" if busy > NOISY_CORES else ""


def _failed(result: dict[str, Any]) -> str:
    """How many calls failed, and in which run (a failed call is a host request that broke)."""
    phases = {k: v for k, v in (result.get("errors_by_phase") or {}).items() if v}
    where = ", ".join(f"{n} in {k.replace('_', ' ')}" for k, n in sorted(phases.items()))
    return f"{result['errors']} failed calls" + (f": {where}" if where else "")


def update_readme(readme: Path, result: dict[str, Any]) -> None:
    """Replace the generated proxy-load block in ``readme`` (appending it if absent)."""
    _update(readme, S_START, S_END, render(result))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apis", type=lambda s: s.split(","), default=list(APIS), help="comma-separated subset")
    ap.add_argument("--single", type=int, default=60, help="sequential calls per path and API")
    ap.add_argument("--load", type=int, default=3000, help="calls per path and API under load")
    ap.add_argument("--clients", type=int, default=100, help="concurrent streaming clients")
    ap.add_argument("--turns", type=int, default=30, help="tool calls per session")
    ap.add_argument("--delay-ms", type=float, default=250.0, help="the fake provider's time to answer")
    ap.add_argument("--soak", type=int, default=12000, help="calls through the proxy while RSS is sampled")
    ap.add_argument("--soak-clients", type=int, default=20)
    ap.add_argument("--out", default=str(HERE / "results" / "server.json"))
    ap.add_argument(
        "--doc", "--readme", dest="readme", default=str(BENCHMARKS), help="the file to update; '' for none"
    )
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument(
        "--serve",
        default=f"{sys.executable} -m lightmem_plugin.cli",
        help="the command that runs lightmem2 ('serve --port N' is appended): to measure another build of "
        "the proxy the same way",
    )
    args = ap.parse_args()
    fake_port, proxy_port = free_port(), free_port()
    fake = f"http://127.0.0.1:{fake_port}"
    proxy = f"http://127.0.0.1:{proxy_port}"
    with tempfile.TemporaryDirectory() as home:
        config = {"server": {"upstreams": {"anthropic": fake, "openai": fake + "/v1"}}}
        (Path(home) / "config.json").write_text(json.dumps(config), encoding="utf-8")
        env = {**os.environ, "LIGHTMEM2_HOME": home, "PYTHONPATH": str(ROOT)}
        fake_cmd = [
            sys.executable,
            str(HERE / "host_load.py"),
            "fake",
            str(fake_port),
            "--delay-ms",
            str(args.delay_ms),
        ]
        procs = [
            subprocess.Popen(fake_cmd, env=env),
            subprocess.Popen([*shlex.split(args.serve), "serve", "--port", str(proxy_port)], env=env),
        ]
        try:
            wait_up(fake + "/v1/models", proc=procs[0])
            wait_up(proxy + "/healthz", proc=procs[1])
            result = figures(args, Bench(args, fake, proxy, procs[0].pid, procs[1].pid))
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
    result["targets"] = verdicts(result)
    publish(result, Path(args.out), args.readme, update_readme)
    for name, v in result["targets"].items():
        print(
            f"{name:<18} {v['value']!s:>8} ({v['api']})  target {v['target']:<8} {'met' if v['met'] else 'MISSED'}"
            f"  {v['by_api']}"
        )
    for api, r in result["apis"].items():
        print(api, json.dumps({"single": r["single"], "load": r["load"]}, indent=1))
    if "soak" in result:
        print("soak RSS MB:", result["soak"]["rss_mb"])
    for err in result["first_errors"]:
        print("error:", err)
    if result["other_processes_cores_max"] > NOISY_CORES:
        print(
            f"bench: other processes used up to {result['other_processes_cores_max']:.2f} cores during a run: "
            "the ratios are noisy, run again on an idle machine",
            file=sys.stderr,
        )
    missed = [n for n, v in result["targets"].items() if not v["met"]]
    return 1 if result["errors"] or (args.check and missed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
