"""Wall time of each host hook as the host runs it: a fresh process, the hook JSON on stdin.

Every hook is started the way Claude Code and Codex start it (``python -m lightmem_plugin.hooks HOST
EVENT``), so the figure includes interpreter start and imports. PostToolUse gets a 1 MB tool output
(a build log with varied lines); UserPromptSubmit answers ``/lightmem2 status``; SessionStart is timed
with the proxy already running (the common case: a probe) and cold (it starts ``lightmem2 serve`` and
waits for it). Target: each hook returns within 1 s on the 1 MB output. Nothing leaves loopback; the
started proxy is stopped by its PID; a temporary LIGHTMEM2_HOME is used.

    .venv/bin/python benchmarks/bench_hooks.py [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 1.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build_log(size: int) -> str:
    """About ``size`` chars of a realistic build log (varied numbers, a few warnings and errors)."""
    lines: list[str] = []
    total, i = 0, 0
    while total < size:
        kind = "ERROR" if i % 997 == 0 else "WARN " if i % 89 == 0 else "INFO "
        line = f"2026-11-30T06:{i // 60 % 60:02d}:{i % 60:02d} {kind} [worker-{i % 8}] compiled src/mod_{i % 431}.c -> build/obj_{i}.o in {i * 7 % 913} ms"
        lines.append(line)
        total += len(line) + 1
        i += 1
    return "\n".join(lines)[:size]


def payloads(output: str) -> dict[str, tuple[str, str, dict[str, Any]]]:
    base = {"session_id": "bench-session", "transcript_path": "/nonexistent/bench.jsonl", "cwd": str(ROOT)}
    bash = {"stdout": output, "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False}
    return {
        "claude-code PostToolUse (1 MB Bash)": (
            "claude-code",
            "PostToolUse",
            {
                **base,
                "hook_event_name": "PostToolUse",
                "tool_name": "Bash",
                "tool_use_id": "toolu_1",
                "tool_input": {"command": "make"},
                "tool_response": bash,
            },
        ),
        "codex PostToolUse (1 MB exec_command)": (
            "codex",
            "PostToolUse",
            {
                **base,
                "hook_event_name": "PostToolUse",
                "tool_name": "Bash",
                "tool_use_id": "call_1",
                "tool_input": {"command": "make"},
                "tool_response": output,
            },
        ),
        "claude-code UserPromptSubmit (/lightmem2 status)": (
            "claude-code",
            "UserPromptSubmit",
            {**base, "hook_event_name": "UserPromptSubmit", "prompt": "/lightmem2 status"},
        ),
        "codex UserPromptSubmit (plain prompt)": (
            "codex",
            "UserPromptSubmit",
            {**base, "hook_event_name": "UserPromptSubmit", "prompt": "fix the failing test"},
        ),
    }


def time_hook(host: str, event: str, payload: dict[str, Any], env: dict[str, str]) -> tuple[float, str]:
    data = json.dumps(payload).encode()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "lightmem_plugin.hooks", host, event],
        input=data,
        capture_output=True,
        env=env,
        timeout=60,
        cwd=ROOT,
    )
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr.decode()[-500:]
    return elapsed, done.stdout.decode()


def stop(pid_file: Path) -> None:
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    output = build_log(1_000_000)
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="lightmem2-bench-hooks-") as tmp:
        home = Path(tmp)
        (home / "config.json").write_text(json.dumps({"server": {"port": free_port()}}))
        env = {**os.environ, "LIGHTMEM2_HOME": str(home), "PYTHONPATH": str(ROOT)}
        for name, (host, event, payload) in payloads(output).items():
            times, out = [], ""
            for _ in range(args.repeat):
                elapsed, out = time_hook(host, event, payload, env)
                times.append(elapsed)
            rows[name] = {"median_s": statistics.median(times), "max_s": max(times), "answer_chars": len(out)}
        start = {"session_id": "bench-session", "transcript_path": str(home / "t.jsonl"), "source": "startup"}
        try:
            cold, _ = time_hook("claude-code", "SessionStart", start, env)
            warm = [time_hook("claude-code", "SessionStart", start, env)[0] for _ in range(args.repeat)]
        finally:
            stop(home / "serve.pid")
        rows["claude-code SessionStart (proxy running)"] = {
            "median_s": statistics.median(warm),
            "max_s": max(warm),
            "answer_chars": 0,
        }
        rows["claude-code SessionStart (starts the proxy)"] = {
            "median_s": cold,
            "max_s": cold,
            "answer_chars": 0,
        }
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"hook wall time, fresh process per call, {args.repeat} runs (target {TARGET_S:.1f} s on 1 MB):")
    for name, row in rows.items():
        flag = "" if row["max_s"] <= TARGET_S or "starts the proxy" in name else "  OVER TARGET"
        print(
            f"  {name:<48} median {row['median_s']:.3f} s  max {row['max_s']:.3f} s  answer {row['answer_chars']:,} chars{flag}"
        )


if __name__ == "__main__":
    main()
