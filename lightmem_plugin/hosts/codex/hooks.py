"""Codex CLI hooks (verified on 0.169.0; hooks live in ``~/.codex/hooks.json``, same JSON shapes as
Claude Code's, and run once trusted through ``/hooks`` or ``--dangerously-bypass-hook-trust``).

- ``PostToolUse``: not installed, and answered with nothing. Codex (0.169, 0.171) turns a
  ``{"decision": "block", "reason": R}`` into a result of its own built from R alone: the model loses
  the exit code, wall time and chunk id, and in code mode reads "Script failed ... Script error: R"
  for a command that succeeded. No hook answer keeps them (``additionalContext`` only adds text;
  ``updatedMCPToolOutput`` is rejected), so Codex outputs are reduced on the wire by ``lightmem2
  serve``, the header kept byte-exact (:mod:`lightmem_plugin.reduction.envelope`).
- ``UserPromptSubmit``: ``/lightmem2 ...`` is answered with ``decision: block``; the turn ends with
  no model call. (``codex exec`` 0.169 prints only "hook: UserPromptSubmit Blocked". The interactive
  TUI takes ``/lightmem2`` for one of its own commands and rejects it before any hook runs; typed with
  a leading space, `` /lightmem2 status``, it is a prompt, the hook answers, and the TUI shows the text
  under "Blocked by hook": checked on 0.171.0.)
- ``SessionStart``: as for Claude Code (transcript path, proxy running); ``UserPromptSubmit`` also
  starts the proxy again if it died.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...hookspec import Answer, HostHooks
from ..claude_code.hooks import revive_guarded, session_start, user_prompt_submit

if TYPE_CHECKING:
    from ...hookspec import LineRunner


class CodexHooks(HostHooks):
    """Codex's events: no ``post_tool_use`` (see above: its outputs are reduced on the wire)."""

    host = "codex"

    def user_prompt_submit(self, payload: dict[str, Any], run_line: LineRunner | None) -> Answer:
        revive_guarded()  # the turn's model requests go to the proxy: bring it back if it died
        return user_prompt_submit(payload, run_line)

    def session_start(self, payload: dict[str, Any], run_line: LineRunner | None) -> Answer:
        return session_start(payload, host=self.host)


HOOKS = CodexHooks()
handle = HOOKS.handle
"""The answer to one Codex hook event (None: print nothing); ``run_line`` answers ``/lightmem2 ...``."""
