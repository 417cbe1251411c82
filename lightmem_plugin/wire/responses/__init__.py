"""OpenAI Responses (``POST /v1/responses``), the only API Codex CLI speaks: the codec (:mod:`.codec`),
the answer rewriter (:mod:`.stream`) and :data:`WIRE`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..base import RealUsage, WireApi, WireRoute, as_int, cache_key_hint, openai_error
from . import codec
from .stream import ResponsesStream, restore_responses


def usage(raw: Mapping[str, Any]) -> RealUsage:
    details = raw.get("input_tokens_details")
    cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else None
    return RealUsage(as_int(raw.get("input_tokens")), cached, None, as_int(raw.get("output_tokens")))


def owns_usage(raw: Mapping[str, Any]) -> bool:
    return "input_tokens" in raw and not (
        "cache_read_input_tokens" in raw or "cache_creation_input_tokens" in raw
    )


def messages(payload: Mapping[str, Any]) -> list[Any] | None:
    """``input`` items; a bare string input is one user message."""
    items = payload.get("input")
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    return items if isinstance(items, list) and items else None


WIRE = WireApi(
    "responses",
    "OpenAI Responses",
    codec.decode_request,
    codec.encode_request,
    ResponsesStream,
    restore_responses,
    usage,
    owns_usage,
    openai_error,
    messages,
    cache_key_hint,
    "openai",
    routes=(WireRoute("/v1/responses", "openai", "/responses", named=True),),
)
