"""The ``truncate`` pass: head ``headChars`` and tail ``tailChars`` around one stub, the fallback.

Why its own module: :mod:`.truncate` holds the pure cut-point arithmetic that every lossy pass and
:mod:`.work` share; this module is the pass that applies it when no content-aware pass did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .spec import PassSpec
from .work import Piece, Work, cut, head_tail_mask, with_protected

if TYPE_CHECKING:
    from .base import PassContext

PROTECTED_WHAT = "chars (head, tail and error lines shown)"
"""The stub label of a head + tail cut that kept error lines from the middle too."""


def select(work: Work, ctx: PassContext) -> list[Piece] | None:
    """Head and tail around one stub; None when the text fits. Error lines in the middle (a
    traceback frame, an exception) stay, each elided region then gets a short marker."""
    table = ctx.table
    if table.keepErrorLines and work.origin is not None and work.protected():
        keep = head_tail_mask(work.lines, table.headChars, table.tailChars)
        if not all(keep):
            return with_protected(work, keep, PROTECTED_WHAT, True)
    return cut(work, table.headChars, table.tailChars)


PASS = PassSpec("truncate", "select", False, "head and tail around one stub (the fallback)", select)
