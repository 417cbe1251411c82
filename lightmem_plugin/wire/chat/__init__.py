"""OpenAI Chat Completions (``POST /v1/chat/completions``), as OpenClaw's custom providers send it: the
codec (:mod:`.codec`, also the chat form of the Python API and the sidecar, with its incremental
:mod:`.adapter`), the answer rewriter (:mod:`.stream`) and :data:`WIRE`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..base import RealUsage, WireApi, WireRoute, as_int, cache_key_hint, message_list, openai_error
from . import codec
from .stream import ChatStream, restore_chat


def usage(raw: Mapping[str, Any]) -> RealUsage:
    details = raw.get("prompt_tokens_details")
    cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else None
    return RealUsage(as_int(raw.get("prompt_tokens")), cached, None, as_int(raw.get("completion_tokens")))


def owns_usage(raw: Mapping[str, Any]) -> bool:
    return "prompt_tokens" in raw


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
    message_list,
    cache_key_hint,
    "openai",
    routes=(WireRoute("/v1/chat/completions", "openai", "/chat/completions", named=True),),
)
