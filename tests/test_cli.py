from __future__ import annotations

import json
from pathlib import Path

import pytest

from lightmem_plugin.cli import main
from lightmem_plugin.commands.table import run_line
from lightmem_plugin.config import config_path
from lightmem_plugin.pipeline import LightMem


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["frobnicate"], "invalid choice"),
        (["mode", "agressive"], 'did you mean "aggressive"'),
        (["recover", "0" * 32], "no artifact"),
        (["recover", "../etc/passwd"], "not an artifact key"),
        (["replay", "/no/such/trace.json"], "no such trace"),
        (["status", "--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_usage_is_one_line_and_exit_code_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert needle in one_line_error(capsys)


def test_bad_config_file_is_reported_by_validate(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_path().write_text(json.dumps({"eviction": {"batchTurns": "soon"}}))
    assert main(["config", "validate"]) == 2
    err = one_line_error(capsys)
    assert "eviction.batchTurns" in err and '"soon"' in err and str(config_path()) in err


def test_mode_switch_persists_and_keeps_other_keys(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_path().write_text(json.dumps({"eviction": {"batchTurns": 5}}, indent=2))
    assert main(["mode", "aggressive"]) == 0
    saved = json.loads(config_path().read_text())
    assert saved == {"eviction": {"batchTurns": 5}, "mode": "aggressive"}
    assert "mode: aggressive" in capsys.readouterr().out


def test_recover_prints_the_archived_bytes_exactly(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    key = LightMem.from_config().registry.put(b"line 1\nline 2\nno trailing newline")
    assert main(["recover", key]) == 0
    assert capsysbinary.readouterr().out == b"line 1\nline 2\nno trailing newline"
    assert main(["recover", key, "--lines", "2:2"]) == 0
    assert capsysbinary.readouterr().out == b"line 2\n"
    assert main(["recover", key, "--lines", "9:1"]) == 2
    assert b"bad line range" in capsysbinary.readouterr().err


def test_chat_commands_answer_without_raising() -> None:
    text, code = run_line("/lightmem2 mode turbo")
    assert code == 2 and "allowed: conservative, normal, aggressive" in text
    text, code = run_line("/lightmem2 serve")
    assert code == 2 and "not available in chat" in text
    text, code = run_line("/lightmem2 mode")
    assert code == 0 and text.startswith("mode: normal")


@pytest.mark.parametrize("line", ["/lightmem2 bogus", "/lightmem2 status --bad", "lightmem2 search"])
def test_bad_chat_arguments_have_one_prefix(line: str) -> None:
    from lightmem_plugin.commands.table import run_line

    text, code = run_line(line)
    assert code == 2 and text.startswith("lightmem2: ") and "lightmem2: lightmem2" not in text, text
    assert text.count("lightmem2:") == 1


def test_bad_cli_arguments_have_one_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--bad"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lightmem2: ") and err.count("lightmem2:") == 1, err
