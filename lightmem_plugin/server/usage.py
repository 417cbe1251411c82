"""Real cache figures the provider reported, in one shape for all three APIs.

Why normalise: Anthropic splits input into uncached ``input_tokens``, ``cache_read_input_tokens`` and
``cache_creation_input_tokens``; OpenAI reports the total (``prompt_tokens`` / ``input_tokens``) with the
cached part in ``*_tokens_details.cached_tokens``. Reports compare hit rates across hosts, so the proxy
turns each into (total input, cached, written, output) before recording it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..metering.accounting import RealUsage, real_usage
from ..pipeline import Session

__all__ = ["RealUsage", "UsageBook", "real_usage", "record_usage"]


class UsageBook:
    """Real usage the proxy saw, summed per session (shown by the health routes, read by tests)."""

    def __init__(self) -> None:
        self.totals: dict[str, dict[str, int]] = {}

    def add(self, session_id: str, figures: RealUsage) -> None:
        row = self.totals.setdefault(session_id, {"calls": 0, "input": 0, "cached": 0, "written": 0})
        row["calls"] += 1
        row["input"] += figures.input_tokens or 0
        row["cached"] += figures.cached_tokens or 0
        row["written"] += figures.cache_write_tokens or 0


def record_usage(
    book: UsageBook, session: Session, api: str, usage: Mapping[str, Any], *, to_ledger: bool = True
) -> RealUsage:
    """Record one call's real cache figures: in ``book`` (per-session totals the health route shows)
    and, through ``Session.after_model_call(None, usage=...)``, on the session's ledger row."""
    figures = real_usage(api, usage)
    book.add(session.id, figures)
    if to_ledger:
        session.fail.run("ledger", lambda: session.after_model_call(None, usage=dict(usage), api=api), None)
    return figures
