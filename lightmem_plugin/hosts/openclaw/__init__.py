"""OpenClaw: a context-engine plugin (``adapters/openclaw``) talking to ``lightmem2 serve``'s sidecar.
No hook events: the plugin calls the sidecar itself."""

from __future__ import annotations

from ..base import Host, Probe


def wired(exe: str, probe: Probe) -> tuple[bool | None, str]:
    """lightmem2 is in ``openclaw plugins list``."""
    code, out = probe.run([exe, "plugins", "list"])
    if code != 0:
        return None, f"`openclaw plugins list` failed (exit {code}): {out.strip()[:120]}"
    return "lightmem2" in out, "openclaw plugins list"


HOST = Host(
    "openclaw", "openclaw", (2026, 9, 0), ((2026, 9),), "lightmem_plugin.hosts.openclaw.install", wired
)
