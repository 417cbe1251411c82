"""install openclaw|claude-code|codex [--uninstall] [--project DIR]: wire lightmem2 into a host.

Idempotent; every file it edits is backed up first and the changes are printed. ``--uninstall``
restores the edited files exactly. ``--project DIR`` installs into a project's own settings instead of
the user's.
"""

from __future__ import annotations

HOSTS = ("openclaw", "claude-code", "codex")


def run(host: str, uninstall: bool, project: str | None) -> str:
    """The text ``lightmem2 install HOST`` prints."""
    if host == "openclaw":
        from ..install import openclaw as target
    elif host == "claude-code":
        from ..install import claude_code as target  # type: ignore[no-redef]
    else:
        from ..install import codex as target  # type: ignore[no-redef]
    return target.run(uninstall=uninstall, project=project)
