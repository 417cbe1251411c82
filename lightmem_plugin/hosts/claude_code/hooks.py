"""Claude Code hooks (verified on 2.1.332; ``updatedToolOutput`` exists since 2.1.121).

- ``PostToolUse``: a large tool output is reduced once and handed back as
  ``hookSpecificOutput.updatedToolOutput`` in the tool's own shape (Bash ``{stdout, stderr, ...}``
  with only the long strings replaced), so the model and the transcript see the reduced text.
  Tools whose output Claude Code re-formats before the model sees it (Read numbers every line) are
  left to the proxy, which reduces the formatted text on the wire; a reduced Read would renumber
  the lines after the stub.
- ``UserPromptSubmit``: ``/lightmem2 ...`` is answered with ``{"decision": "block", "reason": TEXT}``:
  Claude Code shows TEXT and makes no model call.
- ``SessionStart``: records the transcript path and makes sure ``lightmem2 serve`` runs (traffic
  reaches it through ``ANTHROPIC_BASE_URL``). After a ``compact`` or ``clear`` the outputs before it
  are gone from what the model reads, so later outputs are compared only with what came since.
  After a ``compact`` it answers ``additionalContext``: the session record and how to search and
  recover what the compaction dropped (:mod:`.compaction`).
- ``PreCompact``: before Claude Code summarises the history, every tool output it holds whole and
  the conversation itself are archived and indexed for search (:mod:`.compaction`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...hookspec import Answer, HostHooks
from ...reduction.dedup import scope_of
from ...reduction.kinds import ToolCall
from ..shared import hook_session as _common

if TYPE_CHECKING:
    from ...config import Config
    from ...hookspec import LineRunner

MIN_UPDATED_OUTPUT = (2, 1, 121)
VERIFIED = (2, 1, 332)
# tool name -> the string fields of its output that the model reads as they are
TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "Bash": ("stdout", "stderr"),
    "Grep": ("content",),
    "WebFetch": ("result",),
}

HOST_SAVED = ("persistedOutputPath", "rawOutputPath")
"""Fields of a tool result Claude Code saved to a file (over 30,000 chars): the model gets its 2 KB
preview, and the hook only its first 30,000 chars (cut mid-line)."""

Reducer = Callable[[str, str], str]
ENV_BASE_URL = "ANTHROPIC_BASE_URL"  # where Claude Code sends its requests (the installer points it at serve)
COMPACTED = "compact"
HISTORY_DROPPED = (COMPACTED, "clear")
"""SessionStart sources after which the model no longer reads the session's earlier outputs."""


def supports_updated_tool_output(version: tuple[int, int, int]) -> bool:
    """True when this Claude Code version honours ``updatedToolOutput`` (for ``doctor``)."""
    return version >= MIN_UPDATED_OUTPUT


def _part(call_id: str, n: int, name: str) -> str:
    """The id a part of a tool's output is reduced under: the call's own id for the first (stdout, the
    first block), ``id#name`` for the others, as the proxy names the parts of a tool result. A repeat
    is a reference to the id its first copy was reduced under, so it must be one the model knows
    (``toolu_1:stdout`` is not)."""
    return f"{call_id}#{name}" if n else call_id


def _reduce_blocks(blocks: list[Any], reduce: Reducer, key: str) -> list[Any]:
    out: list[Any] = []
    for i, block in enumerate(blocks):
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            text = reduce(_part(key, i, str(i)), block["text"])
            out.append(block if text == block["text"] else {**block, "text": text})
        else:
            out.append(block)
    return out


def reduce_response(tool: str, response: Any, reduce: Reducer, key: str) -> Any:
    """``response`` with its model-visible long strings reduced; the same object when none changed."""
    if tool.startswith("mcp__"):
        if isinstance(response, str):
            text = reduce(key, response)
            return response if text == response else text
        if isinstance(response, list):
            blocks = _reduce_blocks(response, reduce, key)
            return response if all(a is b for a, b in zip(blocks, response, strict=True)) else blocks
        return response
    fields = TEXT_FIELDS.get(tool)
    if not fields or not isinstance(response, dict) or response.get("isImage"):
        return response
    if any(isinstance(response.get(k), str) for k in HOST_SAVED):
        # the host saved the whole output and shows the model a preview of it: left as the host cut it.
        # Measured before (2.1.332): the hook replaced that preview with its reduction of the 30,000-char
        # cut, archived the cut as if it were the output, and status counted it as our saving.
        return response
    changed: dict[str, str] = {}
    for n, name in enumerate(fields):
        value = response.get(name)
        if isinstance(value, str) and value:
            text = reduce(_part(key, n, name), value)
            if text != value:
                changed[name] = text
    return {**response, **changed} if changed else response


def _through_our_proxy(config: Config) -> bool:
    """True when Claude Code sends its requests to the configured ``serve`` (the ``env`` of its
    settings, which its hooks inherit): the proxy then respells call ids (Anthropic wire)."""
    from ..shared import serve_ctl

    sent_to = os.environ.get(ENV_BASE_URL, "").rstrip("/")
    return bool(sent_to) and sent_to == serve_ctl.base_url(config)


def post_tool_use(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The updated output for a large tool result, None to leave it as it is."""
    tool = payload.get("tool_name")
    response = payload.get("tool_response")
    if not isinstance(tool, str) or response is None:
        return None
    session = _common.reducing_session(payload)
    from ..shared.transcripts import history  # lazy, as in session_start

    dropped = history(_common.session_id(payload))
    if dropped:  # after a compact or a clear, no repeat refers to an output from before it
        session.repeats.scope = scope_of(f"history-{dropped}")
    # the model reads the hook's stub inside Claude Code, which has Bash but lists our recover tool only
    # when the MCP server is registered: the shell command works either way (recoverHint "auto")
    session.prefer_shell = True
    session.proxy_respells = _through_our_proxy(session.cfg)
    tool_input = payload.get("tool_input")
    call = ToolCall(tool, json.dumps(tool_input) if isinstance(tool_input, dict) else "")

    def reduce(key: str, text: str) -> str:
        return session.ingest_tool_result(key, text, call)  # the command tells the output's kind

    new = reduce_response(tool, response, reduce, _common.call_id(payload))
    if new is response:
        return None
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": new}}


def user_prompt_submit(payload: dict[str, Any], run_line: LineRunner | None = None) -> dict[str, Any] | None:
    """Answer ``/lightmem2 ...`` here with ``run_line``; any other prompt goes to the model unchanged."""
    prompt = payload.get("prompt")
    if not isinstance(prompt, str) or not _common.is_command(prompt):
        return None
    return _common.block(_common.command_reply(prompt, run_line))


def session_start(payload: dict[str, Any], host: str = "claude-code") -> dict[str, Any] | None:
    """Remember the transcript; start the proxy if it is not running. Prints nothing, except after
    Claude Code compacted: then the note for the new context (:func:`.compaction.after_compaction`)."""
    # lazy: config (pydantic) and the process helpers; the other events stay light
    from ...config import config_in_force
    from ..shared import serve_ctl, transcripts

    path = payload.get("transcript_path")
    if isinstance(path, str) and path:
        dropped = payload.get("source") in HISTORY_DROPPED
        transcripts.record(_common.session_id(payload), host, path, dropped)
    answer = None
    if host == "claude-code" and payload.get("source") == COMPACTED:
        from ...faults import open_sink, safecall
        from .compaction import after_compaction

        # before the proxy check, which may wait for a start: the note is what this event is for
        answer = safecall("claude-code compaction note", lambda: after_compaction(payload), None, open_sink())
    serve_ctl.ensure_running(config_in_force()[0])  # a typo in the file: the last good one
    return answer


def pre_compact(payload: dict[str, Any]) -> None:
    """Archive what the compaction is about to summarise away (:func:`.compaction.pre_compact`)."""
    from .compaction import pre_compact as archive_before

    archive_before(payload)


REVIVE_WAIT_S = 3.0


def revive_proxy() -> str:
    """Start ``lightmem2 serve`` again if it died since SessionStart; what ``ensure_running`` says.

    Why in the events of every turn: the host sends its next model request right after a prompt or a
    tool call, to the proxy it was wired to; a proxy that died (killed, out of memory) is back before
    that request, instead of the session failing until the next SessionStart (DESIGN 3, fail-open
    includes our process). A running proxy costs one loopback ``/healthz`` (about a millisecond).
    Only a proxy a hook started (its pid file exists) is brought back: one the user runs themselves,
    or none at all, is theirs to manage."""
    from ..shared import serve_ctl

    if not serve_ctl.pid_file().exists():
        return "not managed"
    from ...config import config_in_force

    return serve_ctl.ensure_running(config_in_force()[0], wait_s=REVIVE_WAIT_S)


def revive_guarded() -> str:
    """:func:`revive_proxy`, failing open: a proxy that cannot be revived never costs the event its
    answer (the command, the reduction); the failure goes to the fault sink."""
    from ...faults import open_sink, safecall

    return safecall("revive proxy", revive_proxy, "failed", open_sink())


class ClaudeCodeHooks(HostHooks):
    """Claude Code's events; a turn's events first bring back a proxy that died (:func:`revive_guarded`)."""

    host = "claude-code"

    def post_tool_use(self, payload: dict[str, Any], run_line: LineRunner | None) -> Answer:
        revive_guarded()
        return post_tool_use(payload)

    def user_prompt_submit(self, payload: dict[str, Any], run_line: LineRunner | None) -> Answer:
        revive_guarded()
        return user_prompt_submit(payload, run_line)

    def session_start(self, payload: dict[str, Any], run_line: LineRunner | None) -> Answer:
        return session_start(payload, self.host)

    def pre_compact(self, payload: dict[str, Any], run_line: LineRunner | None) -> Answer:
        pre_compact(payload)
        return None


HOOKS = ClaudeCodeHooks()
handle = HOOKS.handle
"""The answer to one Claude Code hook event (None: print nothing); ``run_line`` answers
``/lightmem2 ...`` prompts."""
