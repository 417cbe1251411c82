"""The host registry: one folder per host, one line in ``hosts.HOSTS``, and every command built from it."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from lightmem_plugin import hosts
from lightmem_plugin.commands.table import build_parser
from lightmem_plugin.errors import UsageError
from lightmem_plugin.hosts import hook_runtime as hooks


def test_every_host_folder_is_listed_once_in_order() -> None:
    found = [m.name for m in pkgutil.iter_modules(hosts.__path__) if m.ispkg and m.name != "shared"]
    assert len(found) >= 3, found
    defined = [importlib.import_module(f"lightmem_plugin.hosts.{name}").HOST for name in sorted(found)]
    assert sorted(h.name for h in defined) == sorted(hosts.NAMES)
    assert len(set(hosts.NAMES)) == len(hosts.NAMES) == len(found)
    assert [h.name for h in hosts.HOSTS] == [
        "openclaw",
        "claude-code",
        "codex",
    ]  # install, doctor, docs order


@pytest.mark.parametrize("host", hosts.HOSTS, ids=lambda h: h.name)
def test_each_host_names_modules_that_exist_in_its_own_folder(host: hosts.Host) -> None:
    folder = f"lightmem_plugin.hosts.{host.name.replace('-', '_')}."
    assert host.installer.startswith(folder) and (host.hooks or folder).startswith(folder)
    assert host.wired.__module__ == folder[:-1]
    assert callable(importlib.import_module(host.installer).run)
    if host.hooks is not None:
        assert host.handle is importlib.import_module(host.hooks).handle
    assert host.install_fix == f"lightmem2 install {host.name}"


def test_the_install_and_hook_commands_take_their_hosts_from_the_registry() -> None:
    parser = build_parser()
    assert parser.parse_args(["install", "codex"]).host == "codex"
    with pytest.raises(UsageError, match="invalid choice: 'nosuchhost'"):
        parser.parse_args(["install", "nosuchhost"])
    assert hosts.WITH_HOOKS == ("claude-code", "codex")  # OpenClaw is a plugin: no hook command
    assert parser.parse_args(["hook", "claude-code", "PostToolUse"]).host == "claude-code"


def test_a_host_added_to_the_registry_is_what_hook_dispatch_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new host is one module and one line: here a registry line naming an existing hook module."""
    extra = hosts.Host(
        "other",
        "other",
        (1, 0, 0),
        ((1, 0),),
        "lightmem_plugin.hosts.codex.install",
        hosts.codex.wired,
        "lightmem_plugin.hosts.codex.hooks",
    )
    monkeypatch.setattr(hosts, "HOSTS", (*hosts.HOSTS, extra))
    # a command prompt reaches the handler, which blocks it (an unknown host would print nothing)
    text, code = hooks.run("other", "UserPromptSubmit", '{"prompt": "/lightmem2 status"}')
    assert code == 0 and '"decision": "block"' in text, text
    assert hooks.run("nosuch", "UserPromptSubmit", '{"prompt": "/lightmem2 status"}') == ("", 0)
    assert hooks._handler("other") is importlib.import_module("lightmem_plugin.hosts.codex.hooks").handle
    assert hooks._handler("openclaw") is None and hooks._handler("nosuch") is None
