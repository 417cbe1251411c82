"""The OpenClaw plugin manifest (``adapters/openclaw/openclaw.plugin.json``), generated from our config.

Why generated: OpenClaw validates ``plugins.entries.lightmem2.config`` against the manifest's
``configSchema`` before the plugin loads, so that schema must be exactly lightmem2's
(``config.schema.json``) plus the one section only the JS side reads (``openclaw``: which
``lightmem2`` executable to run and how to reach it). A test regenerates this text and compares it
with the checked-in file, so the two never drift. OpenClaw's validator does not resolve the
``$schema`` dialect URL, so the copy leaves that one key out, and it has no ``default`` values (see
:func:`without_defaults`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..._version import __version__
from ...config import json_schema

PLUGIN_ID = "lightmem2"
RECOVER_TOOL = "lightmem2_recover"
SEARCH_TOOL = "lightmem2_search"
MANIFEST_NAME = "openclaw.plugin.json"
TOOL_PROFILES = ("minimal", "coding", "messaging", "full")  # OpenClaw 2026.9.6's built-in tool profiles

HOST_SETTINGS: dict[str, Any] = {
    "additionalProperties": False,
    "description": "Settings of the OpenClaw plugin itself (read by its JS side; lightmem2 ignores them).",
    "properties": {
        "autoStart": {
            "default": True,
            "description": "Start `lightmem2 serve` when it is not already running on the port.",
            "type": "boolean",
        },
        "command": {
            "default": "lightmem2",
            "description": "The lightmem2 executable (a name on PATH or an absolute path).",
            "type": "string",
        },
        "port": {
            # no default: OpenClaw fills schema defaults into the plugin config, and an unset port
            # must mean lightmem2's own server.port (what doctor and the hooks use), not 8787
            "description": "Loopback port of the lightmem2 sidecar (`lightmem2 serve --port`); unset: "
            "lightmem2's own server.port.",
            "maximum": 65535,
            "minimum": 1,
            "type": "integer",
        },
        "requestTimeoutMs": {
            "default": 10000,
            "description": "Longest wait for one sidecar call before OpenClaw goes on unmodified.",
            "minimum": 100,
            "type": "integer",
        },
        "retryAfterMs": {
            "default": 30000,
            "description": "After a failed start, run unmodified this long before trying again.",
            "minimum": 0,
            "type": "integer",
        },
        "startTimeoutMs": {
            "default": 15000,
            "description": "Longest wait for a started sidecar to answer.",
            "minimum": 100,
            "type": "integer",
        },
    },
    "title": "OpenClaw plugin",
    "type": "object",
}


def without_defaults(schema: Any) -> Any:
    """``schema`` with every ``default`` removed (the descriptions still name them).

    Why: OpenClaw fills a manifest's schema defaults into the plugin config it hands the plugin (seen
    on 2026.9.6: ``mode: "normal"`` arrives unset by the user). The plugin writes the lightmem2 keys it
    is given into lightmem2's config file, so a default would undo ``lightmem2 mode aggressive`` at
    every Gateway start; without defaults, only what the user wrote in ``openclaw.json`` arrives.
    """
    if isinstance(schema, dict):
        return {k: without_defaults(v) for k, v in schema.items() if k != "default"}
    if isinstance(schema, list):
        return [without_defaults(v) for v in schema]
    return schema


def config_schema() -> dict[str, Any]:
    """lightmem2's config schema (without defaults) plus the ``openclaw`` section, as OpenClaw validates it."""
    schema: dict[str, Any] = without_defaults({k: v for k, v in json_schema().items() if k != "$schema"})
    schema["properties"] = {**schema["properties"], "openclaw": HOST_SETTINGS}
    return schema


def manifest() -> dict[str, Any]:
    """The whole manifest: identity, the context-engine slot, contracts, activation and schema."""
    return {
        "activation": {"onStartup": True},
        "configSchema": config_schema(),
        "contracts": {"agentToolResultMiddleware": ["openclaw"], "tools": [RECOVER_TOOL, SEARCH_TOOL]},
        "description": "Cache-stable, reduced context for long OpenClaw sessions: reduces tool output "
        "once, keeps the prompt prefix byte-stable, recovers every original on request.",
        "id": PLUGIN_ID,
        "kind": "context-engine",
        "name": "lightmem2",
        # every tool profile: a profile lists the plugin tools it keeps, and without these the stubs
        # (which name lightmem2_recover) would point at a tool `tools.profile: "coding"` removed
        "toolMetadata": {
            tool: {"profiles": list(TOOL_PROFILES), "replaySafe": True, "sideEffecting": False}
            for tool in (RECOVER_TOOL, SEARCH_TOOL)
        },
        "version": __version__,
    }


def manifest_text() -> str:
    """Canonical text of ``openclaw.plugin.json``."""
    return json.dumps(manifest(), indent=2, sort_keys=True) + "\n"


def write_manifest(adapter_dir: Path) -> Path:
    """Regenerate the manifest in ``adapter_dir``; returns its path."""
    path = adapter_dir / MANIFEST_NAME
    path.write_text(manifest_text(), encoding="utf-8")
    return path
