"""A writer process for the crash tests: stores payloads until it is killed, logging each acknowledgement.

    python rel_writer.py registry ROOT ACKS WRITER FIRST_SEQ
    python rel_writer.py ledger   PATH ACKS WRITER FIRST_SEQ

After ``put`` (or ``record_call``) returns, the writer appends ``WRITER SEQ KEY`` to ACKS with one
``write`` on an O_APPEND descriptor, so a line in ACKS means "the store said it was done". It prints
``ready`` once its imports are done, then writes as fast as it can. Payloads are a pure function of
(writer, seq), so the parent can rebuild what every acknowledged write must read back as.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lightmem_plugin.store.ledger import CallRecord, Ledger
from lightmem_plugin.store.registry import Registry

SIZES = (64, 700, 4_000, 20_000)


def payload(writer: int, seq: int) -> bytes:
    """Deterministic text of a size between 64 B and ~1 MB (sometimes large, so kills land mid-write)."""
    rnd = random.Random(writer * 1_000_003 + seq)
    size = rnd.choice(SIZES) + rnd.randrange(64)
    roll = rnd.random()
    if roll < 0.05:
        size = 300_000 if roll > 0.01 else 1_000_000
    line = f"writer {writer} seq {seq} " + "".join(rnd.choice("abcdefghij \n") for _ in range(50))
    return (line * (size // len(line) + 1))[:size].encode()


def record(writer: int, seq: int) -> CallRecord:
    """The ledger row writer ``writer`` stores as call ``seq`` (every field depends on both)."""
    return CallRecord(
        session_id=f"crash-w{writer}",
        call_index=seq,
        mode="normal",
        input_tokens=1000 + seq,
        baseline_tokens=2000 + seq * 3,
        hit_tokens=seq * 7 % 997,
        miss_tokens=seq % 13,
        write_tokens=writer,
        real_input_tokens=seq * 11,
        real_cache_read=seq * 5,
        k=float(seq) / 4.0,
        k_baseline=float(seq) / 2.0,
        saved_by_pass={"truncate": seq, "json": writer},
        evicted_tokens=seq % 5,
        prefix_break_at=(seq % 3, seq) if seq % 4 == 0 else None,
        break_reason="message changed" if seq % 4 == 0 else None,
        errors={"reduction": 1} if seq % 9 == 0 else {},
        last_error="PassError: boom" if seq % 9 == 0 else None,
    )


def main() -> None:
    kind, target, acks, writer_s, first_s = sys.argv[1:6]
    writer, seq = int(writer_s), int(first_s)
    fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    if kind == "registry":
        reg = Registry(Path(target))

        def store(s: int) -> str:
            return reg.put(payload(writer, s))

    else:
        ledger = Ledger(Path(target))

        def store(s: int) -> str:
            ledger.record_call(record(writer, s))
            return "-"

    print("ready", flush=True)
    while True:
        key = store(seq)
        os.write(fd, f"{writer} {seq} {key}\n".encode())
        seq += 1


if __name__ == "__main__":
    main()
