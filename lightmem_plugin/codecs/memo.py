"""One identity memo: a function of each object of a call, reused for the very same objects next call.

Why by identity: hosts only append, and the pipeline hands unchanged messages on as the same objects
from call to call (decoded once, reduced once, stubbed once). Comparing those by content would cost
what the memo saves; ``is`` costs nothing. Why only the previous call's objects: a session's memory
then follows its current request, not every request it ever saw (DESIGN I6, bounded memory). The
object itself is held next to its result, so its ``id`` cannot be reused by another object while the
entry lives.

Five parts of the pipeline need this (decode, reduce, evict, encode, count); they all use this class.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class PerObject(Generic[K, V]):
    """``fn(item)`` for each item of a call; an item that is the very object of the previous call
    gets the previous call's result without running ``fn`` again."""

    def __init__(self, fn: Callable[[K], V]) -> None:
        self._fn = fn
        self._last: dict[int, tuple[K, V]] = {}

    def map(self, items: Iterable[K]) -> list[V]:
        """The results for ``items``, in order; only these are kept for the next call."""
        last, done, out = self._last, {}, []
        for item in items:
            hit = last.get(id(item))
            value = hit[1] if hit is not None and hit[0] is item else self._fn(item)
            done[id(item)] = (item, value)
            out.append(value)
        self._last = done
        return out

    def forget(self) -> None:
        """Drop every kept result (what ``fn`` computes changed, or the input was abandoned)."""
        self._last = {}

    def __len__(self) -> int:
        return len(self._last)


class Interned(Generic[K]):
    """The previous call's very objects for the items of this call that equal them, position by position.

    Why: :class:`PerObject` pays off only when a call hands in the same objects as the call before,
    which an in-process host does (the Python API, OpenClaw's engine) and a proxy cannot: every
    request body is parsed anew, so each call's messages are new objects and every memo of the
    pipeline missed on all of them (measured with host-like load on the proxy: the whole prompt was
    counted, reduced and encoded again on each call, ~60% of its CPU). Hosts append, so the message
    at position ``i`` is usually equal to the one at ``i`` last call; an equality test of two decoded
    messages compares their strings in C and costs a small fraction of what recomputing them does.
    Only the previous call's items are held (bounded by the current request).
    """

    def __init__(self) -> None:
        self._last: list[K] = []

    def map(self, items: list[K]) -> list[K]:
        """``items``, each replaced by the previous call's object at its position when equal to it."""
        last = self._last
        out = [
            last[i] if i < len(last) and (last[i] is item or last[i] == item) else item
            for i, item in enumerate(items)
        ]
        self._last = out
        return out

    def forget(self) -> None:
        """Hold nothing (the session dropped its per-object results)."""
        self._last = []
