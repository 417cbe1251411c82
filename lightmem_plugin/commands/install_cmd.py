"""install openclaw|claude-code|codex [--uninstall] [--project DIR]: wire lightmem2 into a host.

Idempotent; every file it edits is backed up first and the changes are printed. ``--uninstall``
restores the edited files exactly. ``--project DIR`` installs into a project's own settings instead of
the user's.
"""

from __future__ import annotations

from collections.abc import Callable

HOSTS = ("openclaw", "claude-code", "codex")


def run(host: str, uninstall: bool, project: str | None) -> str:
    """The text ``lightmem2 install HOST`` prints."""
    from ..install import claude_code, codex, openclaw

    runners: dict[str, Callable[..., str]] = {
        "openclaw": openclaw.run,
        "claude-code": claude_code.run,
        "codex": codex.run,
    }
    return runners[host](uninstall=uninstall, project=project)
