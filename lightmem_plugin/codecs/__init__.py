"""Wire-format codecs: provider request payloads <-> the neutral model in :mod:`lightmem_plugin.model`.

Each codec module offers ``decode_request(payload) -> Request`` and ``encode_request(req) -> dict`` with
``encode_request(decode_request(p)) == p`` (JSON-equal) for every payload it accepts; a payload it cannot
read raises :class:`~lightmem_plugin.errors.PayloadError` and nothing else. ``openai_chat`` also converts
single chat-form messages (``chat_to_message`` / ``message_to_chat``) for the pipeline's Python API.
"""

from __future__ import annotations

from . import anthropic, openai_chat, openai_responses

__all__ = ["anthropic", "openai_chat", "openai_responses"]
