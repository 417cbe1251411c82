"""``lightmem2 install codex``: provider on the Responses wire, hooks, MCP recover tool; undone exactly."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lightmem_plugin.errors import UsageError
from lightmem_plugin.hosts.codex import install as cx
from lightmem_plugin.hosts.shared import hooks_json as _hooks_json
from lightmem_plugin.hosts.shared import toml_text as _toml_text

ADAPTER = Path(__file__).resolve().parents[2] / "adapters" / "codex"
AZURE = """# my codex config
model = "gpt-9"
model_provider = "azure"

[model_providers.azure]
name = "Azure"
base_url = "https://x.openai.azure.com/openai/"
env_key = "AZURE_KEY"
query_params = { api-version = "2025-04-01-preview" }
wire_api = "responses"
"""


@pytest.fixture
def codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return home / ".codex"


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"/" for p in sorted(root.rglob("*"))
    }


def config(folder: Path) -> dict[str, Any]:
    return tomllib.loads((folder / "config.toml").read_text())


def test_fresh_install(codex_home: Path, isolated_home: Path) -> None:
    report = cx.run()
    assert '+model_provider = "lightmem2"' in report
    data = config(codex_home)
    assert data["model_provider"] == "lightmem2"
    provider = data["model_providers"]["lightmem2"]
    assert provider["base_url"] == "http://127.0.0.1:8787/v1" and provider["wire_api"] == "responses"
    assert provider["env_key"] == "OPENAI_API_KEY"
    mcp = data["mcp_servers"]["lightmem2"]
    assert mcp["command"] == sys.executable and mcp["args"] == ["-m", "lightmem_plugin.mcp_server"]
    assert mcp["required"] is True and mcp["env"] == {"LIGHTMEM2_HOME": str(isolated_home)}
    hooks = json.loads((codex_home / "hooks.json").read_text())["hooks"]
    assert all(_hooks_json.is_ours(g["hooks"][0]["command"], "codex") for e in hooks.values() for g in e)
    assert sorted(hooks) == ["SessionStart", "UserPromptSubmit"]  # no PostToolUse: reduced on the wire
    assert "unchanged" in cx.run()
    cx.run(uninstall=True)
    assert not codex_home.exists()


def test_api_key_login_is_used_when_present(codex_home: Path) -> None:
    codex_home.mkdir()
    (codex_home / "auth.json").write_text('{"auth_mode": "apikey", "OPENAI_API_KEY": "sk-x"}')
    cx.run()
    provider = config(codex_home)["model_providers"]["lightmem2"]
    assert provider.get("requires_openai_auth") is True and "env_key" not in provider


def test_custom_provider_keeps_its_upstream_and_credentials(codex_home: Path, isolated_home: Path) -> None:
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(AZURE)
    before = snapshot(codex_home)
    cx.run()
    data = config(codex_home)
    provider = data["model_providers"]["lightmem2"]
    assert provider["base_url"] == "http://127.0.0.1:8787/u/azure/v1"
    assert provider["env_key"] == "AZURE_KEY" and provider["query_params"] == {
        "api-version": "2025-04-01-preview"
    }
    assert data["model_providers"]["azure"]["base_url"] == "https://x.openai.azure.com/openai/"
    lm = json.loads((isolated_home / "config.json").read_text())
    assert lm["server"]["upstreams"]["named"] == {"azure": "https://x.openai.azure.com/openai"}
    assert "unchanged" in cx.run() and config(codex_home)["model_providers"]["lightmem2"] == provider
    cx.run(uninstall=True)
    assert snapshot(codex_home) == before
    assert not (isolated_home / "config.json").exists()


def test_user_edits_after_install_survive_uninstall(codex_home: Path) -> None:
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(AZURE)
    cx.run()
    path = codex_home / "config.toml"
    path.write_text(path.read_text() + '\n[hooks.state."x"]\ntrusted_hash = "abc"\n')  # Codex records trust
    report = cx.run(uninstall=True)
    assert "removed only lightmem2's entries" in report
    data = config(codex_home)
    assert data["model_provider"] == "azure" and "lightmem2" not in data["model_providers"]
    assert "mcp_servers" not in data and data["hooks"]["state"]["x"]["trusted_hash"] == "abc"
    assert path.read_text().startswith(AZURE)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("model = [", "is not valid TOML"),
        ('[model_providers.lightmem2]\nbase_url = "http://elsewhere"\n', "already defines"),
        ('model_provider = "mine"\n', 'model_provider "mine" has no base_url'),
        ('model_provider = "oss"\n[model_providers.oss]\nname = "x"\n', "has no base_url"),
        ('model_providers = { a = { base_url = "http://a" } }\n', "unusual layout|is not valid TOML"),
    ],
)
def test_configs_we_refuse(codex_home: Path, content: str, needle: str) -> None:
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(content)
    with pytest.raises(UsageError, match=needle):
        cx.run()
    assert (codex_home / "config.toml").read_text() == content
    assert not (codex_home / "hooks.json").exists()


def test_codex_home_and_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "ch"))
    assert "trusted project" not in cx.run()
    assert (tmp_path / "ch" / "config.toml").exists()
    project = tmp_path / "repo"
    project.mkdir()
    said = cx.run(project=str(project))
    assert config(project / ".codex")["model_provider"] == "lightmem2"
    # an untrusted project's config is ignored by Codex without a word: the installer says so
    assert "only in a trusted project" in said and "`codex exec --trust`" in said and str(project) in said
    cx.run(uninstall=True, project=str(project))
    assert list(project.iterdir()) == []


def test_adapter_snippet_matches_the_installer() -> None:
    snippet = tomllib.loads((ADAPTER / "config.toml").read_text())
    assert snippet["model_provider"] == "lightmem2"
    assert snippet["model_providers"]["lightmem2"]["wire_api"] == "responses"
    assert snippet["mcp_servers"]["lightmem2"]["args"] == ["-m", "lightmem_plugin.mcp_server"]
    hooks = json.loads((ADAPTER / "hooks.json").read_text())["hooks"]
    assert {e: g[0]["hooks"][0]["command"] for e, g in hooks.items()} == {
        e: f"lightmem2 hook codex {e}" for e in cx.HOOK_EVENTS
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 'model_provider = "lightmem2"\n'),
        ('model = "m"\n', 'model = "m"\nmodel_provider = "lightmem2"\n'),
        ("# c\n[t]\na = 1\n", '# c\nmodel_provider = "lightmem2"\n[t]\na = 1\n'),
        ('model_provider = "x"  # mine\n[t]\n', 'model_provider = "lightmem2"\n[t]\n'),
        ('[t]\nmodel_provider = "x"\n', 'model_provider = "lightmem2"\n[t]\nmodel_provider = "x"\n'),
    ],
)
def test_top_level_key_edit(text: str, expected: str) -> None:
    assert _toml_text.set_top_key(text, "model_provider", 'model_provider = "lightmem2"') == expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    head=st.lists(
        st.sampled_from(
            ['model = "gpt-9"', "# comment", "", 'approval_policy = "never"', 'model_provider = "openai"']
        ),
        max_size=4,
        unique=True,
    ),
    tables=st.lists(
        st.sampled_from(
            [
                "[tui]\nnotifications = true",
                '[profiles.fast]\nmodel = "m"',
                '[mcp_servers.other]\ncommand = "x"',
            ]
        ),
        max_size=2,
        unique=True,
    ),
    trailing_newline=st.booleans(),
)
def test_install_then_uninstall_restores_any_config_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory, head: list[str], tables: list[str], trailing_newline: bool
) -> None:
    mp = pytest.MonkeyPatch()
    folder = tmp_path_factory.mktemp("codex")
    mp.setenv("CODEX_HOME", str(folder))
    mp.setenv("LIGHTMEM2_HOME", str(tmp_path_factory.mktemp("lm")))
    try:
        text = "\n".join(head + tables) + ("\n" if trailing_newline else "")
        (folder / "config.toml").write_text(text)
        cx.run()
        installed = (folder / "config.toml").read_text()
        assert tomllib.loads(installed)["model_provider"] == "lightmem2"
        assert (
            cx.undo_config(installed, {"provider_line": _toml_text.top_key_line(text, "model_provider")})
            is not None
        )
        cx.run(uninstall=True)
        assert (folder / "config.toml").read_text() == text
        assert not (folder / "hooks.json").exists()
    finally:
        mp.undo()


def test_without_the_mcp_sdk_no_required_server_is_added(
    codex_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    cx.run()
    data = config(codex_home)
    assert "lightmem2" in data["model_providers"] and "mcp_servers" not in data


def test_trust_entries_codex_wrote_inside_our_block_survive_a_reinstall(codex_home: Path) -> None:
    """Codex's editor can put its trust tables inside our markers; a second install (and an
    uninstall) keeps them, so the TUI does not ask for trust again."""
    cx.run()
    path = codex_home / "config.toml"
    text = path.read_text()
    trust = '[tui]\nnotifications = true\n\n[hooks.state."SessionStart:abc"]\ntrusted_hash = "h1"\n'
    path.write_text(text.replace(_toml_text.END, trust + _toml_text.END))
    cx.run()
    data = config(codex_home)
    assert data["tui"]["notifications"] is True
    assert data["hooks"]["state"]["SessionStart:abc"]["trusted_hash"] == "h1"
    assert data["model_providers"]["lightmem2"]["wire_api"] == "responses"
    cx.run(uninstall=True)
    data = config(codex_home) if (codex_home / "config.toml").exists() else {}
    assert data["hooks"]["state"]["SessionStart:abc"]["trusted_hash"] == "h1"
    assert "lightmem2" not in data.get("model_providers", {}) and "mcp_servers" not in data
