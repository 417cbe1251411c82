"""Claude Code: hooks (SessionStart, UserPromptSubmit, PostToolUse) and ``ANTHROPIC_BASE_URL`` at the
proxy, in the user's or a project's settings."""

from __future__ import annotations

import json
from pathlib import Path

from ..base import Host, Probe, first_wired


def _has_hooks(path: Path) -> bool:
    found = json.loads(path.read_text(encoding="utf-8")).get("hooks") or {}
    return "lightmem2" in json.dumps(found)


def wired(exe: str, probe: Probe) -> tuple[bool | None, str]:
    """lightmem2's hooks in the project's own settings first (``install claude-code --project DIR``),
    then the user's."""
    files = [
        d / ".claude" / name
        for d in probe.project_dirs()
        for name in ("settings.json", "settings.local.json")
    ]
    return first_wired([*files, probe.home / ".claude" / "settings.json"], _has_hooks, "hooks in")


HOST = Host(
    "claude-code",
    "claude",
    (2, 1, 0),
    ((2, 1),),
    "lightmem_plugin.hosts.claude_code.install",
    wired,
    "lightmem_plugin.hosts.claude_code.hooks",
)
