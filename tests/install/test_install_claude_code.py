"""``lightmem2 install claude-code``: idempotent, backed up, printed, and undone exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lightmem_plugin.errors import UsageError
from lightmem_plugin.hosts.claude_code import install as cc
from lightmem_plugin.hosts.shared import hooks_json as _hooks_json

ADAPTER = Path(__file__).resolve().parents[2] / "adapters" / "claude_code"
USER_SETTINGS = """{
  "env": {"ANTHROPIC_BASE_URL": "https://gateway.example.com/", "FOO": "1"},
  "hooks": {"PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "echo mine"}]}]},
  "model": "opus"
}
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    return h


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()} | {
        str(p.relative_to(root)) + "/": b"" for p in sorted(root.rglob("*")) if p.is_dir()
    }


def settings_of(home: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((home / ".claude" / "settings.json").read_text())
    return data


def our_commands(data: dict[str, Any]) -> dict[str, list[str]]:
    return {
        event: [
            h["command"]
            for g in groups
            for h in g["hooks"]
            if _hooks_json.is_ours(h["command"], "claude-code")
        ]
        for event, groups in data.get("hooks", {}).items()
    }


def test_fresh_install_then_uninstall_leaves_nothing(home: Path, isolated_home: Path) -> None:
    before = snapshot(home)
    report = cc.run(uninstall=False, project=None)
    assert "updated: " in report and '+    "ANTHROPIC_BASE_URL": "http://127.0.0.1:8787"' in report
    data = settings_of(home)
    assert data["env"] == {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8787"}
    assert {e: len(c) for e, c in our_commands(data).items()} == {
        "SessionStart": 1,
        "UserPromptSubmit": 1,
        "PostToolUse": 1,
        "PreCompact": 1,
    }
    assert data["hooks"]["PostToolUse"][0]["matcher"] == "*"
    assert (home / ".claude" / "commands" / "lightmem2.md").read_text() == cc.COMMAND_MD
    undo = cc.run(uninstall=True, project=None)
    assert "restored exactly" in undo
    assert snapshot(home) == before
    assert not (isolated_home / "config.json").exists()


def test_install_is_idempotent(home: Path) -> None:
    cc.run()
    first = snapshot(home)
    again = cc.run()
    assert "unchanged: " in again and "updated: " not in again
    assert snapshot(home) == first


def test_existing_settings_keep_the_users_hooks_and_upstream(home: Path, isolated_home: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(USER_SETTINGS)
    before = snapshot(home)
    report = cc.run()
    assert "original saved as settings.json.lightmem2.bak" in report
    data = settings_of(home)
    assert data["model"] == "opus" and data["env"]["FOO"] == "1"
    assert data["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8787"
    assert data["hooks"]["PostToolUse"][0]["hooks"][0]["command"] == "echo mine"  # the user's first
    lm = json.loads((isolated_home / "config.json").read_text())
    assert lm["server"]["upstreams"]["anthropic"] == "https://gateway.example.com"
    cc.run(uninstall=True)
    assert snapshot(home) == before
    assert path.read_text() == USER_SETTINGS


def test_changes_made_after_install_survive_uninstall(home: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(USER_SETTINGS)
    cc.run()
    data = settings_of(home)
    data["permissions"] = {"allow": ["Bash(ls:*)"]}
    path.write_text(json.dumps(data))
    report = cc.run(uninstall=True)
    assert "changed since install, removed only lightmem2's entries" in report
    after = settings_of(home)
    assert after["permissions"] == {"allow": ["Bash(ls:*)"]}
    assert after["env"] == {"ANTHROPIC_BASE_URL": "https://gateway.example.com/", "FOO": "1"}
    assert our_commands(after) == {"PostToolUse": []}
    assert (path.parent / "settings.json.lightmem2.bak").read_text() == USER_SETTINGS


def test_project_scope(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    cc.run(project=str(project))
    # the machine-specific part (executable path, loopback URL) goes in the project's personal file,
    # not in the settings.json a team shares
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert "lightmem2" in json.dumps(local["hooks"]) and local["env"]["ANTHROPIC_BASE_URL"].startswith(
        "http://127.0.0.1:"
    )
    assert not (project / ".claude" / "settings.json").exists()
    assert not (home / ".claude").exists()
    cc.run(uninstall=True, project=str(project))
    assert list(project.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "is not valid JSON"),
        ('["a"]', "expected a JSON object"),
        ('{"hooks": []}', "expected a JSON object"),
        ('{"env": 3}', '"env" must be an object'),
    ],
)
def test_bad_settings_are_refused_untouched(home: Path, content: str, needle: str) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(content)
    with pytest.raises(UsageError, match=needle):
        cc.run()
    assert path.read_text() == content
    assert not (path.parent / "settings.json.lightmem2.bak").exists()


def test_project_must_exist(home: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is not a directory"):
        cc.run(project=str(tmp_path / "nope"))


def test_uninstall_without_install(home: Path) -> None:
    assert "not installed" in cc.run(uninstall=True)


def test_plugin_files_match_the_installer() -> None:
    assert (ADAPTER / "commands" / "lightmem2.md").read_text() == cc.COMMAND_MD
    manifest = json.loads((ADAPTER / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "lightmem2"
    hooks = json.loads((ADAPTER / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == set(_hooks_json.EVENTS)
    for event, (matcher, timeout) in _hooks_json.EVENTS.items():
        (group,) = hooks[event]
        assert group.get("matcher") == matcher
        assert group["hooks"] == [
            {"type": "command", "command": f"lightmem2 hook claude-code {event}", "timeout": timeout}
        ]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
hook_groups = st.lists(
    st.fixed_dictionaries(
        {
            "hooks": st.lists(
                st.fixed_dictionaries({"type": st.just("command"), "command": st.text(max_size=12)}),
                max_size=2,
            )
        },
        optional={"matcher": st.text(max_size=5)},
    ),
    max_size=2,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    extra=st.dictionaries(st.sampled_from(["model", "permissions", "x"]), json_values, max_size=2),
    hooks=st.dictionaries(st.sampled_from(["PostToolUse", "Stop", "SessionStart"]), hook_groups, max_size=2),
    env=st.none()
    | st.dictionaries(st.sampled_from(["FOO", "ANTHROPIC_BASE_URL"]), st.text(max_size=10), max_size=2),
    indent=st.sampled_from([None, 2, 4]),
)
def test_install_then_uninstall_restores_any_settings_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory,
    extra: dict[str, Any],
    hooks: dict[str, Any],
    env: dict[str, str] | None,
    indent: int | None,
) -> None:
    mp = pytest.MonkeyPatch()
    home = tmp_path_factory.mktemp("home")
    mp.setenv("HOME", str(home))
    mp.setenv("LIGHTMEM2_HOME", str(tmp_path_factory.mktemp("lm")))
    try:
        data: dict[str, Any] = {
            **extra,
            **({"hooks": hooks} if hooks else {}),
            **({"env": env} if env is not None else {}),
        }
        path = home / ".claude" / "settings.json"
        path.parent.mkdir()
        text = json.dumps(data, indent=indent)
        path.write_text(text)
        cc.run()
        stripped = _hooks_json.remove(settings_of(home), "claude-code").get("hooks") or {}
        # the user's hooks, untouched (an empty list under one of our events cannot be told apart)
        assert stripped == {k: v for k, v in hooks.items() if v or k not in _hooks_json.EVENTS}
        cc.run(uninstall=True)
        assert path.read_text() == text
        assert not (home / ".claude" / "commands").exists()
    finally:
        mp.undo()


@pytest.mark.parametrize("indent", [4, "\t", None])
def test_the_upstream_edit_keeps_the_format_of_lightmem2s_config(
    home: Path, isolated_home: Path, indent: int | str | None
) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(USER_SETTINGS)
    mine = isolated_home / "config.json"
    user = {"mode": "aggressive", "estimator": {"model": "modèle-é"}}
    mine.write_text(json.dumps(user, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")
    cc.run()
    data = {**user, "server": {"upstreams": {"anthropic": "https://gateway.example.com"}}}
    assert mine.read_text(encoding="utf-8") == json.dumps(data, indent=indent, ensure_ascii=False) + "\n"
    from lightmem_plugin.commands.mode import set_mode

    set_mode("normal")  # `mode` writes with the same writer, in the same format
    data["mode"] = "normal"
    assert mine.read_text(encoding="utf-8") == json.dumps(data, indent=indent, ensure_ascii=False) + "\n"
    cc.run(uninstall=True)
    assert json.loads(mine.read_text(encoding="utf-8")) == {**user, "mode": "normal"}


def test_uninstall_also_undoes_an_older_project_install_in_settings_json(home: Path, tmp_path: Path) -> None:
    """--project used to write the shared settings.json; --uninstall still takes that back out."""
    from lightmem_plugin.hosts.shared import edits as _edits
    from lightmem_plugin.hosts.shared import hooks_json as _hooks_json

    project = tmp_path / "repo"
    (project / ".claude").mkdir(parents=True)
    shared = project / ".claude" / "settings.json"
    shared.write_text('{"model": "opus"}\n')
    older = _hooks_json.add(json.loads(shared.read_text()), cc.HOST)
    _edits.apply(
        shared, json.dumps(older, indent=2) + "\n", {"proxy": "http://127.0.0.1:8787", "had_env": False}
    )
    assert "lightmem2" in shared.read_text()
    cc.run(project=str(project))
    cc.run(uninstall=True, project=str(project))
    assert shared.read_text() == '{"model": "opus"}\n'
    assert not (project / ".claude" / "settings.local.json").exists()
