"""The provider wire APIs the proxy speaks, one line each.

A new API is one module in this package that defines ``WIRE`` (a :class:`.base.WireApi`) and one line
in :data:`WIRES`; the proxy's codec, stream and restore, the ledger's real usage, the error shape and
the session identity all read it from here (:func:`get`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import anthropic, chat, responses
from .base import RealUsage, WireApi

WIRES: tuple[WireApi, ...] = (anthropic.WIRE, chat.WIRE, responses.WIRE)
NAMES: tuple[str, ...] = tuple(w.name for w in WIRES)

__all__ = ["NAMES", "WIRES", "RealUsage", "WireApi", "for_usage", "get"]


def get(name: str) -> WireApi:
    """The API called ``name`` (KeyError names the known ones)."""
    for w in WIRES:
        if w.name == name:
            return w
    raise KeyError(f"unknown wire API {name!r}; known: {', '.join(NAMES)}")


def for_usage(usage: Mapping[str, Any]) -> WireApi:
    """The API a ``usage`` object came from, by its keys (Responses when nothing else claims it)."""
    return next((w for w in WIRES if w.owns_usage(usage)), get("responses"))
