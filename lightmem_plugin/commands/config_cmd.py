"""config path|show|validate|secret-path|sidecar: where the config file is, the config in force, or whether it is valid.

``show`` prints the full config with defaults filled in (API keys masked); ``validate`` exits 2 with
one line naming the file, key path, bad value and allowed values when the file is invalid.
``secret-path`` prints where the sidecar secret lives (creating it, 0600, if there is none yet): the
OpenClaw plugin reads that file to authenticate to ``lightmem2 serve``. ``sidecar`` prints, as JSON,
that path and ``server.port``: what the OpenClaw plugin needs to find or start ``serve`` on the port
the rest of lightmem2 (``doctor``, the hooks) expects, in one process start. ``sidecar --merge JSON``
first sets those keys in the config file (the lightmem2 keys a user wrote in ``openclaw.json``, so
they take effect everywhere); a merge that would make the file invalid is not written, and the JSON
says why (``mergeError``) instead of failing the plugin's start. When the file is invalid, the port is
that of the config in force (the last good one, else the defaults: what ``serve`` runs on) and
``configError`` names the rejected key and that config.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..config import config_in_force, config_path, load_config, merge_config_keys
from ..errors import LightMemError, UsageError
from .base import Command, Outcome


def sidecar(merge: str | None) -> str:
    """``config sidecar [--merge JSON]``: the secret file and ``server.port``, after the merge."""
    from ..server.secret import load_or_create, secret_path

    answer: dict[str, Any] = {}
    if merge is not None:
        try:
            keys = json.loads(merge)
            if not isinstance(keys, dict):
                raise ValueError("expected a JSON object of lightmem2 config keys")
            answer["merged"] = merge_config_keys(keys)
        except (ValueError, LightMemError) as err:
            answer["mergeError"] = f"--merge {merge[:80]!r} not applied: {err}"
    secret_file = secret_path()
    load_or_create(secret_file)
    # an invalid file: the plugin starts serve on the port of the config serve runs on, the last good
    # one (else the defaults), like the hooks do; before, no port was given and it fell back to 8787
    in_force, rejected = config_in_force()
    answer["port"] = in_force.server.port
    if rejected:
        answer["configError"] = rejected  # the file, key and value, and which config is in force
    answer["secretPath"] = str(secret_file)
    return json.dumps(answer, sort_keys=True)


def run(action: str, merge: str | None = None) -> str:
    """The text ``lightmem2 config ACTION`` prints."""
    if action == "sidecar":
        return sidecar(merge)
    if merge is not None:
        raise UsageError(f"--merge goes with `config sidecar`, not `config {action}`")
    if action == "secret-path":
        from ..server.secret import load_or_create, secret_path

        secret_file = secret_path()
        load_or_create(secret_file)
        return str(secret_file)
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
    parser.add_argument("--merge", metavar="JSON", help="sidecar only: lightmem2 config keys to set first")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 config ACTION``."""
    return run(args.action, args.merge)


COMMAND = Command("config", __doc__, configure, main)
