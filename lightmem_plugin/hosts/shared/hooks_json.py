"""The ``hooks`` object both Claude Code (``settings.json``) and Codex (``hooks.json``) read.

Shape: ``{"hooks": {EVENT: [{"matcher": M, "hooks": [{"type": "command", "command": C,
"timeout": S}]}]}}``. Our entries are recognised by their command (``... hook HOST EVENT`` or
``... -m lightmem_plugin.hooks HOST EVENT``), so a re-install replaces them in place of adding
copies and an uninstall removes exactly them, leaving the user's own hooks and their order alone.
"""

from __future__ import annotations

import copy
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...hookspec import HOOK_COMMAND
from . import edits as _edits

# event -> (matcher or None, timeout in seconds the host allows the hook)
EVENTS: dict[str, tuple[str | None, int]] = {
    "SessionStart": (None, 15),
    "UserPromptSubmit": (None, 10),
    "PostToolUse": ("*", 10),
    "PreCompact": (None, 60),  # archiving a long session's outputs; the host waits for it to compact
}


def hook_command(host: str, event: str) -> str:
    """The command the host runs for ``event``: absolute paths, so PATH and shells do not matter."""
    exe = Path(sys.executable).with_name("lightmem2")
    if exe.exists():  # this install's console script: it has the hook command imported above
        return f"{shlex.quote(str(exe))} {HOOK_COMMAND} {host} {event}"
    return f"{shlex.quote(sys.executable)} -m lightmem_plugin.hooks {host} {event}"


def is_ours(command: object, host: str) -> bool:
    """True for a hook command that lightmem2 installed for ``host``."""
    if not isinstance(command, str):
        return False
    return f" hook {host} " in command or f"lightmem_plugin.hooks {host} " in command


def _strip(groups: list[Any], host: str) -> list[Any]:
    """Matcher groups without our commands; groups left empty by that are dropped."""
    out: list[Any] = []
    for group in groups:
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            out.append(group)
            continue
        kept = [h for h in group["hooks"] if not (isinstance(h, dict) and is_ours(h.get("command"), host))]
        if kept:
            out.append({**group, "hooks": kept} if len(kept) != len(group["hooks"]) else group)
        elif not group["hooks"]:
            out.append(group)
    return out


def remove(data: dict[str, Any], host: str) -> dict[str, Any]:
    """``data`` without our hook entries (events and ``hooks`` left empty by that are dropped)."""
    out = copy.deepcopy(data)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for event in list(hooks):
        if isinstance(hooks[event], list):
            groups = _strip(hooks[event], host)
            if groups:
                hooks[event] = groups
            elif hooks[event]:
                del hooks[event]
    if not hooks:
        del out["hooks"]
    return out


def add(data: dict[str, Any], host: str, events: tuple[str, ...] = tuple(EVENTS)) -> dict[str, Any]:
    """``data`` with exactly one of our entries per event in ``events``, after the user's own.

    Our entries for any other event (written by an older install) are removed.

    Keys keep their places (``hooks`` and each event), so installing twice writes the same bytes.
    """
    out = copy.deepcopy(data)
    hooks = out.get("hooks", {})
    if not isinstance(hooks, dict):
        raise TypeError("'hooks' is not an object")
    new: dict[str, Any] = {
        event: _strip(groups, host) if isinstance(groups, list) else groups for event, groups in hooks.items()
    }
    for event in events:
        matcher, timeout = EVENTS[event]
        entry: dict[str, Any] = {"type": "command", "command": hook_command(host, event), "timeout": timeout}
        group: dict[str, Any] = {"matcher": matcher, "hooks": [entry]} if matcher else {"hooks": [entry]}
        existing = new.get(event)
        new[event] = [*existing, group] if isinstance(existing, list) else [group]
    out["hooks"] = new
    return out


def load_file(path: Path) -> dict[str, Any]:
    """A settings.json / hooks.json holding a ``hooks`` object ({} when absent or empty)."""
    text = _edits.read_text(path)
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as err:
        raise UsageError(f"{path} is not valid JSON ({err}); fix it and rerun the install") from None
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise UsageError(f'{path}: expected a JSON object with an object "hooks"; fix it and rerun')
    return data
