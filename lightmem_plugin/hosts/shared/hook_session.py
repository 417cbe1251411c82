"""What the Claude Code and Codex hooks share: chat commands, the reducing session, payload fields.

Why a fresh plugin per hook call: each hook is its own short process. Reductions are pure functions
of (content, settings) and originals go to the shared content-addressed registry, so the stub a hook
writes is the one the proxy would write for the same output (DESIGN "one reduction per output,
whoever sees it first"), and the proxy leaves text that already carries a stub alone.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ...faults import open_sink

if TYPE_CHECKING:
    from ...hookspec import LineRunner
    from ...pipeline import Session
    from ...store.session_state import StateStore

COMMAND_RE = re.compile(r"^\s*/lightmem2(?::lightmem2)?(?=\s|$)")  # plugin commands are namespaced


def is_command(prompt: object) -> bool:
    """True for a prompt that is a ``/lightmem2 ...`` chat command."""
    return isinstance(prompt, str) and COMMAND_RE.match(prompt) is not None


NOT_WIRED = (
    "lightmem2: chat commands are not wired into this hook entry; run `lightmem2 {line}` in a terminal "
    "(the hooks `lightmem2 install` writes answer them)"
)


def command_reply(prompt: str, run_line: LineRunner | None) -> str:
    """The text ``/lightmem2 ...`` answers with (same code and text as the CLI), never empty.

    ``run_line`` is the command table's runner, handed down by the entry point (``lightmem2 hook``, ``python
    -m lightmem_plugin.hooks``), which imports the command table only when a prompt is a command.
    """
    m = COMMAND_RE.match(prompt)
    rest = prompt[m.end() :] if m else prompt
    if run_line is None:
        return NOT_WIRED.format(line=rest.strip() or "status")
    text, _code = run_line("/lightmem2 " + rest.strip())
    return text.rstrip("\n") or "lightmem2: done (no output)"


def block(reason: str) -> dict[str, Any]:
    """The hook answer that stops the host there and shows ``reason`` (both hosts read this shape)."""
    return {"decision": "block", "reason": reason}


def session_id(payload: dict[str, Any]) -> str:
    """The host's session id (the proxy finds the same id on the wire), or a fixed fallback."""
    value = payload.get("session_id")
    return value.strip()[:200] if isinstance(value, str) and value.strip() else "hook-session"


def call_id(payload: dict[str, Any]) -> str:
    """The tool call id of a PostToolUse payload."""
    value = payload.get("tool_use_id") or payload.get("tool_call_id") or payload.get("call_id")
    return str(value) if value else "tool"


def reducing_session(payload: dict[str, Any]) -> Session:
    """A pipeline session for this payload: the user's config, no ledger (the proxy keeps that), the
    fault sink, so a pass that fails inside a hook shows in ``doctor`` and ``status``, and the hooks'
    own persisted session state (:func:`hook_states`)."""
    from ...pipeline import LightMem  # lazy: ~0.4 s that UserPromptSubmit and SessionStart do not need

    return LightMem(faults=open_sink(), states=hook_states()).session(session_id(payload))


HOOK_STATE_PREFIX = "hook:"  # one of session_state.WRITER_PREFIXES


def hook_states() -> StateStore | None:
    """The session store, with the hooks' decisions kept under ``hook:<session id>``; None when it
    cannot be opened (the hook then reduces without memory, as before).

    Why persisted: every hook call is its own process, and what an output becomes can depend on what
    the session's earlier outputs were (a repeat becomes a reference to its first call). Measured on
    Claude Code 2.1.332 before this: a listing run twice reached the model twice in full, the second
    never a reference. Why a key of their own: the proxy serves the same session id from memory and
    writes its own rows; two writers of one session's insert-only maps would overwrite each other's
    entries, and the hooks' decisions (on the originals) are not the proxy's (on what it forwards).
    """
    import sqlite3  # lazy: the store pulls in the config the light events skip

    from ...errors import LightMemError
    from ...store.session_state import StateStore

    try:
        return StateStore.default(HOOK_STATE_PREFIX)
    except (OSError, sqlite3.Error, LightMemError):
        return None
