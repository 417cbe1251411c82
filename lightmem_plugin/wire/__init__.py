"""The provider wire APIs the proxy speaks, one line each.

A new API is one folder in this package (its ``codec``, its answer rewriter ``stream``, and an
``__init__`` that defines ``WIRE``, a :class:`.base.WireApi` with the routes it serves) and one line in
:data:`WIRES`; the proxy's routes, codec, stream and restore, the ledger's real usage, the error shape
and the session identity all read it from here (:func:`get`). Beside the APIs: :mod:`.base` (what an
API declares), :mod:`.rewrite` and :mod:`.sse` (what the answer rewriters share).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import anthropic, chat, responses
from .base import RealUsage, WireApi, WireRoute

WIRES: tuple[WireApi, ...] = (anthropic.WIRE, chat.WIRE, responses.WIRE)
NAMES: tuple[str, ...] = tuple(w.name for w in WIRES)

__all__ = ["NAMES", "WIRES", "RealUsage", "WireApi", "WireRoute", "for_usage", "get"]


def get(name: str) -> WireApi:
    """The API called ``name`` (KeyError names the known ones)."""
    for w in WIRES:
        if w.name == name:
            return w
    raise KeyError(f"unknown wire API {name!r}; known: {', '.join(NAMES)}")


def for_usage(usage: Mapping[str, Any]) -> WireApi:
    """The API a ``usage`` object came from, by its keys (Responses when nothing else claims it)."""
    return next((w for w in WIRES if w.owns_usage(usage)), get("responses"))
