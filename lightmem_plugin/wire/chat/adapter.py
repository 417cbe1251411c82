"""Chat-form messages (the Python API, the OpenClaw sidecar) to the neutral model and back, incrementally.

Why incremental: hosts only append. A session's 200th call carries the 199 messages of the calls
before it, and decoding or encoding them again on every call would make the work per call grow with
the session, not with what is new (DESIGN I6). Messages the previous call already decoded are reused
(compared by identity first, content second: a host may rebuild its dicts), and messages the
transformer chain handed on unchanged are encoded once (:class:`~lightmem_plugin.codecs.memo.PerObject`).
"""

from __future__ import annotations

from typing import Any

from ...codecs.memo import PerObject
from ...model import Message, Request
from . import codec as openai_chat


class ChatAdapter:
    """One session's decoder and encoder of OpenAI chat-form requests."""

    def __init__(self) -> None:
        self._chat_in: list[dict[str, Any]] = []
        self._decoded: list[Message] = []
        self._encoded: PerObject[Message, dict[str, Any]] = PerObject(openai_chat.message_to_chat)

    def decode(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Request:
        """The request in the neutral model; raises :class:`~.errors.PayloadError` naming the message
        it could not read (the adapter then starts over: nothing half-decoded is kept)."""
        prev = self._chat_in
        n = 0
        limit = min(len(prev), len(messages))
        while n < limit and (messages[n] is prev[n] or messages[n] == prev[n]):
            n += 1
        try:
            fresh = [openai_chat.chat_to_message(m, f"messages[{i}]") for i, m in enumerate(messages[n:], n)]
            top = openai_chat.decode_request(
                {"messages": [], "tools": tools} if tools is not None else {"messages": []}
            )
        except Exception:
            self._chat_in, self._decoded = [], []
            raise
        self._chat_in, self._decoded = list(messages), self._decoded[:n] + fresh
        return Request(list(self._decoded), top.tools, top.extra, top.hints)

    def encode(self, req: Request) -> dict[str, Any]:
        """The chat-form request body; a message that is the same object as last call keeps its dict."""
        try:
            out = self._encoded.map(req.messages)
        except Exception:
            self._encoded.forget()
            for i, msg in enumerate(req.messages):  # raise again, naming the message that failed
                openai_chat.message_to_chat(msg, f"messages[{i}]")
            raise
        payload = openai_chat.encode_request(Request([], req.tools, req.extra, req.hints))
        payload["messages"] = out
        return payload

    @staticmethod
    def decode_turn(turn: list[dict[str, Any]]) -> list[Message]:
        """The messages of one turn a host ran itself (OpenClaw), each decoded afresh."""
        return [openai_chat.chat_to_message(m, f"turn[{i}]") for i, m in enumerate(turn)]
