"""Disk full and read-only registry: the original passes through, the error is counted and doctor says so.

Never drop content that cannot be archived: when the registry cannot store an output's original, the
model must get the original itself (fail-open), the session counts a ``reduction`` error, the ledger
row carries it, and ``doctor`` reports both the registry and the errors. Simulated here three ways: a
registry path that is a file, a registry whose ``put`` raises ENOSPC, and (where the machine allows
a private mount namespace) a real 256 KB tmpfs that fills up and is then remounted read-only.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rel_convo import head, tool_output, turn

from lightmem_plugin.commands import doctor
from lightmem_plugin.commands._hosts import Probe
from lightmem_plugin.config import Config
from lightmem_plugin.errors import RegistryError
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.store.registry import Registry

SCRIPT = Path(__file__).with_name("rel_fullfs.py")


def _offline_probe(home: Path) -> Probe:
    return Probe(
        which=lambda name: None,
        run=lambda cmd: (127, "not here"),
        get=lambda url, h: (None, "offline"),
        home=home,
    )


class FullDisk(Registry):
    """A registry on a full disk: every write fails the way the OS reports it."""

    def __init__(self, root: Path, exc: Exception) -> None:
        super().__init__(root)
        self.exc = exc
        self.attempts = 0

    def put(self, data: bytes) -> str:
        self.attempts += 1
        raise self.exc


def _session_outputs(lm: LightMem, n: int = 4) -> list[tuple[str, str]]:
    """(original, what the model got) for ``n`` build logs big enough to be reduced."""
    s = lm.session("disk")
    msgs = head("disk")
    pairs = []
    for i in range(n):
        original = tool_output("disk", i, lines=300)
        msgs = msgs + turn("disk", i, original)
        pairs.append((original, s.before_model_call(msgs)[-1]["content"]))
    return pairs


@pytest.mark.parametrize(
    "exc",
    [OSError(errno.ENOSPC, "No space left on device"), RegistryError("cannot write artifact: disk full")],
    ids=["ENOSPC", "RegistryError"],
)
def test_unarchivable_output_passes_through_whole(tmp_path: Path, exc: Exception) -> None:
    reg = FullDisk(tmp_path / "artifacts", exc)
    lm = LightMem(Config(), registry=reg, ledger=Ledger(tmp_path / "ledger.sqlite3"))
    pairs = _session_outputs(lm)
    assert all(got == original for original, got in pairs), "content that cannot be archived is kept whole"
    assert reg.attempts == len(pairs)
    session = lm.session("disk")
    assert session.fail.errors["reduction"] == len(pairs)
    assert lm.ledger is not None
    rows = lm.ledger.calls("disk")
    assert [r.errors.get("reduction") for r in rows] == [1] * len(pairs)
    assert type(exc).__name__ in (rows[-1].last_error or "")
    text, _ok = doctor.run(lm.ledger, probe=_offline_probe(tmp_path), config_file=tmp_path / "none.json")
    assert f"reduction x{len(pairs)}" in text and "originals were passed through" in text
    lm.ledger.close()


def test_registry_path_that_is_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "artifacts"
    blocker.write_text("not a directory")
    cfg = Config()
    cfg.registry.dir = str(blocker)
    lm = LightMem(cfg, ledger=Ledger(tmp_path / "ledger.sqlite3"))
    pairs = _session_outputs(lm, 3)
    assert all(got == original for original, got in pairs)
    assert lm.ledger is not None
    assert "RegistryError" in (lm.ledger.calls("disk")[-1].last_error or "")
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({"registry": {"dir": str(blocker)}}))
    text, ok = doctor.run(lm.ledger, probe=_offline_probe(tmp_path), config_file=config_file)
    assert not ok
    assert f"[fail] registry: {blocker} is not a directory" in text
    assert "[warn] errors: reduction x3" in text
    lm.ledger.close()


def test_recovery_keeps_working_after_the_disk_frees_up(tmp_path: Path) -> None:
    reg = FullDisk(tmp_path / "artifacts", OSError(errno.ENOSPC, "No space left on device"))
    lm = LightMem(Config(), registry=reg)
    s = lm.session("later")
    first = tool_output("later", 0, lines=300)
    msgs = head("later") + turn("later", 0, first)
    assert s.before_model_call(msgs)[-1]["content"] == first
    reg.exc = None  # type: ignore[assignment]
    reg.put = Registry.put.__get__(reg)  # type: ignore[method-assign]
    second = tool_output("later", 1, lines=300)
    msgs = msgs + turn("later", 1, second)
    out = s.before_model_call(msgs)
    assert out[-3]["content"] == first, "an output once passed through keeps its form (reduce once)"
    assert {reg.recover(k) for k in stub_keys(out[-1]["content"])} == {second}


def _can_mount() -> bool:
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt && umount /mnt"],
        capture_output=True,
        timeout=20,
    )
    return probe.returncode == 0


@pytest.mark.slow
def test_real_full_then_read_only_filesystem(tmp_path: Path) -> None:
    if not _can_mount():
        pytest.skip("needs a private mount namespace (root, unshare)")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    cmd = f"mount -t tmpfs -o size=256k tmpfs '{mnt}' && exec '{sys.executable}' '{SCRIPT}' '{mnt}' '{tmp_path}/ledger.sqlite3'"
    proc = subprocess.run(["unshare", "-m", "sh", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows: list[dict[str, Any]] = [json.loads(line) for line in proc.stdout.splitlines()]
    summary = rows.pop()
    kept = [(r["phase"], r["kept"]) for r in rows]
    assert ("full", "LOST") not in kept and ("readonly", "LOST") not in kept
    assert ("full", "archived") in kept, "the first outputs fit and were archived"
    assert ("full", "original") in kept, "once the disk was full, originals went through whole"
    assert {k for p, k in kept if p == "readonly"} == {"original"}
    assert rows[-1]["errors"].get("reduction", 0) >= 4
    assert summary["temps"] == [], "a failed write must not leave its temp file behind"
    assert summary["doctor"][0] == "fail" and "not writable" in summary["doctor"][1]
    print(
        f"\nfull fs: {kept.count(('full', 'archived'))} archived, then {len(rows) - kept.count(('full', 'archived'))} passed through whole; errors {rows[-1]['errors']}"
    )


def test_plugin_starts_when_the_data_dir_is_unusable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "home-is-a-file"
    blocker.write_text("x")
    monkeypatch.setenv("LIGHTMEM2_HOME", str(blocker))
    lm = LightMem.from_config()
    original = tool_output("nohome", 0, lines=300)
    assert (
        lm.session("nohome").before_model_call(head("nohome") + turn("nohome", 0, original))[-1]["content"]
        == original
    )


def test_gc_removes_orphan_temp_files(tmp_path: Path) -> None:
    import os

    reg = Registry(tmp_path / "r", max_bytes=1 << 20)
    reg.put_short(b"x" * 1000)  # an artifact and its short name's claim
    shard = next(p for p in (tmp_path / "r").iterdir() if p.is_dir() and len(p.name) == 2)
    claims = next(p for p in (tmp_path / "r").iterdir() if p.is_dir() and len(p.name) != 2)
    orphans = [shard / ".tmp-killed", next(claims.iterdir()) / ".tmp-claim", tmp_path / "r" / ".tmp-top"]
    for orphan in orphans:
        orphan.write_bytes(b"half written")
        os.utime(orphan, (1, 1))  # long ago: no live writer owns it
    live = shard / ".tmp-writing-now"
    live.write_bytes(b"a write in progress")
    reg.gc()
    assert [o for o in orphans if o.exists()] == [], "every leftover goes, claims' folder included"
    assert live.exists(), "a temp file of a live writer stays"


COMMANDS = [
    "status",
    "report",
    "search foo",
    "doctor",
    "doctor --fix",
    "mode aggressive",
    "export --format json",
    "visual",
]
_COMMANDS_SCRIPT = """\
set -e
mount -t tmpfs -o size={size} tmpfs '{mnt}'
export LIGHTMEM2_HOME='{mnt}'
'{py}' -m lightmem_plugin.cli demo > /dev/null 2>&1 || true
{fill}
mount -o remount,{how} '{mnt}'
for c in {commands}; do
  set +e
  '{py}' -m lightmem_plugin.cli $c > /dev/null 2> '{out}/err.txt'
  echo "$c|$?|$(tr '\\n' '~' < '{out}/err.txt')"
  set -e
done
"""


@pytest.mark.slow
@pytest.mark.parametrize("disk", ["read-only", "full"])
def test_no_command_prints_a_traceback_on_a_read_only_or_full_data_dir(tmp_path: Path, disk: str) -> None:
    """Measured before: on a read-only data dir status, report, search, doctor, doctor --fix, mode,
    export and visual printed a traceback (os.chmod in the SQLite opener); mode on a full disk too."""
    if not _can_mount():
        pytest.skip("needs a private mount namespace (root, unshare)")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    fill = f"dd if=/dev/zero of='{mnt}/fill' bs=4k 2>/dev/null || true" if disk == "full" else ":"
    script = _COMMANDS_SCRIPT.format(
        size="8m",
        mnt=mnt,
        py=sys.executable,
        fill=fill,
        how="ro" if disk == "read-only" else "rw",
        commands=" ".join(f"'{c}'" for c in COMMANDS),
        out=tmp_path,
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split("|", 2) for line in proc.stdout.splitlines()]
    assert [r[0] for r in rows] == COMMANDS
    for command, code, err in rows:
        assert "Traceback" not in err, f"{command}: {err.replace('~', chr(10))[-1500:]}"
        lines = [line for line in err.split("~") if line]
        assert len(lines) <= 1, f"{command}: more than one line on stderr: {lines}"
        if code != "0" and command != "doctor":
            assert lines and lines[0].startswith("lightmem2: "), f"{command} (exit {code}) said nothing"
    failed = {r[0]: r[2] for r in rows if r[1] != "0"}
    print(f"\n{disk}: " + "; ".join(f"{c} -> {code}" for c, code, _ in rows))
    assert "doctor" in failed, "doctor fails on the data dir (its check names it), without a traceback"
    if disk == "read-only":
        assert "status" in failed and "read-only file system" in failed["status"]
        assert "LIGHTMEM2_HOME" in failed["status"]
