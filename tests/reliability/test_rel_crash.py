"""Crash safety: writer processes SIGKILLed at random points lose nothing they acknowledged.

Four writer processes (``rel_writer.py``) store payloads concurrently into one registry (and, in the
second test, rows into one ledger) and log an acknowledgement after each store returns. The test kills
them with SIGKILL after seeded random delays, restarts them, and repeats until 1,000+ writes were
acknowledged. Meanwhile a reader polls keys that are being written: it may see "not found" but never
bytes that differ from the payload (no partial artifact is ever served). At the end every acknowledged
artifact must read back hash-verified and equal to its payload, and every acknowledged ledger row must
be present and equal to what was written. ``LIGHTMEM2_SOAK=1`` runs 20x more writes.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rel_writer import payload, record

from lightmem_plugin.errors import ArtifactCorrupt, ArtifactNotFound
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.store.registry import KEY_RE, Registry, content_key

WRITER = Path(__file__).with_name("rel_writer.py")
WRITERS = 4
SOAK = os.environ.get("LIGHTMEM2_SOAK") == "1"
TARGET_WRITES = 20_000 if SOAK else 1_200
MAX_ROUNDS = 400 if SOAK else 60
MIN_ROUNDS = 6


@dataclass
class CrashRun:
    """What one crash campaign did."""

    acks: dict[tuple[int, int], str] = field(default_factory=dict)
    killed: int = 0
    rounds: int = 0


def _read_acks(path: Path) -> dict[tuple[int, int], str]:
    acks: dict[tuple[int, int], str] = {}
    if not path.exists():
        return acks
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:  # a line cut by the kill is not an acknowledgement
            acks[(int(parts[0]), int(parts[1]))] = parts[2]
    return acks


def _campaign(kind: str, target: Path, acks_file: Path, seed: int, max_delay: float = 0.35) -> CrashRun:
    """Start, randomly kill and restart the writers until TARGET_WRITES writes were acknowledged."""
    rnd = random.Random(seed)
    run = CrashRun()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    while (len(run.acks) < TARGET_WRITES or run.rounds < MIN_ROUNDS) and run.rounds < MAX_ROUNDS:
        run.rounds += 1
        procs = []
        for w in range(WRITERS):
            first = max((s for (ww, s) in run.acks if ww == w), default=-1) + 1
            cmd = [sys.executable, str(WRITER), kind, str(target), str(acks_file), str(w), str(first)]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env))
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            assert line.strip() == b"ready", p.stderr.read() if p.stderr else b""
        deadlines = sorted((rnd.uniform(0.02, max_delay), i) for i in range(WRITERS))
        start = time.monotonic()
        for at, i in deadlines:
            time.sleep(max(0.0, start + at - time.monotonic()))
            if procs[i].poll() is None:
                procs[i].send_signal(signal.SIGKILL)
        for p in procs:
            p.wait(timeout=30)
            assert p.returncode == -signal.SIGKILL, p.stderr.read() if p.stderr else b""
            run.killed += 1
            for stream in (p.stdout, p.stderr):
                if stream is not None:
                    stream.close()
        run.acks = _read_acks(acks_file)
    return run


def _poll_in_flight(
    reg: Registry, acks_file: Path, stop: threading.Event, seen: list[str], polls: list[int]
) -> None:
    """Read the next key of each writer while it is being written: absent or exact, never wrong."""
    while not stop.is_set():
        acked = _read_acks(acks_file)
        for w in range(WRITERS):
            nxt = max((s for (ww, s) in acked if ww == w), default=-1) + 1
            want = payload(w, nxt)  # holds no credential, so redaction leaves it as it is
            try:
                got = reg.get(content_key(want))
            except ArtifactNotFound:
                continue
            except Exception as err:  # pragma: no cover - the failure this test exists to catch
                seen.append(f"writer {w} seq {nxt}: {type(err).__name__}: {err}")
                continue
            polls[0] += 1
            if got != want:
                seen.append(f"writer {w} seq {nxt}: wrong bytes served")
        time.sleep(0.005)


@pytest.mark.slow
def test_registry_survives_sigkill_of_concurrent_writers(tmp_path: Path) -> None:
    root, acks_file = tmp_path / "artifacts", tmp_path / "acks.log"
    reg = Registry(root)
    stop, problems, polls = threading.Event(), list[str](), [0]
    reader = threading.Thread(
        target=_poll_in_flight, args=(reg, acks_file, stop, problems, polls), daemon=True
    )
    reader.start()
    try:
        run = _campaign("registry", root, acks_file, seed=1234)
    finally:
        stop.set()
        reader.join(timeout=10)
    assert problems == []
    assert len(run.acks) >= TARGET_WRITES, f"only {len(run.acks)} writes acknowledged in {run.rounds} rounds"
    assert run.killed >= 8
    for (w, seq), key in sorted(run.acks.items()):
        data = payload(w, seq)
        assert key == content_key(data) and reg.get(key) == data, f"writer {w} seq {seq}"
    served = [p for p in root.glob("??/*") if KEY_RE.match(p.name)]
    corrupt = [p.name for p in served if content_key(p.read_bytes()) != p.name]
    assert corrupt == []
    leftovers = list(root.glob("??/.tmp-*"))
    print(
        f"\nregistry crash: {len(run.acks)} acknowledged writes survived, {len(served)} artifacts on disk, "
        f"{run.killed} writers SIGKILLed over {run.rounds} rounds, {len(leftovers)} orphan temp files, "
        f"{polls[0]} in-flight artifacts read back exact while being written"
    )


@pytest.mark.slow
def test_ledger_survives_sigkill_of_concurrent_writers(tmp_path: Path) -> None:
    path, acks_file = tmp_path / "ledger.sqlite3", tmp_path / "acks.log"
    run = _campaign("ledger", path, acks_file, seed=99, max_delay=0.1)
    assert len(run.acks) >= TARGET_WRITES, f"only {len(run.acks)} rows acknowledged in {run.rounds} rounds"
    with Ledger(path) as ledger:
        stored = {
            (c.session_id, c.call_index): c for w in range(WRITERS) for c in ledger.calls(f"crash-w{w}")
        }
    for w, seq in sorted(run.acks):
        assert stored.get((f"crash-w{w}", seq)) == record(w, seq), f"writer {w} call {seq}"
    for (sid, seq), rec in stored.items():  # rows committed but not yet acknowledged are intact too
        assert rec == record(int(sid.removeprefix("crash-w")), seq)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    print(
        f"\nledger crash: {len(run.acks)} acknowledged rows survived ({len(stored)} on disk), "
        f"{run.killed} writers SIGKILLed over {run.rounds} rounds"
    )


def test_put_repairs_a_truncated_artifact(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "r")
    data = b"original tool output\n" * 100
    key = reg.put(data)
    path = reg.path_of(key)
    path.write_bytes(data[:37])  # what a crash can leave when the data was never fsynced
    assert reg.put(data) == key
    assert reg.get(key) == data


def test_partial_file_is_refused_not_served(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "r")
    data = b"line\n" * 1000
    key = reg.put(data)
    reg.path_of(key).write_bytes(data[:100])
    with pytest.raises(ArtifactCorrupt, match=key):
        reg.get(key)
