"""What every peer harness shares: its own venv built on demand, and a driver process spoken to in JSON lines.

A peer runs in its own virtual environment, so lightmem2 never depends on it. Its driver script runs
inside that environment (standard library, the peer and what the peer depends on) and talks to us over
its stdin/stdout: first a hello line (``version``, ``settings``, ``changes``), then one answer line per
request line. These pieces were TokenMizer's; the Headroom peer uses the same ones.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from lightmem_plugin.errors import LightMemError
from lightmem_plugin.measure.replay import SessionPolicy, replay_paths, summarize
from lightmem_plugin.measure.traces.base import Trace


class PeerError(LightMemError):
    """The peer could not be installed or started, or its proxy refused a replayed call."""


def ensure_venv(venv: Path, requirements: Sequence[str], timeout: float = 900) -> Path:
    """The peer environment's python, creating it (``python -m venv`` + pip) when absent or stale."""
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    want = " ".join(requirements)
    if python.exists() and marker.exists() and marker.read_text(encoding="utf-8") == want:
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a test and `make bench` may race to build it
        if python.exists() and marker.exists() and marker.read_text(encoding="utf-8") == want:
            return python
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements],
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


class DriverProcess:
    """A peer's driver script in its venv: the hello it printed, and one JSON line out per line in."""

    def __init__(self, name: str, python: Path, script: Path, args: Sequence[str] = ()) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        self.name = name
        self._log: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 closed in close()
        self._proc = subprocess.Popen(
            [str(python), "-I", str(script), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            encoding="utf-8",
            env=env,
        )
        self.hello = self.read()

    def read(self) -> dict[str, Any]:
        """The driver's next line; a PeerError with the tail of its log when it exited instead."""
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            self._log.seek(0)
            tail = " | ".join(self._log.read().strip().splitlines()[-3:])
            raise PeerError(
                f"the {self.name} driver exited ({self._proc.poll()}) before answering: {tail[:600]}"
            )
        reply: dict[str, Any] = json.loads(line)
        return reply

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one request line and read its answer."""
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        return self.read()

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


def pct(values: Sequence[float], q: int) -> float:
    """The ``q``-th percentile (inclusive method), 3 decimals; 0 for no values."""
    if len(values) < 2:
        return round(values[0], 3) if values else 0.0
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 3)


@contextlib.contextmanager
def subset(paths: Sequence[Path], prefix: str = "peer-subset-") -> Iterator[Path]:
    """A directory of links to ``paths``, so ``--limit`` runs every policy on the same sessions."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        for p in paths:
            (Path(tmp) / p.name).symlink_to(p.resolve())
        yield Path(tmp)


def peer_row(
    driver: Any,
    policy: Callable[[Trace], SessionPolicy],
    paths: Sequence[str | Path],
    package: str,
    variant: str,
    progress: bool = False,
    **notes: object,
) -> dict[str, Any]:
    """One benchmark row of a peer: ``summarize`` over the sessions replayed through ``policy`` (each
    wrapped in the task-statement probe), the probe's figures, and under ``peer`` what the driver
    reports (version, settings, changes, its own time per call) plus the peer's own ``notes``."""
    from peers.task_probe import TaskProbe

    probe = TaskProbe(policy)
    row = summarize(replay_paths(paths, probe, progress=progress))
    row.update(probe.figures())
    row["peer"] = {
        "package": f"{package} {driver.version}",
        "variant": variant,
        "settings": driver.settings,
        "changes": driver.changes,
        "proxy_ms_p50": pct(driver.proxy_ms, 50),
        "proxy_ms_p99": pct(driver.proxy_ms, 99),
        **notes,
    }
    return row
