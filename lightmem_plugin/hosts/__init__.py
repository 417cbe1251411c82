"""The host agents lightmem2 plugs into, in the order ``install``, ``doctor`` and the docs list them.

A new host is one module in this package that defines ``HOST`` (a :class:`.base.Host`: executable,
supported versions, installer module, doctor's wired-in probe, hook handler) and one line in
:data:`HOSTS`. ``lightmem2 install HOST``, ``lightmem2 hook HOST EVENT`` and doctor's host checks are
built from this tuple. Beside the hosts: :mod:`.base` (what a host is) and :mod:`.hook_runtime` (how
any host's hook event is answered: stdin, the host's handler within a budget, stdout).
"""

from __future__ import annotations

from . import claude_code, codex, openclaw
from .base import Host

__all__ = ["HOSTS", "NAMES", "WITH_HOOKS", "Host", "get"]

HOSTS: tuple[Host, ...] = (
    openclaw.HOST,
    claude_code.HOST,
    codex.HOST,
)

NAMES: tuple[str, ...] = tuple(h.name for h in HOSTS)
WITH_HOOKS: tuple[str, ...] = tuple(h.name for h in HOSTS if h.hooks is not None)
"""Hosts that run ``lightmem2 hook HOST EVENT``."""


def get(name: str) -> Host | None:
    """The host called ``name``, or None."""
    return next((h for h in HOSTS if h.name == name), None)
