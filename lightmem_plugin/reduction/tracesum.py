"""Tracebacks: every frame, the code under it and the exception (chained ones too) stay.

Why: measured before this pass, head + tail truncation hid 32% (normal) / 49% (aggressive) of the
traceback frames agents later used, and once left an ``AssertionError`` in view while cutting the
``AttributeError`` above it that was the cause. A traceback is short per line and dense in facts:
each frame names a file, a line and a function the agent may open next. What is around it (the
program's own prints before it crashed) gets the head and tail of the budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .spec import PassSpec
from .work import Piece, Work, head_tail_plus

if TYPE_CHECKING:
    from .base import PassContext

WHAT = "chars of output with a traceback (frames and exception shown)"
MESSAGE_LINES = 30
"""Lines kept after the last frame: the exception's message may span several."""


def select(work: Work, ctx: PassContext) -> list[Piece] | None:
    """Frames, code lines, exceptions and the message tail whole; head and tail of the rest."""
    if work.origin is None:
        return None
    marks = work.protected()
    if not marks:
        return None
    last = max(marks)
    message = set(range(last, min(len(work.lines), last + MESSAGE_LINES)))
    pieces = head_tail_plus(work, ctx.table.headChars, ctx.table.tailChars, message, WHAT)
    return list(work.lines) if pieces is None else pieces  # every line is a frame or the message


PASS = PassSpec(
    "traceback",
    "select",
    False,
    "a traceback keeps every frame and the exception",
    select,
    WHAT,
    kinds=("traceback",),
)
