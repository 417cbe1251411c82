"""Which lines to keep under a character budget: head/tail truncation and score-driven selection.

Why one module for both: every lossy pass ends the same way, by choosing lines of the input to show
verbatim and eliding the rest behind stubs. Truncation keeps a head and a tail; the log and diff
passes give each line a score and let :func:`select_by_score` spend the budget on the best lines.
Both only return decisions (masks and cut points), never text, so they stay pure and cheap, and the
orchestrator renders stubs that point at the elided line ranges.

Cost model shared with the renderer: a kept line costs its length plus one newline; each maximal run
of elided lines (a *region*) costs one stub line of ``gap_cost`` chars.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Cut:
    """A head/tail cut of a list of lines.

    ``head_lines`` whole lines are kept from the start and ``tail_lines`` from the end. When the
    boundary line is too long to keep whole, ``head_part`` chars of the next line (or ``tail_part``
    chars of the end of the line before the tail) are kept too, so a single huge line still shows
    something; otherwise cuts fall on line boundaries.
    """

    head_lines: int
    tail_lines: int
    head_part: int = 0
    tail_part: int = 0


def head_tail(lengths: Sequence[int], head_chars: int, tail_chars: int) -> Cut | None:
    """Keep about ``head_chars`` at the start and ``tail_chars`` at the end; None if all of it fits.

    Cuts fall on line boundaries unless that would keep less than half the allowance, in which case
    the boundary line is cut inside (a prefix for the head, a suffix for the tail).
    """
    n = len(lengths)
    if sum(lengths) + n <= head_chars + tail_chars:
        return None
    head, used = 0, 0
    while head < n and used + lengths[head] + 1 <= head_chars:
        used += lengths[head] + 1
        head += 1
    head_part = 0
    if head < n and used < head_chars // 2:
        head_part = min(lengths[head], head_chars - used)
    tail, used_t = 0, 0
    limit = n - head - (1 if head_part else 0)
    while tail < limit and used_t + lengths[n - 1 - tail] + 1 <= tail_chars:
        used_t += lengths[n - 1 - tail] + 1
        tail += 1
    tail_part = 0
    edge = n - 1 - tail
    if edge >= head and used_t < tail_chars // 2:
        room = lengths[edge] - (head_part if edge == head else 0)
        tail_part = max(0, min(room, tail_chars - used_t))
    return Cut(head, tail, head_part, tail_part)


def regions(keep: Sequence[bool]) -> list[tuple[int, int]]:
    """Maximal runs of elided lines, as (first, last) inclusive 0-based indices."""
    out: list[tuple[int, int]] = []
    start = -1
    for i, k in enumerate(keep):
        if not k and start < 0:
            start = i
        elif k and start >= 0:
            out.append((start, i - 1))
            start = -1
    if start >= 0:
        out.append((start, len(keep) - 1))
    return out


def select_by_score(
    lengths: Sequence[int], scores: Sequence[int], budget: int, gap_cost: int, ends_first: bool = False
) -> list[bool]:
    """Keep the best-scored lines whose total cost (lines plus one stub per elided run) fits ``budget``.

    Greedy by score, ties broken by position: earlier first, or with ``ends_first`` nearer either
    end first (a log's head grows downwards and its tail upwards, without holes). O(n log n) and
    deterministic. Lines with a score of 1 or less are never picked on their own; afterwards any
    elided run cheaper than the marker that would replace it is shown instead, since that both saves
    chars and keeps more.
    """
    n = len(lengths)
    keep = [False] * n
    if n == 0:
        return keep
    cost = gap_cost  # everything elided: one region
    candidates = [i for i in range(n) if scores[i] > 1]
    if ends_first:
        order = sorted(candidates, key=lambda i: (-scores[i], min(i, n - 1 - i), i))
    else:
        order = sorted(candidates, key=lambda i: (-scores[i], i))
    for i in order:
        left_gap = i > 0 and not keep[i - 1]
        right_gap = i < n - 1 and not keep[i + 1]
        delta_regions = 1 if (left_gap and right_gap) else (0 if (left_gap or right_gap) else -1)
        extra = lengths[i] + 1 + delta_regions * gap_cost
        if cost + extra <= budget:
            keep[i] = True
            cost += extra
    if gap_cost > 0:
        show_cheap_runs(lengths, keep, gap_cost)
    return keep


def show_cheap_runs(lengths: Sequence[int], keep: list[bool], gap_cost: int) -> list[bool]:
    """``keep`` with every elided run no longer than ``gap_cost`` (its lines and line breaks) shown
    instead of the marker that would stand for it: that both saves and keeps more. In place."""
    for first, last in regions(keep):
        if sum(lengths[first : last + 1]) + (last - first + 1) <= gap_cost:
            keep[first : last + 1] = [True] * (last - first + 1)
    return keep
