"""``lightmem2 install openclaw``: idempotent edits of openclaw.json, an exact restore, no openclaw needed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.errors import UsageError
from lightmem_plugin.hosts.openclaw import install as oc
from lightmem_plugin.hosts.shared import edits as _edits

PLUGIN = oc.plugin_dir()


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated openclaw.json path, with no ``openclaw`` command on this machine."""
    path = tmp_path / "state" / "openclaw.json"
    monkeypatch.setenv("OPENCLAW_CONFIG_PATH", str(path))
    monkeypatch.setattr(oc, "_openclaw", lambda args: (False, "`openclaw` is not on PATH"))
    return path


def entry(data: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = data["plugins"]["entries"]["lightmem2"]
    return result


USER_CONFIGS = [
    pytest.param(None, id="no-file"),
    pytest.param("{}\n", id="empty-object"),
    pytest.param(
        '{\n    "agents": {"defaults": {"model": "anthropic/claude-opus-4-6"}},\n'
        '    "plugins": {"slots": {"contextEngine": "lossless-claw"}, "allow": ["memory-core"],\n'
        '                "entries": {"lossless-claw": {"enabled": true}}}\n}\n',
        id="other-engine-and-allowlist",
    ),
    pytest.param(
        '{"gateway": {"mode": "local"}, "ui": {"name": "Zoë"}, "plugins": {"load": {"paths": ["/opt/x"]}}}',
        id="unicode-no-newline",
    ),
]


@pytest.mark.parametrize("original", USER_CONFIGS)
def test_install_wires_every_key_and_uninstall_restores_exactly(cfg: Path, original: str | None) -> None:
    if original is not None:
        cfg.parent.mkdir(parents=True)
        cfg.write_bytes(original.encode())
    report = oc.run(uninstall=False, project=None)
    data = json.loads(cfg.read_text())
    plugins = data["plugins"]
    assert str(PLUGIN) in plugins["load"]["paths"]
    assert plugins["slots"]["contextEngine"] == "lightmem2"
    assert entry(data)["enabled"] is True
    assert entry(data)["hooks"] == {"allowConversationAccess": True}
    assert Path(entry(data)["config"]["openclaw"]["command"]).name == "lightmem2"
    if isinstance(json.loads(original or "{}").get("plugins", {}).get("allow"), list):
        assert plugins["allow"] == ["memory-core", "lightmem2"]
    else:
        assert "allow" not in plugins  # never start an allowlist: that would block every other plugin
    assert "lightmem2 installed into OpenClaw" in report and str(cfg) in report
    assert '+        "contextEngine": "lightmem2"' in report or '"contextEngine": "lightmem2"' in report

    undo = oc.run(uninstall=True, project=None)
    assert "restored exactly" in undo
    if original is None:
        assert not cfg.exists()
    else:
        assert cfg.read_bytes() == original.encode()
    assert not _edits.backup_path(cfg).exists() and not _edits.state_path(cfg).exists()


def test_install_twice_changes_nothing_and_keeps_the_first_backup(cfg: Path) -> None:
    cfg.parent.mkdir(parents=True)
    cfg.write_text('{"plugins": {"slots": {"contextEngine": "legacy"}}}')
    oc.run(uninstall=False, project=None)
    first = cfg.read_bytes()
    again = oc.run(uninstall=False, project=None)
    assert cfg.read_bytes() == first
    assert f"unchanged: {cfg}" in again
    assert _edits.backup_path(cfg).read_text() == '{"plugins": {"slots": {"contextEngine": "legacy"}}}'
    assert json.loads(cfg.read_text())["plugins"]["load"]["paths"].count(str(PLUGIN)) == 1


def test_a_command_the_user_chose_is_kept(cfg: Path) -> None:
    cfg.parent.mkdir(parents=True)
    user = {
        "plugins": {"entries": {"lightmem2": {"config": {"openclaw": {"command": "/opt/lm2", "port": 9}}}}}
    }
    cfg.write_text(json.dumps(user))
    oc.run(uninstall=False, project=None)
    assert entry(json.loads(cfg.read_text()))["config"]["openclaw"] == {"command": "/opt/lm2", "port": 9}


def test_uninstall_after_user_edits_removes_only_our_entries(cfg: Path) -> None:
    cfg.parent.mkdir(parents=True)
    cfg.write_text(json.dumps({"plugins": {"slots": {"contextEngine": "lossless-claw"}}}))
    oc.run(uninstall=False, project=None)
    data = json.loads(cfg.read_text())
    data["channels"] = {"telegram": {"enabled": True}}  # the user (or OpenClaw) edits the file since
    cfg.write_text(json.dumps(data, indent=2))
    report = oc.run(uninstall=True, project=None)
    assert "removed only lightmem2's entries" in report
    assert json.loads(cfg.read_text()) == {
        "plugins": {"slots": {"contextEngine": "lossless-claw"}},
        "channels": {"telegram": {"enabled": True}},
    }
    assert _edits.backup_path(cfg).exists()  # the original stays for the user to compare


def test_uninstall_when_not_installed_is_a_no_op(cfg: Path) -> None:
    cfg.parent.mkdir(parents=True)
    cfg.write_text('{"a": 1}')
    assert "nothing to do" in oc.run(uninstall=True, project=None)
    assert cfg.read_text() == '{"a": 1}'


def test_openclaw_rewriting_the_file_still_restores_exactly(
    cfg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``openclaw`` on PATH, its own install/uninstall edits must not break the exact restore."""
    calls: list[list[str]] = []

    def fake_openclaw(args: list[str]) -> tuple[bool, str]:
        calls.append(args)
        cfg.with_name("openclaw.json.bak").write_text(cfg.read_text())  # OpenClaw backs up before writing
        data = json.loads(cfg.read_text())
        data["meta"] = {"lastTouchedVersion": "2026.9.6"}
        if args[1] == "uninstall":
            data["plugins"] = {"entries": {"lightmem2": {"enabled": False}}}
        cfg.write_text(json.dumps(data, indent=2) + "\n")
        return True, "Saved for the next Gateway start."

    monkeypatch.setattr(oc, "_openclaw", fake_openclaw)
    cfg.parent.mkdir(parents=True)
    cfg.write_text('{"gateway": {"mode": "local"}}\n')
    report = oc.run(uninstall=False, project=None)
    assert calls[0] == ["plugins", "install", "--link", str(PLUGIN), "--force", "--accept-capabilities"]
    assert "openclaw: Saved for the next Gateway start." in report
    undo = oc.run(uninstall=True, project=None)
    assert calls[1] == ["plugins", "uninstall", "lightmem2", "--force", "--keep-files"]
    assert "restored exactly" in undo
    assert cfg.read_text() == '{"gateway": {"mode": "local"}}\n'
    # OpenClaw copies openclaw.json.bak over a config that shrank: it must not bring lightmem2 back
    assert cfg.with_name("openclaw.json.bak").read_text() == cfg.read_text()
    assert "updated openclaw.json.bak" in undo


@pytest.mark.parametrize("existed", [True, False])
def test_openclaw_backup_is_settled_only_when_it_holds_lightmem2(cfg: Path, existed: bool) -> None:
    cfg.parent.mkdir(parents=True)
    if existed:
        cfg.write_text('{"a": 1}')
    oc.run(uninstall=False, project=None)
    backup = cfg.with_name("openclaw.json.bak")
    backup.write_text(cfg.read_text())
    oc.run(uninstall=True, project=None)
    if existed:
        assert backup.read_text() == '{"a": 1}'
    else:
        assert not backup.exists() and not cfg.exists()


def test_an_unrelated_openclaw_backup_is_left_alone(cfg: Path) -> None:
    cfg.parent.mkdir(parents=True)
    cfg.write_text('{"a": 1}')
    backup = cfg.with_name("openclaw.json.bak")
    backup.write_text('{"a": 0}')
    oc.run(uninstall=False, project=None)
    oc.run(uninstall=True, project=None)
    assert backup.read_text() == '{"a": 0}'


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"OPENCLAW_CONFIG_PATH": "/c/oc.json", "OPENCLAW_STATE_DIR": "/s"}, "/c/oc.json"),
        ({"OPENCLAW_STATE_DIR": "/s"}, "/s/openclaw.json"),
        ({"OPENCLAW_HOME": "/h"}, "/h/.openclaw/openclaw.json"),
        ({"HOME": "/home/u"}, "/home/u/.openclaw/openclaw.json"),
    ],
)
def test_config_path_follows_openclaw(
    env: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENCLAW_CONFIG_PATH", "OPENCLAW_STATE_DIR", "OPENCLAW_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert oc.config_path() == Path(expected)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{\n  // my gateway\n  "gateway": {}\n}\n', "not plain JSON"),
        ("[1, 2]", "top level is not an object"),
        ('{"plugins": {"load": {"paths": "/x"}}}', "plugins.load.paths is not a list"),
        ('{"plugins": {"entries": []}}', "plugins.entries is [], not an object"),
    ],
)
def test_files_we_cannot_edit_are_left_alone(cfg: Path, text: str, needle: str) -> None:
    cfg.parent.mkdir(parents=True)
    cfg.write_text(text)
    with pytest.raises(UsageError, match=re.escape(needle)):
        oc.run(uninstall=False, project=None)
    assert cfg.read_text() == text
    assert not _edits.state_path(cfg).exists()


def test_project_is_refused(cfg: Path) -> None:
    with pytest.raises(UsageError, match="--project does not apply to openclaw"):
        oc.run(uninstall=False, project="/tmp")
