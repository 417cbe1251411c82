"""Run the same Python snippet in fresh interpreters with different ``PYTHONHASHSEED`` values.

Calling a function twice in one process cannot catch output that depends on set/dict order of str
keys (hash randomisation), on ids, or on process-wide memo state: all of those are the same on the
second call. Processes with different hash seeds can. The snippet writes its result to stdout as
bytes; the caller compares them.

Three seeds, not two: with a fixed pair of seeds a two-element set of str keeps its iteration order in
both about half the time, so a pair misses half of such bugs; three distinct seeds miss a quarter, and
sets of more elements almost never keep their order (see tests/test_crossproc.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SEEDS = ("0", "1", "2")


def outputs(
    code: str, *, stdin: bytes = b"", paths: tuple[Path, ...] = (), home: Path | None = None
) -> list[bytes]:
    """stdout of ``code`` run once per seed in :data:`SEEDS`; ``paths`` go on PYTHONPATH (after tests/)."""
    out: list[bytes] = []
    for seed in SEEDS:
        env = dict(os.environ)
        env["PYTHONHASHSEED"] = seed
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (TESTS, *paths))
        if home is not None:
            env["LIGHTMEM2_HOME"] = str(home)
        proc = subprocess.run(
            [sys.executable, "-c", code], input=stdin, capture_output=True, env=env, timeout=120, check=False
        )
        assert proc.returncode == 0, (
            f"seed {seed}: exit {proc.returncode}\n{proc.stderr.decode(errors='replace')}"
        )
        out.append(proc.stdout)
    return out
