"""The per-install sidecar secret file, and the chat-command allowlist that guards ``/sidecar/command``."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lightmem_plugin.cli import main
from lightmem_plugin.commands import _chat_policy
from lightmem_plugin.commands.table import build_parser, refusal, run_remote_line
from lightmem_plugin.errors import CommandRefused, SecretError
from lightmem_plugin.server import chat_commands
from lightmem_plugin.server.guard import host_name, is_loopback_host
from lightmem_plugin.server.secret import load_or_create, matches, proof, read_secret, secret_path

RACE = """
import sys
from pathlib import Path
from lightmem_plugin.server.secret import load_or_create
print(load_or_create(Path(sys.argv[1])))
"""


def test_processes_starting_together_agree_on_one_secret(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "sidecar.secret"
    procs = [
        subprocess.Popen([sys.executable, "-c", RACE, str(path)], stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    values = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(values) == 1 and re.fullmatch(r"[0-9a-f]{64}", values.pop())
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == ["sidecar.secret"]  # no temp file left


def test_a_loose_mode_is_tightened_and_the_value_kept(tmp_path: Path) -> None:
    path = tmp_path / "sidecar.secret"
    value = load_or_create(path)
    os.chmod(path, 0o644)
    assert load_or_create(path) == value and path.stat().st_mode & 0o777 == 0o600


def test_unsafe_files_are_refused_with_the_fix(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("a" * 64)
    link = tmp_path / "link.secret"
    link.symlink_to(target)
    with pytest.raises(SecretError, match=r"symbolic link; delete it"):
        load_or_create(link)
    junk = tmp_path / "junk.secret"
    junk.write_text("not a secret at all, but long enough to be no partial write........")
    with pytest.raises(SecretError, match=r"expected 64 hex characters.*delete the file"):
        read_secret(junk, wait_s=0)


def test_a_file_of_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to chown a file to another uid")
    path = tmp_path / "sidecar.secret"
    load_or_create(path)
    os.chown(path, 65534, 65534)
    with pytest.raises(SecretError, match="belongs to uid 65534, not to you"):
        read_secret(path)


def test_matches_and_proof() -> None:
    secret = "ab" * 32
    assert matches(secret, secret) and not matches(secret, "ab" * 31 + "ac") and not matches(secret, None)
    assert not matches(secret, "\udcff")
    assert proof(secret, "n1") != proof(secret, "n2") and proof(secret, "n1") != proof("cd" * 32, "n1")


def test_config_secret_path_prints_the_file_and_creates_it(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "secret-path"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == str(secret_path()) == str(isolated_home / "sidecar.secret")
    assert re.fullmatch(r"[0-9a-f]{64}", Path(printed).read_text().strip())


def test_config_sidecar_names_the_secret_and_the_configured_port(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the OpenClaw plugin reads to find serve on lightmem2's server.port (not a fixed 8787)."""
    (isolated_home / "config.json").write_text('{"server": {"port": 9123}}', encoding="utf-8")
    assert main(["config", "sidecar"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer == {"port": 9123, "secretPath": str(isolated_home / "sidecar.secret")}
    assert re.fullmatch(r"[0-9a-f]{64}", Path(answer["secretPath"]).read_text().strip())


def test_config_sidecar_names_the_last_good_port_and_why_when_the_file_is_invalid(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in config.json: the port of the config serve runs on (the last good one), not 8787, and
    the rejected key with the config in force. Before, ``port`` was left out and the OpenClaw plugin
    started serve on 8787, away from the port the hooks, doctor and a restarted serve use."""
    config = isolated_home / "config.json"
    config.write_text('{"server": {"port": 9123}}', encoding="utf-8")
    assert main(["config", "sidecar"]) == 0  # a valid read keeps the last good copy
    capsys.readouterr()
    config.write_text('{"server": {"port": 9123}, "mode": "turbo"}', encoding="utf-8")
    assert main(["config", "sidecar"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["port"] == 9123
    assert 'mode = "turbo"' in answer["configError"]
    assert "in force: last good (mode normal, valid as of " in answer["configError"]
    (isolated_home / "config.last-good.json").unlink()  # never valid here: the defaults, said so
    assert main(["config", "sidecar"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["port"] == 8787 and "in force: defaults" in answer["configError"]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1:8787", True),
        ("localhost", True),
        ("[::1]:1", True),
        ("::1", True),
        ("LocalHost:80", True),
        ("127.0.0.1:", False),
        ("127.0.0.1:80x", False),
        ("[::1]x", False),
        ("localhost.", False),
        ("127.0.0.2", False),
        ("evil.example", False),
        ("", False),
        (None, False),
    ],
)
def test_loopback_host_names(host: str | None, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_host_name_strips_port_and_brackets() -> None:
    assert host_name("[::1]:8787") == "::1" and host_name("a.b:1") == "a.b" and host_name("a:b") is None


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_option_of_a_chat_safe_command_is_either_allowed_or_unset_by_default() -> None:
    """So a refused option can only be set by the sender, and an allowed command is not refused by default."""
    subs = _subcommands()
    for cmd, allowed in _chat_policy.CHAT_SAFE.items():
        dests = {a.dest for a in subs[cmd]._actions if a.dest != "help"}
        assert allowed <= dests, (cmd, allowed - dests)
        for action in subs[cmd]._actions:
            if action.dest not in allowed and action.dest != "help":
                assert action.default in (None, False), (cmd, action.dest, action.default)


def test_commands_outside_the_allowlist_are_refused() -> None:
    for cmd in set(_subcommands()) - set(_chat_policy.CHAT_SAFE):
        assert cmd in {"replay", "continuous", "serve", "install", "hook", "demo", "gateway"}, (
            f"new command {cmd}: decide if chat-safe"
        )
    args = build_parser().parse_args(["resume", "--tr", "/dev/zero"])
    with pytest.raises(CommandRefused, match=r"--trace cannot be used from chat.*in a terminal"):
        _chat_policy.check(args)
    assert refusal("/lightmem2 resume --level full") is None
    assert refusal("/lightmem2 resume --level") is None  # a parse error: the CLI says it
    assert "in a terminal" in (refusal("/lightmem2 'demo'") or "")
    assert "in a terminal" in (refusal("/lightmem2 gateway add-user mallory") or "")  # prints a token
    with pytest.raises(CommandRefused, match="in a terminal"):
        run_remote_line("/lightmem2 resume --trace /dev/zero")
    assert run_remote_line("/lightmem2 mode bogus")[1] == 2  # allowed, so it runs and says what is wrong


def test_bounded_cuts_and_says_so() -> None:
    assert chat_commands.bounded("abc", 1000) == "abc"
    cut = chat_commands.bounded("x" * 5000, 1000)
    assert cut.startswith("x" * 1000) and "x" * 1001 not in cut and "5,000" in cut


def test_config_sidecar_merges_the_host_keys_once_and_refuses_an_invalid_one(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """openclaw.json's lightmem2 keys land in config.json (so the CLI sees them too); a bad one never does."""
    config = isolated_home / "config.json"
    config.write_text('{\n    "server": {"port": 9123},\n    "reduction": {"normal": {"capChars": 900}}\n}\n')
    keys = {"mode": "aggressive", "reduction": {"normal": {"triggerChars": 5000}}}
    assert main(["config", "sidecar", "--merge", json.dumps(keys)]) == 0
    assert json.loads(capsys.readouterr().out)["merged"] == ["mode", "reduction"]
    data = json.loads(config.read_text())
    assert data == {
        "server": {"port": 9123},
        "reduction": {"normal": {"capChars": 900, "triggerChars": 5000}},
        "mode": "aggressive",
    }
    assert config.read_text().startswith('{\n    "server"')  # the file keeps its own indent
    assert main(["mode"]) == 0 and capsys.readouterr().out.startswith("mode: aggressive")
    before = config.stat().st_mtime_ns
    assert main(["config", "sidecar", "--merge", json.dumps(keys)]) == 0
    assert json.loads(capsys.readouterr().out)["merged"] == [] and config.stat().st_mtime_ns == before
    text = config.read_text()
    assert main(["config", "sidecar", "--merge", '{"mode": "turbo"}']) == 0  # the plugin still starts
    answer = json.loads(capsys.readouterr().out)
    assert "turbo" in answer["mergeError"] and answer["port"] == 9123 and config.read_text() == text
    assert main(["config", "sidecar", "--merge", "[1]"]) == 0
    assert "JSON object" in json.loads(capsys.readouterr().out)["mergeError"]
    assert main(["config", "show", "--merge", "{}"]) == 2
    assert "--merge goes with `config sidecar`" in capsys.readouterr().err
