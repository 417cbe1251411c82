"""config path|show|validate|secret-path|sidecar: where the config file is, the config in force, or whether it is valid.

``show`` prints the full config with defaults filled in (API keys masked); ``validate`` exits 2 with
one line naming the file, key path, bad value and allowed values when the file is invalid.
``secret-path`` prints where the sidecar secret lives (creating it, 0600, if there is none yet): the
OpenClaw plugin reads that file to authenticate to ``lightmem2 serve``. ``sidecar`` prints, as JSON,
that path and ``server.port``: what the OpenClaw plugin needs to find or start ``serve`` on the port
the rest of lightmem2 (``doctor``, the hooks) expects, in one process start.
"""

from __future__ import annotations

import argparse
import json

from ..config import config_path, load_config
from .base import Command, Outcome


def run(action: str) -> str:
    """The text ``lightmem2 config ACTION`` prints."""
    if action in ("secret-path", "sidecar"):
        from ..server.secret import load_or_create, secret_path

        secret_file = secret_path()
        load_or_create(secret_file)
        if action == "secret-path":
            return str(secret_file)
        return json.dumps({"port": load_config().server.port, "secretPath": str(secret_file)}, sort_keys=True)
    path = config_path()
    if action == "path":
        return str(path)
    config = load_config(path)
    if action == "validate":
        where = str(path) if path.exists() else f"{path} (absent: defaults in force)"
        return f"ok: {where} is valid (mode {config.mode})"
    data = config.model_dump(by_alias=True)
    if data["estimator"].get("proxyApiKey"):
        data["estimator"]["proxyApiKey"] = "***"
    return json.dumps(data, indent=2)


def configure(parser: argparse.ArgumentParser) -> None:
    """``path``, ``show``, ``validate``, ``secret-path`` or ``sidecar``."""
    parser.add_argument("action", choices=["path", "show", "validate", "secret-path", "sidecar"])


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 config ACTION``."""
    return run(args.action)


COMMAND = Command("config", __doc__, configure, main)
