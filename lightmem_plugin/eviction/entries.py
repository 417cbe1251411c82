"""What the eviction package reads of a request: neutral messages, one per turn, each tool result alone.

Why a view at all: the estimator, the liveness signals and the session record number the turns of a
conversation the way a chat transcript does (a tool result is a turn of its own), while a neutral
message may hold several results (Anthropic's user message) beside text. Why neutral messages and not
chat dicts: one data model from codec to eviction (issue 15); a message that already is one turn is
used as it is, so the view costs a list, not a copy of the conversation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import Message, Part, Request, TextPart, ToolCallPart, ToolResultPart
from ..wire.chat import codec as openai_chat


@dataclass(frozen=True)
class Entries:
    """The turns of a request, the tool call id each tool turn answers, and the index of the message
    each turn came from (one message may give several turns)."""

    turns: list[Message]
    ids: list[str | None]
    owners: list[int]


def entries(req: Request) -> Entries:
    """The turns of ``req`` (see the module docstring)."""
    turns: list[Message] = []
    ids: list[str | None] = []
    owners: list[int] = []
    for n, msg in enumerate(req.messages):
        results = [p for p in msg.parts if isinstance(p, ToolResultPart)]
        if msg.role == "tool" and len(msg.parts) == 1 and results:
            turns.append(msg)  # already one turn
            ids.append(results[0].tool_call_id)
            owners.append(n)
            continue
        if msg.role != "tool" and (msg.text() or tool_calls(msg) or not results):
            turn = msg
            if results or msg.role == "developer":
                kept: list[Part] = [p for p in msg.parts if not isinstance(p, ToolResultPart)]
                turn = Message("system" if msg.role == "developer" else msg.role, kept)
            turns.append(turn)
            ids.append(None)
            owners.append(n)
        for r in results:
            turns.append(Message("tool", [r]))
            ids.append(r.tool_call_id)
            owners.append(n)
    return Entries(turns, ids, owners)


def of_chat(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """The turns of chat-form messages (a recorded transcript: ``lightmem2 resume``, tests)."""
    decoded = [openai_chat.chat_to_message(m, f"messages[{i}]") for i, m in enumerate(messages)]
    return entries(Request(decoded)).turns


def content_text(content: object) -> str:
    """The text of chat-form content: a string as it is, the text parts of a list joined by newlines
    (images and other parts left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    return ""


def turn_text(turn: Message) -> str:
    """The text of a turn: its text parts, or the output of the tool result it holds."""
    return "".join(
        p.text if isinstance(p, TextPart) else p.text()
        for p in turn.parts
        if isinstance(p, TextPart | ToolResultPart)
    )


def document_text(turn: Message) -> str:
    """The text of a turn as an archive document writes it: as :func:`turn_text`, but the blocks of a
    tool result each start a line. Why: the model reads a result's blocks apart (Claude Code's Task
    result is its report, then a block ``agentId: ...``); joined end to end, the report's last line
    and the next block made one line that no line the agent quoted matched (4d5611e5: 5 uses whose
    span a compaction's archive held, their line in no archive)."""
    out: list[str] = []
    for p in turn.parts:
        if isinstance(p, TextPart):
            out.append(p.text)
        elif isinstance(p, ToolResultPart):
            blocks = [sub.text for sub in p.content if isinstance(sub, TextPart)]
            out.append(
                "".join(
                    b if b.endswith("\n") or i == len(blocks) - 1 else b + "\n" for i, b in enumerate(blocks)
                )
            )
    return "".join(out)


def tool_calls(turn: Message) -> list[ToolCallPart]:
    """The tool calls a turn makes."""
    return [p for p in turn.parts if isinstance(p, ToolCallPart)]


def answered_call(turn: Message) -> str:
    """The id of the tool call a tool turn answers ("" for other turns)."""
    for p in turn.parts:
        if isinstance(p, ToolResultPart):
            return p.tool_call_id
    return ""


def tool_call(msg: Message, cid: str) -> ToolCallPart | None:
    """The call ``cid`` that ``msg`` makes, if it makes it."""
    return next((p for p in msg.parts if isinstance(p, ToolCallPart) and p.id == cid), None)


def tool_result(msg: Message, cid: str) -> ToolResultPart | None:
    """The result of call ``cid`` that ``msg`` holds, if it holds it."""
    return next((p for p in msg.parts if isinstance(p, ToolResultPart) and p.tool_call_id == cid), None)
