"""serve [--host 127.0.0.1] [--port N] [--allow-remote]: run the local proxy and the OpenClaw sidecar.

Hosts reach it over loopback: Claude Code through ``ANTHROPIC_BASE_URL``, Codex through a model
provider ``base_url``, OpenClaw's plugin through the sidecar routes. A non-loopback bind is refused
unless ``--allow-remote`` is given. Runs until interrupted.
"""

from __future__ import annotations


def run(host: str | None, port: int | None, allow_remote: bool) -> str:
    """Serve until interrupted; returns nothing to print."""
    from ..server import serve

    serve(None, host, port, allow_remote)
    return ""
