"""OpenAI Chat Completions (``POST /v1/chat/completions``), as OpenClaw's custom providers send it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..codecs import openai_chat as codec
from ..server.rewrite import ChatStream, restore_chat
from .base import RealUsage, WireApi, as_int, clean_id, openai_error


def usage(raw: Mapping[str, Any]) -> RealUsage:
    details = raw.get("prompt_tokens_details")
    cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else None
    return RealUsage(as_int(raw.get("prompt_tokens")), cached, None, as_int(raw.get("completion_tokens")))


def owns_usage(raw: Mapping[str, Any]) -> bool:
    return "prompt_tokens" in raw


def messages(payload: Mapping[str, Any]) -> list[Any] | None:
    items = payload.get("messages")
    return items if isinstance(items, list) and items else None


def session_hint(payload: Mapping[str, Any]) -> str | None:
    return clean_id(payload.get("prompt_cache_key"))


WIRE = WireApi(
    "chat",
    "OpenAI Chat Completions",
    codec.decode_request,
    codec.encode_request,
    ChatStream,
    restore_chat,
    usage,
    owns_usage,
    openai_error,
    messages,
    session_hint,
    "openai",
)
