"""Codex CLI: a model provider at the proxy in ``config.toml`` (the user's or a project's), the MCP
server, and hooks (SessionStart, UserPromptSubmit)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from ..base import Host, Probe, first_wired


def _has_provider(path: Path) -> bool:
    providers = tomllib.loads(path.read_text(encoding="utf-8")).get("model_providers") or {}
    return isinstance(providers, dict) and "lightmem2" in providers


def wired(exe: str, probe: Probe) -> tuple[bool | None, str]:
    """``[model_providers.lightmem2]`` in the project's ``.codex/config.toml`` first, then the user's."""
    files = [d / ".codex" / "config.toml" for d in probe.project_dirs()]
    return first_wired(
        [*files, probe.home / ".codex" / "config.toml"], _has_provider, "[model_providers.lightmem2] in"
    )


HOST = Host(
    "codex",
    "codex",
    (0, 160, 0),
    ((0, 169), (0, 171)),
    "lightmem_plugin.hosts.codex.install",
    wired,
    "lightmem_plugin.hosts.codex.hooks",
)
