"""What a host's hook handler is: the events lightmem2 answers, and dispatch by the event's name.

Why a spec of its own: a host (Claude Code, Codex) runs ``lightmem2 hook HOST EVENT`` for the events
its installer registered. Each host's handler used to be an ``if event == ...`` chain; now it is an
object with one method per event, named after it (``PostToolUse`` -> ``post_tool_use``), as a
mitmproxy addon is, and :meth:`HostHooks.handle` finds the method by name. A host that does not answer
an event simply has no method for it. The chat runner type lives here too: the hooks and the server
(both below the command table) answer ``/lightmem2 ...`` with a runner the entry points hand down.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

LineRunner = Callable[[str], tuple[str, int]]
"""Runs a chat line such as ``/lightmem2 status``: (text to show, exit code).

Why a type and not an import: the hooks and the server (below the commands) answer chat commands, and
the command table lists the ``hook`` and ``serve`` commands; so the entry points (the CLI, the Python
API) hand the command table's runner down instead of the hooks and the server importing the table back.
"""

Answer = dict[str, Any] | None
"""The hook JSON a host reads on stdout; None: print nothing (the host goes on as if no hook ran)."""

Handler = Callable[[str, dict[str, Any], "LineRunner | None"], Answer]
"""``handle(event, payload, run_line)``: what :mod:`lightmem_plugin.hosts.hook_runtime` calls."""

HOOK_COMMAND = "hook"
"""The CLI command a host's installed hook runs (``lightmem2 hook HOST EVENT``): the installers write
it into the host's settings and the command table registers it under this name."""

EVENTS = ("PostToolUse", "UserPromptSubmit", "SessionStart", "PreCompact")
"""The host events lightmem2 answers (the installers register these; hosts send others we ignore)."""


def method_name(event: str) -> str:
    """The handler method an event is answered by: ``UserPromptSubmit`` -> ``user_prompt_submit``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


class HostHooks:
    """A host's hook handler: subclasses define a method per event they answer, named after it, each
    taking ``(payload, run_line)`` and returning the :data:`Answer`."""

    def handle(self, event: str, payload: dict[str, Any], run_line: LineRunner | None = None) -> Answer:
        """The answer to ``event``: its method's, or None for an event this host does not answer (or
        one lightmem2 never registers)."""
        if event not in EVENTS:
            return None
        method: Callable[[dict[str, Any], LineRunner | None], Answer] | None = getattr(
            self, method_name(event), None
        )
        return None if method is None else method(payload, run_line)
