"""A damaged data dir: one-line errors instead of tracebacks, doctor names the file, --fix repairs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lightmem_plugin.cli import main
from lightmem_plugin.commands import status as status_cmd
from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.store.ledger import Ledger

STORES = ["ledger.sqlite3", "sessions.sqlite3", "search.sqlite3", "faults.sqlite3"]


ROOT = Path(__file__).resolve().parents[2]


def _make_stores(home: Path) -> None:
    """Create every store in another process, as a host would (then nothing here holds them open)."""
    code = (
        "from lightmem_plugin.pipeline import LightMem\n"
        "LightMem.from_config().session('s').before_model_call([{'role': 'user', 'content': 'hi'}])\n"
    )
    env = {**os.environ, "LIGHTMEM2_HOME": str(home), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    assert all((home / name).exists() for name in STORES)


def _damage(home: Path, name: str) -> None:
    (home / name).write_bytes(b"this is not a database " * 100)
    for suffix in ("-wal", "-shm"):
        (home / f"{name}{suffix}").unlink(missing_ok=True)


@pytest.mark.parametrize("name", STORES)
def test_doctor_fails_naming_the_file_and_fix_moves_it_aside(
    isolated_home: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _make_stores(isolated_home)
    _damage(isolated_home, name)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "[fail] stores: not a usable SQLite database: " in out and str(isolated_home / name) in out
    main(["doctor", "--fix"])
    out = capsys.readouterr().out
    assert f"moved to {name}.damaged" in out and "[pass] stores:" in out
    assert (isolated_home / f"{name}.damaged").read_bytes().startswith(b"this is not a database")
    assert main(["doctor"]) in (0, 1) and "[pass] stores:" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["status"], ["report"], ["search", "x"]])
def test_cli_says_one_line_instead_of_a_traceback(
    isolated_home: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("ledger.sqlite3", "search.sqlite3"):
        _damage(isolated_home, name)
    code = main(command)
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.startswith("lightmem2: ") and "lightmem2 doctor --fix" in err and len(err.splitlines()) == 1


def test_the_host_keeps_working_with_a_damaged_ledger(isolated_home: Path) -> None:
    _damage(isolated_home, "ledger.sqlite3")
    plugin = LightMem.from_config()  # fail-open: no ledger, the pipeline runs
    assert plugin.ledger is None
    msgs = [{"role": "user", "content": "hello"}]
    assert plugin.session("s").before_model_call(msgs)[0]["content"].startswith("hello")


def test_status_on_a_fresh_ledger_after_fix(isolated_home: Path) -> None:
    _damage(isolated_home, "ledger.sqlite3")
    main(["doctor", "--fix"])
    with Ledger.default() as ledger:
        text = status_cmd.run(ledger, LightMem.from_config().registry, Config())
    assert "session: none recorded yet" in text
