"""Which session a proxied request belongs to (DESIGN "Session identity").

Why it matters: every session has its own reduction memo, placeholder map and ledger rows, so two
requests of one conversation must land in the same session and two conversations never share one.
The host's own id wins wherever it sends one; the order is:

1. the ``x-lightmem2-session`` header (any host or script can set it);
2. Claude Code: the session inside ``metadata.user_id`` (``user_<h>_account_<a>_session_<uuid>``, or a
   JSON string with a ``session_id`` key in newer versions);
3. Codex: ``prompt_cache_key`` (Responses; also accepted on Chat Completions);
4. otherwise ``head-<hash>``: xxh3-128 of the conversation head (system/developer text plus the first
   user message). Runs of digits and hex, weekday and month names are masked before hashing, so a head
   that carries a clock or a request counter still maps every call of the conversation to one session.

A request with no messages at all has no identity (None) and is passed through untouched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import xxhash

from .. import wire
from ..wire.anthropic import claude_session as claude_session  # re-exported
from ..wire.base import clean_id

HEADER = "x-lightmem2-session"
_VOLATILE = re.compile(
    r"[0-9A-Fa-f]*[0-9][0-9A-Fa-f]*"
    r"|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun|Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\b"
)


def _text(content: Any) -> str:
    """Text of a content value in any of the three formats (string, or a list of text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text")) for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""


def _head(api: str, payload: Mapping[str, Any]) -> list[str] | None:
    """System/developer texts plus the first user message; None when there are no messages."""
    items = wire.get(api).messages(payload)
    if items is None:
        return None
    head = [_text(payload.get("system")), _text(payload.get("instructions"))]
    for item in items:
        if not isinstance(item, dict):
            continue
        role = item.get("role")
        if role in ("system", "developer"):
            head.append(_text(item.get("content")))
        elif role == "user":
            head.append(_text(item.get("content")))
            break
    return head


def head_id(api: str, payload: Mapping[str, Any]) -> str | None:
    """``head-<hash>`` of the conversation head, volatile digit runs masked; None without messages."""
    head = _head(api, payload)
    if head is None:
        return None
    masked = _VOLATILE.sub("#", "\x00".join(head))
    return "head-" + str(xxhash.xxh3_128_hexdigest(masked.encode("utf-8", "surrogatepass")))


def session_identity(api: str, payload: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """The session id for a request of ``api`` (anthropic, chat, responses); None: pass it through."""
    has_messages = _head(api, payload) is not None
    if not has_messages:
        return None
    explicit = clean_id(headers.get(HEADER))
    if explicit:
        return explicit
    return wire.get(api).session_hint(payload) or head_id(api, payload)
