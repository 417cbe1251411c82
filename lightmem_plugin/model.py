"""Neutral request model shared by every codec, pass and host adapter.

Why a neutral model: the pipeline must treat an Anthropic ``tool_result`` block, an OpenAI Chat
``role: "tool"`` message and a Responses ``function_call_output`` item alike. Codecs in
``lightmem_plugin.codecs`` convert each wire format to this model and back *losslessly*: every field
a codec does not understand travels in ``extra`` (per part, per message, per request) and is written
back unchanged, so ``encode(decode(payload)) == payload`` (JSON-equal).

The model is deliberately small: a request is a list of messages, a message is a list of parts.
Codec-specific layout hints (for example "content was a plain string") live in ``hints`` so the
pipeline never needs to know them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "developer", "user", "assistant", "tool"]
JSON = dict[str, Any]

CALL_ID_HINTS = ("result_content",)
"""Message hints keyed by tool call id (Anthropic: each tool_result's content layout): a step that
respells call ids (:mod:`~lightmem_plugin.prefix.call_ids`) renames their keys with them."""
LISTED_TOOLS = "listed_tools"
"""Request hint: names of tools the host lists inside the input rather than in ``tools`` (Codex's code
mode sends its JavaScript ``exec`` tool in an ``additional_tools`` item); the stubs' recovery hint
depends on them (:func:`~.reduction.base.prefers_shell`)."""
SERVER_CALL_IDS = "server_call_ids"
"""A request hint: the call ids are the provider's own records, never respelled (the Responses API:
an output may answer a call the provider stored from an earlier response)."""


@dataclass
class TextPart:
    """Plain text the model reads or wrote."""

    text: str
    extra: JSON = field(default_factory=dict)


@dataclass
class ImagePart:
    """An image, inline (base64 ``data`` with ``media_type``) or by ``url``."""

    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    extra: JSON = field(default_factory=dict)


@dataclass
class ToolCallPart:
    """A tool call the model made; ``arguments`` is the JSON text exactly as sent."""

    id: str
    name: str
    arguments: str
    extra: JSON = field(default_factory=dict)


@dataclass
class ToolResultPart:
    """The output of a tool call, as the model will read it."""

    tool_call_id: str
    content: list[TextPart | ImagePart | OpaquePart]
    is_error: bool | None = None
    extra: JSON = field(default_factory=dict)

    def text(self) -> str:
        """The text of the result (text parts joined), for passes that work on text."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass
class OpaquePart:
    """A block we carry through untouched (thinking, redacted thinking, server tools, ...)."""

    raw: JSON


Part = TextPart | ImagePart | ToolCallPart | ToolResultPart | OpaquePart


@dataclass
class Message:
    """One message: a role and its parts, plus whatever else the wire format carried."""

    role: Role
    parts: list[Part] = field(default_factory=list)
    extra: JSON = field(default_factory=dict)
    hints: JSON = field(default_factory=dict)

    def text(self) -> str:
        """Concatenated text of the message's text parts."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))


@dataclass
class Request:
    """A model request: messages, tool definitions and the remaining top-level fields."""

    messages: list[Message] = field(default_factory=list)
    tools: list[JSON] = field(default_factory=list)
    extra: JSON = field(default_factory=dict)
    hints: JSON = field(default_factory=dict)


_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


def alnum_id(call_id: str) -> str:
    """``call_id`` in letters and digits only: how OpenClaw respells ids for most providers (its
    "strict" mode: ``toolu_8_0`` -> ``toolu80``), so the form two spellings of one id share."""
    return _NOT_ALNUM.sub("", call_id)
