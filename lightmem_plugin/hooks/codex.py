"""Codex CLI hooks (verified on 0.169.0; hooks live in ``~/.codex/hooks.json``, same JSON shapes as
Claude Code's, and run once trusted through ``/hooks`` or ``--dangerously-bypass-hook-trust``).

- ``PostToolUse``: Codex hands the tool output as one string (``exec_command`` arrives as tool
  ``Bash``). When it is large, the hook answers ``{"decision": "block", "reason": REDUCED}`` and
  Codex sends REDUCED to the model as the whole ``function_call_output`` in place of the original.
  Output that is not a string is left alone.
- ``UserPromptSubmit``: ``/lightmem2 ...`` is answered with ``decision: block``; the turn ends with
  no model call. (``codex exec`` 0.169 prints only "hook: UserPromptSubmit Blocked"; the text shows
  in the interactive TUI.)
- ``SessionStart``: as for Claude Code (transcript path, proxy running).
"""

from __future__ import annotations

from typing import Any

from . import _common
from .claude_code import session_start, user_prompt_submit


def post_tool_use(payload: dict[str, Any]) -> dict[str, Any] | None:
    """``decision: block`` with the reduced output for a large string output; None otherwise."""
    response = payload.get("tool_response")
    if not isinstance(response, str) or not response:
        return None
    session = _common.reducing_session(payload)
    reduced = session.ingest_tool_result(_common.call_id(payload), response)
    if reduced == response:
        return None
    return _common.block(reduced)


def handle(event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to one Codex hook event (None: print nothing)."""
    if event == "PostToolUse":
        return post_tool_use(payload)
    if event == "UserPromptSubmit":
        return user_prompt_submit(payload)
    if event == "SessionStart":
        return session_start(payload, host="codex")
    return None
