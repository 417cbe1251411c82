"""Anthropic Messages (``POST /v1/messages``), as Claude Code sends it: the codec (:mod:`.codec`), the
answer rewriter (:mod:`.stream`), and what the proxy needs to know of it (:data:`WIRE`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..base import JSON, RealUsage, WireApi, WireRoute, as_int, clean_id, message_list
from . import codec
from .stream import AnthropicStream, restore_anthropic

_CLAUDE_SESSION = re.compile(r"_session_([0-9A-Za-z][0-9A-Za-z._:-]*)$")


def claude_session(user_id: object) -> str | None:
    """The session id inside Claude Code's ``metadata.user_id``, None when there is none."""
    if not isinstance(user_id, str):
        return None
    if user_id.lstrip().startswith("{"):
        try:
            obj = json.loads(user_id)
        except ValueError:
            return None
        return clean_id(obj.get("session_id")) if isinstance(obj, dict) else None
    m = _CLAUDE_SESSION.search(user_id)
    return clean_id(m.group(1)) if m else None


def usage(raw: Mapping[str, Any]) -> RealUsage:
    """Input is split in three (uncached, cache read, cache write): the total is their sum. The writes
    are split again by how long they stay (``cache_creation.ephemeral_1h_input_tokens``), which the
    bill tells apart."""
    parts = [
        as_int(raw.get(k)) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    ]
    total = sum(p or 0 for p in parts) if parts[0] is not None else None
    split = raw.get("cache_creation")
    hour = as_int(split.get("ephemeral_1h_input_tokens")) if isinstance(split, dict) else None
    return RealUsage(total, parts[1], parts[2], as_int(raw.get("output_tokens")), hour)


def owns_usage(raw: Mapping[str, Any]) -> bool:
    return "cache_read_input_tokens" in raw or "cache_creation_input_tokens" in raw


def error(kind: str, message: str) -> JSON:
    return {"type": "error", "error": {"type": kind, "message": message}}


def session_hint(payload: Mapping[str, Any]) -> str | None:
    """Claude Code names its session in ``metadata.user_id``."""
    meta = payload.get("metadata")
    return claude_session(meta.get("user_id")) if isinstance(meta, dict) else None


WIRE = WireApi(
    "anthropic",
    "Anthropic Messages",
    codec.decode_request,
    codec.encode_request,
    AnthropicStream,
    restore_anthropic,
    usage,
    owns_usage,
    error,
    message_list,
    session_hint,
    "anthropic",
    cache_model="anthropic",
    routes=(
        WireRoute("/v1/messages", "anthropic", "/v1/messages"),
        WireRoute("/v1/messages/count_tokens", "anthropic", "/v1/messages/count_tokens", transform=False),
    ),
)
