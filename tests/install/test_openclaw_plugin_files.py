"""The OpenClaw plugin folder: manifest in sync with our config schema, package metadata, JS unit tests."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.hosts.openclaw.manifest import (
    HOST_SETTINGS,
    RECOVER_TOOL,
    config_schema,
    manifest_text,
    without_defaults,
)

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "adapters" / "openclaw"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ADAPTER / name).read_text(encoding="utf-8"))
    return data


def test_manifest_is_generated_from_the_config_schema() -> None:
    assert (ADAPTER / "openclaw.plugin.json").read_text(encoding="utf-8") == manifest_text(), (
        "adapters/openclaw/openclaw.plugin.json is stale; regenerate it with "
        "python -c 'from pathlib import Path; from lightmem_plugin.hosts.openclaw.manifest import "
        'write_manifest; write_manifest(Path("adapters/openclaw"))\''
    )


def test_config_schema_is_ours_plus_the_host_section() -> None:
    ours = json.loads((ROOT / "config.schema.json").read_text(encoding="utf-8"))
    shipped = load("openclaw.plugin.json")["configSchema"]
    assert shipped["properties"].pop("openclaw") == HOST_SETTINGS
    ours.pop("$schema")
    assert shipped == without_defaults(ours)
    assert config_schema()["additionalProperties"] is False
    # OpenClaw fills schema defaults into the plugin config; none may arrive unset by the user
    assert '"default"' not in json.dumps(shipped) and '"default"' in json.dumps(ours)


def test_manifest_declares_what_the_entry_registers() -> None:
    manifest = load("openclaw.plugin.json")
    source = (ADAPTER / "index.js").read_text(encoding="utf-8")
    assert manifest["id"] == "lightmem2" and manifest["kind"] == "context-engine"
    assert manifest["contracts"]["tools"] == [RECOVER_TOOL, "lightmem2_search"]
    assert 'const SEARCH_TOOL = "lightmem2_search";' in source
    assert f'const RECOVER_TOOL = "{RECOVER_TOOL}";' in source
    assert manifest["contracts"]["agentToolResultMiddleware"] == ["openclaw"]
    assert 'runtimes: ["openclaw"]' in source
    assert manifest["activation"] == {"onStartup": True}
    for registrar in ("registerContextEngine", "registerAgentToolResultMiddleware", "registerCommand"):
        assert f"api.{registrar}(" in source
    assert re.search(r'api\.on\("tool_result_persist"', source)


def test_package_json_points_at_the_entry() -> None:
    package = load("package.json")
    assert package["name"] == "lightmem2"  # same as the manifest id, so OpenClaw keys the config by it
    assert package["type"] == "module"
    for entry in package["openclaw"]["extensions"]:
        assert (ADAPTER / entry).is_file()
    for name in package["files"]:
        assert (ADAPTER / name).exists()


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_js_unit_tests_pass() -> None:
    done = subprocess.run(
        ["node", "--test", str(ADAPTER / "test")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"^# fail 0$", done.stdout, re.MULTILINE)
