"""Config writes: 0600 in a 0700 dir, unique temp names, nothing left behind on failure."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from lightmem_plugin.atomic import write_private_text
from lightmem_plugin.commands.mode import set_mode
from lightmem_plugin.config import config_path

ROOT = Path(__file__).resolve().parents[1]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_mode_keeps_the_config_private(isolated_home: Path) -> None:
    path = config_path()
    path.write_text(json.dumps({"estimator": {"proxyApiKey": "sk-test"}}))
    os.chmod(path, 0o600)
    set_mode("aggressive")
    assert _mode(path) == 0o600  # was rewritten 0644 before
    assert json.loads(path.read_text()) == {"estimator": {"proxyApiKey": "sk-test"}, "mode": "aggressive"}


def test_a_new_config_dir_is_0700(tmp_path: Path) -> None:
    target = tmp_path / "new" / "config.json"
    write_private_text(target, "{}\n")
    assert _mode(target.parent) == 0o700 and _mode(target) == 0o600


def test_a_failed_write_leaves_the_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "d").mkdir()
    target = tmp_path / "d" / "config.json"
    target.write_text('{"mode": "normal"}\n')

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        write_private_text(target, '{"mode": "aggressive"}\n')
    assert target.read_text() == '{"mode": "normal"}\n'
    assert sorted(p.name for p in target.parent.iterdir()) == ["config.json"]


def test_two_writers_never_corrupt_the_file(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    target = tmp_path / "d" / "config.json"
    code = (
        "import sys, json\nfrom pathlib import Path\nfrom lightmem_plugin.atomic import write_private_text\n"
        "p = Path(sys.argv[1])\n"
        "for i in range(300):\n"
        "    write_private_text(p, json.dumps({'writer': sys.argv[2], 'i': i, 'pad': 'x' * 4000}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(target), w], env=env) for w in "ab"]
    seen = 0
    while any(p.poll() is None for p in procs):
        if target.exists():
            json.loads(target.read_text())  # always a whole file: never a torn or mixed write
            seen += 1
    assert all(p.wait() == 0 for p in procs)
    assert json.loads(target.read_text())["i"] == 299
    assert [p.name for p in target.parent.iterdir()] == ["config.json"]
    assert seen > 0
