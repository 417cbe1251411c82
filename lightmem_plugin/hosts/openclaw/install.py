"""``lightmem2 install openclaw [--uninstall]``: wire lightmem2 into OpenClaw's ``openclaw.json``.

What it sets (DESIGN section 6), each in the user's config file:

- ``plugins.load.paths`` gets the plugin folder (``adapters/openclaw``): a linked install;
- ``plugins.entries.lightmem2``: ``enabled``, ``hooks.allowConversationAccess`` and
  ``config.openclaw.command``, the absolute path of this ``lightmem2``, so the Gateway finds it
  whatever its PATH;
- ``plugins.slots.contextEngine`` = ``lightmem2`` (the engine whose ``assemble()`` shapes history);
- ``plugins.allow`` gets ``lightmem2`` only when the user already keeps an allowlist.

The file is edited directly (so it works without the ``openclaw`` command); when ``openclaw`` is on
PATH, ``openclaw plugins install --link`` then records the install and its capability consent, and
``--uninstall`` runs ``openclaw plugins uninstall`` before the file is put back byte for byte
(:mod:`._edits`). The config path follows OpenClaw: ``OPENCLAW_CONFIG_PATH``, else
``$OPENCLAW_STATE_DIR/openclaw.json``, else ``~/.openclaw/openclaw.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ..shared import edits as _edits
from .manifest import MANIFEST_NAME, PLUGIN_ID

HOST = "openclaw"
CLI_TIMEOUT_S = 120.0
SLOT = "contextEngine"


def config_path() -> Path:
    """The ``openclaw.json`` OpenClaw reads, resolved the way OpenClaw resolves it."""
    explicit = os.environ.get("OPENCLAW_CONFIG_PATH", "").strip()
    if explicit:
        return Path(explicit).expanduser()
    state = os.environ.get("OPENCLAW_STATE_DIR", "").strip()
    if state:
        return Path(state).expanduser() / "openclaw.json"
    home = os.environ.get("OPENCLAW_HOME", "").strip()
    return (Path(home).expanduser() if home else Path.home()) / ".openclaw" / "openclaw.json"


def plugin_dir() -> Path:
    """The plugin folder shipped beside the package (``adapters/openclaw`` of the checkout)."""
    found = Path(__file__).resolve().parents[3] / "adapters" / "openclaw"
    if not (found / MANIFEST_NAME).is_file():
        raise UsageError(
            f"the OpenClaw plugin files are not in this installation (looked in {found}); "
            "install lightmem2 from a source checkout (`pip install -e .`) and rerun"
        )
    return found


def lightmem2_executable() -> str:
    """Absolute path of the ``lightmem2`` that runs this (the venv's), else the one on PATH."""
    beside = Path(sys.executable).with_name("lightmem2")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("lightmem2") or "lightmem2"


def _parse(text: str | None, path: Path) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as err:
        raise UsageError(
            f"{path} is not plain JSON ({err}); lightmem2 edits plain JSON only: remove comments and "
            "trailing commas, or add the plugin by hand (see the README, 'Use with OpenClaw')"
        ) from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: the top level is not an object; fix the file and rerun")
    return data


def _obj(parent: dict[str, Any], key: str, path: Path, where: str) -> dict[str, Any]:
    value = parent.setdefault(key, {})
    if not isinstance(value, dict):
        raise UsageError(f"{path}: {where} is {json.dumps(value)[:40]}, not an object; fix it and rerun")
    return value


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def install_edit(data: dict[str, Any], plugin: Path, exe: str, path: Path) -> dict[str, Any]:
    """Add lightmem2 to a parsed ``openclaw.json`` in place; returns the facts an undo needs."""
    plugins = _obj(data, "plugins", path, "plugins")
    load = _obj(plugins, "load", path, "plugins.load")
    paths = load.setdefault("paths", [])
    if not isinstance(paths, list):
        raise UsageError(f"{path}: plugins.load.paths is not a list; fix it and rerun")
    entries = _obj(plugins, "entries", path, "plugins.entries")
    slots = _obj(plugins, "slots", path, "plugins.slots")
    facts: dict[str, Any] = {
        "pluginDir": str(plugin),
        "addedPath": str(plugin) not in paths,
        "entry": entries.get(PLUGIN_ID),
        "slot": slots.get(SLOT),
        "addedAllow": isinstance(plugins.get("allow"), list) and PLUGIN_ID not in plugins["allow"],
    }
    if facts["addedPath"]:
        paths.append(str(plugin))
    entry = _obj(entries, PLUGIN_ID, path, f"plugins.entries.{PLUGIN_ID}")
    entry["enabled"] = True
    _obj(entry, "hooks", path, "plugins.entries.lightmem2.hooks")["allowConversationAccess"] = True
    own = _obj(_obj(entry, "config", path, "plugins.entries.lightmem2.config"), "openclaw", path, "…openclaw")
    own.setdefault("command", exe)
    slots[SLOT] = PLUGIN_ID
    if facts["addedAllow"]:
        plugins["allow"].append(PLUGIN_ID)
    return facts


def _drop_empty(parent: dict[str, Any], key: str) -> None:
    if parent.get(key) in ({}, []):
        del parent[key]


def uninstall_edit(text: str, facts: dict[str, Any]) -> str | None:
    """``text`` without lightmem2's entries, the user's own values put back (for a changed file)."""
    data = json.loads(text) if text.strip() else {}
    plugins = data.get("plugins")
    if not isinstance(plugins, dict):
        return text
    load = plugins.get("load")
    if facts.get("addedPath") and isinstance(load, dict) and isinstance(load.get("paths"), list):
        load["paths"] = [p for p in load["paths"] if p != facts.get("pluginDir")]
        _drop_empty(load, "paths")
        _drop_empty(plugins, "load")
    entries = plugins.get("entries")
    if isinstance(entries, dict):
        if facts.get("entry") is None:
            entries.pop(PLUGIN_ID, None)
        else:
            entries[PLUGIN_ID] = facts["entry"]
        _drop_empty(plugins, "entries")
    slots = plugins.get("slots")
    if isinstance(slots, dict):
        if facts.get("slot") is None:
            slots.pop(SLOT, None)
        else:
            slots[SLOT] = facts["slot"]
        _drop_empty(plugins, "slots")
    if facts.get("addedAllow") and isinstance(plugins.get("allow"), list):
        plugins["allow"] = [p for p in plugins["allow"] if p != PLUGIN_ID]
    _drop_empty(data, "plugins")
    return _dump(data)


def _openclaw(args: list[str]) -> tuple[bool, str]:
    """Run ``openclaw ARGS`` (bounded); (ok, its last line of output). (False, why) when not on PATH."""
    exe = shutil.which("openclaw")
    if exe is None:
        return False, "`openclaw` is not on PATH"
    try:
        done = subprocess.run(
            [exe, *args],
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return False, f"`openclaw {args[0]} {args[1]}` timed out after {CLI_TIMEOUT_S:g} s"
    except OSError as err:
        return False, f"cannot run openclaw: {err}"
    said = [line for line in done.stdout.splitlines() if line.strip()]
    said = said or [line for line in done.stderr.splitlines() if line.strip()]
    return done.returncode == 0, (said[-1].strip() if said else f"exit {done.returncode}")


def _install() -> str:
    """Wire lightmem2 in; idempotent. A report of what changed."""
    path = config_path()
    plugin = plugin_dir()
    before = _edits.read_text(path)
    data = _parse(before, path)
    facts = install_edit(data, plugin, lightmem2_executable(), path)
    report = [f"lightmem2 installed into OpenClaw ({path})", _edits.apply(path, _dump(data), facts)]
    ok, why = _openclaw(["plugins", "install", "--link", str(plugin), "--force", "--accept-capabilities"])
    if ok:
        # OpenClaw rewrites the file as it records the install; that text is now "what we wrote"
        report.append(f"openclaw: {why}")
        after, ours = _edits.read_text(path), _dump(data)
        if after is not None and after != ours:
            _edits.write_text(path, ours)  # apply() records a text only when it changes the file
            _edits.apply(path, after, facts)
    else:
        report.append(f"openclaw: install not recorded ({why}); the config edit above is enough to load it")
    report.append(
        "next: restart the Gateway (`openclaw gateway restart`), then type `/lightmem2 doctor` in a chat"
    )
    return "\n".join(line.rstrip("\n") for line in report)


def _uninstall() -> str:
    """Take lightmem2 out and put ``openclaw.json`` back as it was. A report of what was done."""
    path = config_path()
    if _edits.load_state(path) is None:
        return f"lightmem2 is not installed in {path} (no install record beside it); nothing to do"
    snapshot = _edits.read_text(path)
    ok, why = _openclaw(["plugins", "uninstall", PLUGIN_ID, "--force", "--keep-files"])
    note = f"openclaw: {why}" if ok else f"openclaw: uninstall not recorded ({why})"
    if snapshot is not None:
        _edits.write_text(path, snapshot)  # undo OpenClaw's own edit so the restore can be exact
    restored = _edits.restore(path, uninstall_edit)
    lines = [f"lightmem2 removed from OpenClaw ({path})", note, restored, _settle_recovery(path)]
    return "\n".join(line.rstrip("\n") for line in lines if line)


def _settle_recovery(path: Path) -> str:
    """Keep OpenClaw from undoing the uninstall.

    OpenClaw treats a config that shrank by half or lost its ``meta`` as clobbered and copies
    ``openclaw.json.bak`` (its own last backup) back over it. After an install that backup holds
    lightmem2's entries, so it would bring the plugin back; it gets the restored file instead (or is
    removed with the config when the config did not exist before the install).
    """
    backup = path.with_name(path.name + ".bak")
    held = _edits.read_text(backup)
    if held is None or PLUGIN_ID not in held:
        return ""
    current = _edits.read_text(path)
    if current is None:
        backup.unlink()
        return f"removed {backup.name} (OpenClaw's backup of the config lightmem2 had created)"
    _edits.write_text(backup, current)
    return f"updated {backup.name} (OpenClaw's recovery copy) to the restored config"


def run(uninstall: bool = False, project: str | None = None) -> str:
    """``lightmem2 install openclaw [--uninstall]``: the text to print."""
    if project is not None:
        raise UsageError(
            "--project does not apply to openclaw (OpenClaw keeps one config per state dir); "
            "point OPENCLAW_CONFIG_PATH at the config to change instead"
        )
    return _uninstall() if uninstall else _install()
