"""``lightmem2 install claude-code [--uninstall] [--project DIR]``: wire lightmem2 into Claude Code.

What it edits (user scope ``~/.claude/``, or ``DIR/.claude/`` with ``--project``):

- ``settings.json`` (with ``--project``: ``settings.local.json``, the project's personal file, because
  what goes in names this machine: the hook's absolute executable path and the proxy's loopback URL,
  which a ``settings.json`` shared with the team would hand to everyone): ``env.ANTHROPIC_BASE_URL`` ->
  the ``lightmem2 serve`` proxy, and the ``SessionStart``, ``UserPromptSubmit`` and ``PostToolUse``
  hooks (``lightmem2 hook claude-code EVENT``), after any hooks of the user's own;
- ``commands/lightmem2.md``: the ``/lightmem2`` command, so it completes in the prompt (the
  ``UserPromptSubmit`` hook answers it without a model call; without the hook it runs the CLI).

If ``settings.json`` already sent Claude Code to another base URL (a gateway), that URL becomes the
proxy's Anthropic upstream in lightmem2's config, so requests still end up where they did. Every
edit is backed up and undone by ``--uninstall`` (see :mod:`._edits`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...config import load_config
from ...errors import UsageError
from ..shared import edits as _edits
from ..shared import hooks_json as _hooks_json
from ..shared import upstream as _upstream
from ..shared.serve_ctl import base_url
from .hooks import ENV_BASE_URL

HOST = "claude-code"
COMMAND_MD = """\
---
description: lightmem2 status, report, doctor, mode, recover (answered locally, no model call)
argument-hint: status | report | doctor | mode [conservative|normal|aggressive] | recover KEY [--lines A:B]
allowed-tools: Bash(lightmem2:*)
---
!`lightmem2 $ARGUMENTS`

Show the output above to the user exactly as it is, with no commentary.
"""


def claude_dir(project: str | None) -> Path:
    """``~/.claude`` or ``DIR/.claude``."""
    if project is None:
        return Path.home() / ".claude"
    root = Path(project).expanduser()
    if not root.is_dir():
        raise UsageError(f'--project "{project}" is not a directory; pass an existing project folder')
    return root.resolve() / ".claude"


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def undo_settings(text: str, facts: dict[str, Any]) -> str | None:
    """settings.json without our hooks and with the base URL the user had (surgical uninstall)."""
    data = _hooks_json.remove(json.loads(text), HOST)
    env = data.get("env")
    if isinstance(env, dict) and env.get(ENV_BASE_URL) == facts.get("proxy"):
        previous = facts.get("previous_base_url")
        if isinstance(previous, str):
            env[ENV_BASE_URL] = previous
        else:
            env.pop(ENV_BASE_URL, None)
            if not env and not facts.get("had_env"):
                del data["env"]
    return _dump(data)


def settings_file(folder: Path, project: str | None) -> Path:
    """The settings file lightmem2 edits: the user's ``settings.json``, or a project's personal one."""
    return folder / ("settings.local.json" if project else "settings.json")


def add(project: str | None) -> str:
    """Add lightmem2 to Claude Code's settings; the report of every change."""
    folder = claude_dir(project)
    settings = settings_file(folder, project)
    data = _hooks_json.load_file(settings)
    proxy = base_url(load_config())
    env = data.get("env")
    if env is not None and not isinstance(env, dict):
        raise UsageError(f'{settings}: "env" must be an object; fix it and rerun')
    previous = (env or {}).get(ENV_BASE_URL)
    facts: dict[str, Any] = {"proxy": proxy, "had_env": env is not None}
    reports: list[str] = []
    if isinstance(previous, str) and previous.rstrip("/") != proxy:
        facts["previous_base_url"] = previous
        reports.append(_upstream.set_upstream(HOST, ["anthropic"], previous.rstrip("/")))
    data = _hooks_json.add(data, HOST)
    data["env"] = {**(env or {}), ENV_BASE_URL: proxy}
    reports.append(_edits.apply(settings, _dump(data), facts))
    reports.append(_edits.apply(folder / "commands" / "lightmem2.md", COMMAND_MD, {}))
    notes = (
        f"Claude Code now sends its requests to {proxy} (lightmem2 serve; the SessionStart hook starts it, "
        "or run `lightmem2 serve`). Check with `lightmem2 doctor`; undo with "
        f"`lightmem2 install claude-code --uninstall{' --project ' + project if project else ''}`."
    )
    return "\n".join(r.rstrip("\n") for r in reports if r) + "\n" + notes


def remove(project: str | None) -> str:
    """Undo :func:`add`; the report of every change."""
    folder = claude_dir(project)
    settings = settings_file(folder, project)
    reports = [
        _edits.restore(folder / "commands" / "lightmem2.md", lambda text, facts: text),
        _edits.restore(settings, undo_settings),
    ]
    older = folder / "settings.json"  # where --project installs wrote before they used settings.local.json
    if older != settings and _edits.load_state(older) is not None:
        reports.append(_edits.restore(older, undo_settings))
    reports.append(_upstream.restore(HOST))
    return "\n".join(r.rstrip("\n") for r in reports if r)


def run(uninstall: bool = False, project: str | None = None) -> str:
    """``lightmem2 install claude-code [--uninstall] [--project DIR]``: the text to print."""
    return remove(project) if uninstall else add(project)
