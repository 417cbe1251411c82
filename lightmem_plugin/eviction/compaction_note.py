"""The note lightmem2 puts in the first context after a host compacted: the session record, and how
to search and recover what the host summarised away.

Why: a host's compaction replaces the history with its own LLM summary, which keeps what the
summariser thought mattered. lightmem2 archived everything before it (:mod:`.compaction_archive`) and
keeps a typed record of the session (goals, decisions, task status, files touched, open errors); the
model can only use either if the new context says so, in the words of the tools it actually has.

The note is a pure function of its inputs (no clock, no random id, DESIGN I1) and bounded
(:data:`MAX_CHARS`): the host keeps it in the context from then on, re-read on every call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .record_render import RecordLevel, render

MAX_CHARS = 2400
"""The note at most, record included (the record's own budget is ~300 tokens at ``standard``)."""
LEVEL: RecordLevel = "standard"
HEAD = "[lightmem2: the host compacted the conversation before this point into a summary; nothing is lost."


def records_of(messages: Sequence[dict[str, Any]]) -> dict[RecordLevel, str]:
    """The session record of a chat-form history at every level (:func:`.session_record.standalone`:
    what ``lightmem2 resume --trace`` prints for a recorded session); {} for an empty history."""
    from .entries import of_chat  # lazy: the estimator stack is only needed when a host compacts
    from .record_store import LEVELS
    from .session_record import standalone

    turns = of_chat(list(messages))
    if not turns:
        return {}
    record = standalone(turns)
    return {level: render(record, level) for level in LEVELS}


def record_of(messages: Sequence[dict[str, Any]], level: RecordLevel = LEVEL) -> str:
    """The session record of a chat-form history, rendered at ``level`` ("" for an empty history)."""
    return records_of(messages).get(level, "")


def search_hint(session: str | None, shell: bool) -> str:
    """How to search the archive, in the form the host's model can run: the command line (a host
    without our tools, e.g. Claude Code without the MCP server) or the tool call. ``session``: the
    one to search (None: the host's tool searches every session and takes no session argument, as
    OpenClaw's does)."""
    if shell:
        return 'run: lightmem2 search "WORDS" ' + (f"--session {session}" if session else "--all")
    scope = f', session="{session}"' if session else ""
    return f'call lightmem2_search(query="WORDS"{scope})'


def recover_hint(key: str, shell: bool) -> str:
    """How to print one archived original by the key a search hit or a stub names."""
    if shell:
        return f"run: lightmem2 recover {key} [--lines A:B]"
    return f'call lightmem2_recover(key="{key}", lines="A:B")'


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit - 2)]
    return cut[: cut.rfind("\n")] + "\n…" if "\n" in cut else cut + "…"


def compaction_note(record: str, session: str | None, conversation: str | None, shell: bool) -> str:
    """The note: what happened, how to search and recover, the conversation's key, then the record.

    ``record`` is the rendered session record ("" when none is known); ``session`` the one the search
    hint names (:func:`search_hint`); ``conversation`` the key of the archived conversation before
    the compaction (None: not archived, or not known where the note is built)."""
    lines = [
        HEAD,
        "Every tool output and the conversation itself are archived. Find earlier text by words: "
        f"{search_hint(session, shell)}. Print an archived original by the key a hit or a stub names: "
        f"{recover_hint('KEY', shell)}.",
    ]
    if conversation:
        lines.append(f"The whole conversation before the compaction: {recover_hint(conversation, shell)}.]")
    else:
        lines[-1] += "]"
    head = "\n".join(lines)
    if not record.strip():
        return head
    body = "[lightmem2 session record]\n" + record.strip()
    return head + "\n" + _clip(body, MAX_CHARS - len(head) - 1)
