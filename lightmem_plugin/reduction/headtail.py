"""The ``truncate`` pass: head ``headChars`` and tail ``tailChars`` around one stub, the fallback.

Why its own module: :mod:`.truncate` holds the pure cut-point arithmetic that every lossy pass and
:mod:`.work` share; this module is the pass that applies it when no content-aware pass did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .spec import PassSpec
from .work import Piece, Work, cut

if TYPE_CHECKING:
    from .base import PassContext


def select(work: Work, ctx: PassContext) -> list[Piece] | None:
    """Head and tail around one stub; None when the text fits."""
    return cut(work, ctx.table.headChars, ctx.table.tailChars)


PASS = PassSpec("truncate", "select", False, "head and tail around one stub (the fallback)", select)
