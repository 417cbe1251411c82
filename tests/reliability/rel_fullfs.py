"""Run sessions against a registry and ledger on a tiny tmpfs that fills up, then turns read-only.

    unshare -m sh -c 'mount -t tmpfs -o size=256k tmpfs DIR && python rel_fullfs.py DIR LEDGER'

(run by ``test_rel_diskfull.py`` in a private mount namespace, so the mount vanishes with the process).
Phase ``full``: build logs of ~30 KB each until the 256 KB filesystem is full (ENOSPC). Then the mount is
remounted read-only (EROFS) and phase ``readonly`` sends more. One JSON line per tool output: phase,
whether the model got the original or a stub that recovers it, and the session's error counts; then
a summary with leftover temp files and doctor's registry line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rel_convo import head, tool_output, turn

from lightmem_plugin.commands.doctor import check_registry
from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys
from lightmem_plugin.store.ledger import Ledger


def main() -> None:
    mnt, ledger = Path(sys.argv[1]), Path(sys.argv[2])  # the ledger lives off the tmpfs: an open
    cfg = Config()
    cfg.registry.dir = str(mnt / "artifacts")
    lm = LightMem(cfg, ledger=Ledger(ledger))  # database would keep the remount read-only from happening
    s = lm.session("fullfs")
    msgs = head("fullfs")
    n = 0
    for phase, count in (("full", 14), ("readonly", 4)):
        if phase == "readonly":
            subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        for _ in range(count):
            original = tool_output("fullfs", n, lines=500)
            msgs = msgs + turn("fullfs", n, original)
            out = s.before_model_call(msgs)
            sent = out[-1]["content"]
            keys = stub_keys(sent)
            if sent == original:
                kept = "original"
            elif keys and all(lm.registry.recover(k) == original for k in set(keys)):
                kept = "archived"
            else:
                kept = "LOST"
            print(json.dumps({"phase": phase, "kept": kept, "errors": dict(s.fail.errors)}), flush=True)
            n += 1
    temps = [p.name for p in (mnt / "artifacts").rglob(".tmp-*")]
    doctor = check_registry(cfg)
    last = s.fail.last.error if s.fail.last else ""
    print(
        json.dumps({"summary": True, "temps": temps, "doctor": [doctor.status, doctor.detail], "last": last})
    )


if __name__ == "__main__":
    main()
