"""What a provider wire API declares about itself, so the proxy, accounting and identity need no switch.

Why a declaration: the API kind (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses) used to
be a string compared in six modules (proxy, rewrite, accounting, identity, sidecar, app). A new API is
now one module that defines ``WIRE`` and one line in :data:`.WIRES`; every place that needs to decode,
encode, restore, read usage, shape an error or find the session asks the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from ..codecs._common import Reuse
    from ..model import Request
    from .rewrite import StreamRewriter

JSON = dict[str, Any]


@dataclass(frozen=True)
class RealUsage:
    """Provider-reported figures of one call, in one shape for all APIs (None: not reported).

    ``cache_write_1h_tokens`` is the part of ``cache_write_tokens`` written for one hour (Anthropic
    bills it at 2x input, the 5-minute rest at 1.25x)."""

    input_tokens: int | None
    cached_tokens: int | None
    cache_write_tokens: int | None
    output_tokens: int | None
    cache_write_1h_tokens: int | None = None


def as_int(value: Any) -> int | None:
    """``value`` when it is a real int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Decode(Protocol):
    """A codec's request decoder; ``reuse`` keeps a session's last call (:class:`~..codecs._common.Reuse`)."""

    def __call__(self, payload: JSON, reuse: Reuse | None = None, /) -> Request: ...


class Encode(Protocol):
    """A codec's request encoder, the inverse of :class:`Decode`."""

    def __call__(self, req: Request, reuse: Reuse | None = None, /) -> JSON: ...


@dataclass(frozen=True)
class WireRoute:
    """One path the proxy serves for an API, and where it forwards it.

    ``upstream`` names the configured base URL (``server.upstreams.anthropic`` or ``.openai``) and
    ``upstream_path`` is appended to it; ``transform``: False passes the body through unchanged (a
    token count, not a model call); ``named``: the route is also served under ``/u/<name>``, forwarded
    to ``server.upstreams.named[<name>]`` (OpenAI-compatible providers a host names).
    """

    path: str
    upstream: Literal["anthropic", "openai"]
    upstream_path: str
    transform: bool = True
    named: bool = False


@dataclass(frozen=True)
class WireApi:
    """One provider API as the proxy speaks it.

    ``decode``/``encode``: request JSON to and from the neutral model (:mod:`..codecs`); ``stream``: the
    SSE rewriter that restores placeholders in a streamed answer; ``restore``: the same for a whole
    JSON answer; ``usage``: its ``usage`` object normalised; ``owns_usage``: True for a usage object
    of this API (by its keys); ``error``: an error body in its shape from (kind, message);
    ``messages``: the conversation items of a request (for the session's head), None without any;
    ``session_hint``: the host's own session id in the request, if it carries one; ``ledger_fields``:
    which real-usage columns of the ledger it fills (Anthropic's split or OpenAI's cached tokens);
    ``cache_model``: how its provider caches prompts, which prices an eviction's break
    (:mod:`..eviction.break_cost`); ``routes``: the paths the proxy serves for it (:class:`WireRoute`),
    so the server's route table is built from the registry.
    """

    name: str
    summary: str
    decode: Decode
    encode: Encode
    stream: Callable[[Mapping[str, str]], StreamRewriter]
    restore: Callable[[JSON, Mapping[str, str]], JSON]
    usage: Callable[[Mapping[str, Any]], RealUsage]
    owns_usage: Callable[[Mapping[str, Any]], bool]
    error: Callable[[str, str], JSON]
    messages: Callable[[Mapping[str, Any]], list[Any] | None]
    session_hint: Callable[[Mapping[str, Any]], str | None]
    ledger_fields: Literal["anthropic", "openai"]
    cache_model: Literal["prefix", "anthropic"] = "prefix"
    routes: tuple[WireRoute, ...] = ()


MAX_ID = 200


def clean_id(value: object) -> str | None:
    """A session id from a request field: a stripped, bounded non-empty string, else None. A NUL is
    spelled ``\\x00`` (no store can keep one: PostgreSQL refuses it in text, and the call failed)."""
    if not isinstance(value, str):
        return None
    value = value.strip().replace("\x00", "\\x00")
    return value[:MAX_ID] if value else None


def message_list(payload: Mapping[str, Any]) -> list[Any] | None:
    """``messages`` of a request (Anthropic Messages and Chat Completions), None when absent or empty."""
    items = payload.get("messages")
    return items if isinstance(items, list) and items else None


def cache_key_hint(payload: Mapping[str, Any]) -> str | None:
    """The ``prompt_cache_key`` an OpenAI client sends per thread (Codex does): the host's session id."""
    return clean_id(payload.get("prompt_cache_key"))


def openai_error(kind: str, message: str) -> JSON:
    """The error body both OpenAI APIs use."""
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}
