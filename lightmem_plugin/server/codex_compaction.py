"""What the proxy does when Codex CLI compacts anyway: archive at its summarising request, and the
note in its summary message on every request after it (issue #42 item 3).

Why in the proxy: Codex has no hook around its compaction, but summarises through the provider it is
configured with, so both edges cross ``POST /v1/responses`` (:mod:`..wire.responses.codex_compaction`
tells them):

- at the **summarising request** the history holds every tool output whole (lightmem2 reduces
  Codex's outputs on the wire only), so each one is archived, the conversation as one document, all
  indexed for ``lightmem2 search --session ID``, and the record of that whole history becomes the
  session's newest snapshot (the same steps as OpenClaw's, :mod:`.sidecar_compaction`). The note for
  the context after it is rendered then, from that history. The request itself goes on through the
  session's pipeline like any other: the summariser reads what the agent read (outputs reduced on
  arrival, their stubs naming keys the summary may quote), and its prefix is the one the agent's
  requests already cached;
- on **every request that carries Codex's summary message** the note is appended to the summary,
  kept per summary (:class:`~..store.compaction_notes.CompactionNotes`, the summary's hash), so it is
  the same bytes each time and every later request extends the first one after the compaction.

The note names command lines (``lightmem2 search``, ``lightmem2 recover``), as the stubs on Codex
do: in code mode the model's script runs commands, not our MCP tool. When the summarising request
was not seen by this process (a restart in between, another gateway process), the note is built
from the session's newest record, without the conversation's key.

Fail-open: the proxy runs :meth:`CodexCompactions.prepare` in a guard; on any failure the host's
request goes on as it came (counted, and shown by ``status``/``doctor`` under ``host_compaction``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..eviction.compaction_note import compaction_note
from ..metering.accounting import HOST_COMPACTION, SUMMARISING_CALL
from ..wire.responses import codex_compaction as codex
from .sidecar_compaction import compaction_id, latest_record, notes_of, precompact

if TYPE_CHECKING:
    from ..pipeline import LightMem

JSON = dict[str, Any]
SHELL = True
"""The note names command lines (see the module's docstring)."""
HOST = "codex"
SUMMARISING = f"{HOST_COMPACTION}: Codex's {SUMMARISING_CALL} (the history archived for search)"
"""What the ledger row of the summarising request says (its ``break_reason``)."""
AFTER = f"{HOST_COMPACTION}: Codex's summary replaced the history (lightmem2's note added to it)"
"""What the ledger row of the first request after a compaction says."""
MAX_PENDING = 1024
"""Notes held in memory, rendered (waiting for their summary) or kept (oldest dropped beyond it: a
pending one's summary never came; a kept one is read from the store again)."""


class CodexCompactions:
    """The notes of one process's Codex sessions: rendered at a summarising request (``pending``),
    kept per summary once it comes (``known`` holds them in memory too, read once per process)."""

    def __init__(self, plugin: LightMem) -> None:
        self.plugin = plugin
        self.pending: dict[str, str] = {}
        self.known: dict[tuple[str, str], str] = {}

    def prepare(self, session: str, payload: JSON) -> tuple[JSON | None, str]:
        """(the request to send instead, None: the host's as it came; what the call is in Codex's
        compaction, for its ledger row: :data:`SUMMARISING`, :data:`AFTER`, or "")."""
        items = payload.get("input")
        if not isinstance(items, list):
            return None, ""
        event = ""
        changed: list[Any] | None = None
        for n in codex.summaries(payload):
            note, new = self._note(session, codex.summary_of(items[n]))
            event = AFTER if new else event
            changed = changed if changed is not None else list(items)
            changed[n] = codex.with_note(items[n], note)
        if codex.is_compaction_request(payload):
            self._archive(session, items[:-1])
            event = SUMMARISING
        return (None if changed is None else {**payload, "input": changed}), event

    def _archive(self, session: str, items: list[Any]) -> None:
        """Archive the history Codex is about to summarise; render the note for the summary after it."""
        done = precompact(self.plugin, session, codex.history(items), host="Codex")
        conversation = done.get("conversation")
        record = latest_record(self.plugin, session)
        self.pending[session] = compaction_note(
            record, session, conversation if isinstance(conversation, str) else None, SHELL
        )
        while len(self.pending) > MAX_PENDING:
            self.pending.pop(next(iter(self.pending)))

    def _note(self, session: str, summary: str) -> tuple[str, bool]:
        """(the note kept for this summary, True when it was kept just now: the first request after
        the compaction)."""
        cid = compaction_id(summary, HOST)
        found = self.known.get((session, cid))
        if found is not None:
            return found, False
        notes = notes_of(self.plugin)
        note = notes.get(session, cid)
        new = note is None
        if note is None:
            rendered = self.pending.pop(session, None)
            if rendered is None:
                rendered = compaction_note(latest_record(self.plugin, session), session, None, SHELL)
            note = notes.put(session, cid, rendered)
        self.known[(session, cid)] = note
        while len(self.known) > MAX_PENDING:
            self.known.pop(next(iter(self.known)))
        return note, new
