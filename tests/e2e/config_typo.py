"""What the two "typo in config.json" end-to-end tests share (Claude Code's and Codex's): the typo
itself, the facts the hosts must keep to, reading the proxy's ledger, waiting on the proxy, and the
``lightmem2`` CLI on a PATH of the test's own."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from lightmem_plugin.store.ledger import Ledger

REPLY = "Still here, on the last good config."
PROMPT = "Are you still there?"
BAD_KEY = 'mode = "turbo"'
IN_FORCE = "config in force: last good (mode normal, valid as of "
DEFAULT_PORT = 8787


def write_typo(lm_home: Path) -> None:
    """``"mode": "turbo"`` into the valid config.json, the rest as it was."""
    path = lm_home / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["mode"] = "turbo"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")


def ledger_rows() -> list[tuple[str, str]]:
    """(session, mode) of every call the proxy recorded, oldest first."""
    ledger = Ledger.default()
    try:
        return [(c.session_id, c.mode) for c in ledger.recent_calls(10_000)]
    finally:
        ledger.close()


def wait_until(check: Callable[[], bool], want: bool, seconds: float = 10.0) -> bool:
    """``check()`` once it equals ``want`` or the time is up (polled every 0.1 s)."""
    deadline = time.monotonic() + seconds
    while check() is not want and time.monotonic() < deadline:
        time.sleep(0.1)
    return check()


def lightmem2_on_path(bin_dir: Path) -> Path:
    """``bin_dir`` holding this install's ``lightmem2`` CLI (the one the hooks run): a user who
    installed lightmem2 has it on PATH (Claude Code's ``/lightmem2`` command file runs it)."""
    exe = Path(sys.executable).with_name("lightmem2")
    assert exe.exists(), f"no lightmem2 console script beside {sys.executable}"
    bin_dir.mkdir()
    (bin_dir / "lightmem2").symlink_to(exe)
    return bin_dir / "lightmem2"
