"""``lightmem2 install openclaw`` against the real ``openclaw`` CLI: it records the linked install, and
``--uninstall`` takes it out of OpenClaw and puts ``openclaw.json`` back byte for byte."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lightmem_plugin.hosts.openclaw import install as installer


def plugin_ids(env: Any) -> set[str]:
    listed = env.openclaw("plugins", "list", "--json")
    assert listed.returncode == 0, listed.stderr[-2000:]
    data = json.loads(listed.stdout[listed.stdout.index("{") :])
    return {p["id"] for p in data["plugins"] if p.get("enabled", True)}


def test_install_then_uninstall_with_the_openclaw_cli(make_env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env("install", plugin=False)
    for key, value in env.env().items():
        if key.startswith(("OPENCLAW_", "LIGHTMEM2_")) or key in ("PATH", "HOME"):
            monkeypatch.setenv(key, value)
    original = env.config_path.read_bytes()

    report = installer.run(uninstall=False, project=None)
    assert "openclaw: Saved for the next Gateway start." in report, report
    assert "lightmem2" in plugin_ids(env)
    assert installer.run(uninstall=False, project=None).count("unchanged") == 1  # idempotent

    undo = installer.run(uninstall=True, project=None)
    assert "restored exactly" in undo, undo
    assert env.config_path.read_bytes() == original
    assert "lightmem2" not in plugin_ids(env)
    assert env.config_path.read_bytes() == original  # and OpenClaw's clobber recovery left it so
