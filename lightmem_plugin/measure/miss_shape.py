"""The shape of a replayed call against the one before it, for naming the cause of its cache misses.

The replay knows what the ledger cannot always know: the host's own prompt beside what the policy sent,
where the host compacted, and which calls met an expired cache. :func:`shape` turns them into the
:class:`~..metering.misses.Shape` that :func:`~..metering.misses.attribute` splits by cause, the
same function ``report`` uses live.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..metering.misses import Shape


def common_tokens(
    prev: tuple[Sequence[Sequence[int]], Sequence[Any]], chunks: Sequence[Sequence[int]], keys: Sequence[Any]
) -> int:
    """Leading tokens of ``chunks`` identical to the previous request's (``prev``: its chunks and
    keys); a chunk whose key matches is taken whole, the first one that differs to its common
    token prefix."""
    n = 0
    for before, key_before, now, key in zip(prev[0], prev[1], chunks, keys, strict=False):
        if key == key_before and len(before) == len(now):
            n += len(now)
            continue
        n += len(os.path.commonprefix([list(before), list(now)]))
        break
    return n


def appended(prev: Sequence[Mapping[str, Any]], now: Sequence[Mapping[str, Any]]) -> int | None:
    """How many messages the host appended to its previous prompt, None when it changed one of them
    (or dropped any): then the first changed index is :func:`first_changed`."""
    if len(now) < len(prev) or any(a != b for a, b in zip(prev, now, strict=False)):
        return None
    return len(now) - len(prev)


def first_changed(prev: Sequence[Mapping[str, Any]], now: Sequence[Mapping[str, Any]]) -> int:
    """The index of the first message of ``prev`` that ``now`` no longer holds as it was."""
    return next(
        (i for i, (a, b) in enumerate(zip(prev, now, strict=False)) if a != b), min(len(prev), len(now))
    )


def shape(
    index: int,
    total: int,
    common: int,
    new_of: Callable[[int], int],
    extra_new: int,
    host_prev: Sequence[Mapping[str, Any]] | None,
    host_now: Sequence[Mapping[str, Any]],
    host_compacted: bool,
    expired: str | None,
    ours: str,
    changer: str = "lightmem2",
) -> Shape:
    """One call's shape. ``new_of(k)`` the tokens of the last ``k`` messages the policy sent (the host's
    appended ones are its last), ``extra_new`` tokens new at every call outside them (a per-call tail);
    ``host_prev``/``host_now`` the host's own prompts (None: first call); ``expired`` the idle gap
    in words when the cache had expired, else None; ``ours`` what the policy did at this call, in
    words (a batch's description; empty when it changed nothing it can name); ``changer`` who the
    policy is (``lightmem2``, or ``peer`` for another tool)."""
    if host_prev is None or index == 0:
        return Shape(total, 0, 0, first=True)
    added = appended(host_prev, host_now)
    new = extra_new + (new_of(added) if added else 0)
    if host_compacted:
        changed_by, detail = "host compaction", "the host compacted: its summary replaced the history"
    elif added is None:
        at = first_changed(host_prev, host_now)
        changed_by, detail = "host", f"the host rewrote message {at}"
    else:
        changed_by, detail = changer, ours
    return Shape(total, common, min(new, total), changed_by, detail, expired)
