from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lightmem_plugin.reduction.truncate import Cut, head_tail, regions, select_by_score


def _cost(lengths: list[int], keep: list[bool], gap_cost: int) -> int:
    return sum(n + 1 for n, k in zip(lengths, keep, strict=True) if k) + gap_cost * len(regions(keep))


@pytest.mark.parametrize(
    ("lengths", "head", "tail", "expected"),
    [
        ([10] * 10, 200, 200, None),
        ([10] * 100, 55, 33, Cut(5, 3)),
        ([10, 10, 5000, 10], 100, 100, Cut(2, 1, 78, 89)),
        ([10, 10, 30, 10], 40, 100, None),
        ([40] * 4, 100, 50, Cut(2, 1)),
        ([5000], 600, 400, Cut(0, 0, 600, 400)),
        ([20, 5000, 20], 600, 400, Cut(1, 1, 579, 379)),
        ([], 10, 10, None),
    ],
    ids=[
        "fits",
        "lines",
        "long-middle",
        "fits-2",
        "whole-lines",
        "one-huge-line",
        "huge-line-between",
        "empty",
    ],
)
def test_head_tail(lengths: list[int], head: int, tail: int, expected: Cut | None) -> None:
    assert head_tail(lengths, head, tail) == expected


@given(st.lists(st.integers(0, 300), max_size=60), st.integers(0, 800), st.integers(0, 800))
def test_head_tail_respects_its_allowances(lengths: list[int], head: int, tail: int) -> None:
    cut = head_tail(lengths, head, tail)
    if cut is None:
        assert sum(lengths) + len(lengths) <= head + tail
        return
    n = len(lengths)
    assert cut.head_lines + cut.tail_lines + (1 if cut.head_part or cut.tail_part else 0) <= n
    kept_head = sum(x + 1 for x in lengths[: cut.head_lines]) + cut.head_part
    kept_tail = sum(x + 1 for x in lengths[n - cut.tail_lines :]) + cut.tail_part
    assert kept_head <= head and kept_tail <= tail


def test_regions() -> None:
    assert regions([True, False, False, True, False]) == [(1, 2), (4, 4)]
    assert regions([]) == [] and regions([True]) == []


def test_select_prefers_high_scores_and_fills_cheap_gaps() -> None:
    lengths = [50, 5, 50, 300, 50]
    scores = [10, 0, 10, 1, 10]
    keep = select_by_score(lengths, scores, 300, 40)
    assert keep == [True, True, True, False, True]


def test_select_ties_prefer_the_ends_when_asked() -> None:
    lengths = [10] * 9
    scores = [5] * 9
    early = select_by_score(lengths, scores, 30 + 44, 30)
    ends = select_by_score(lengths, scores, 30 + 66, 30, ends_first=True)
    assert early == [True] * 4 + [False] * 5
    assert ends == [True] * 3 + [False] * 3 + [True] * 3


def test_select_shows_everything_when_that_is_cheaper_than_a_stub() -> None:
    assert select_by_score([10] * 9, [5] * 9, 144, 100) == [True] * 9


@given(
    st.lists(st.tuples(st.integers(0, 200), st.integers(0, 100)), max_size=80),
    st.integers(0, 3000),
    st.integers(0, 200),
    st.booleans(),
)
def test_select_never_exceeds_its_budget(
    pairs: list[tuple[int, int]], budget: int, gap: int, ends: bool
) -> None:
    lengths = [a for a, _ in pairs]
    scores = [b for _, b in pairs]
    keep = select_by_score(lengths, scores, budget, gap, ends)
    assert len(keep) == len(lengths)
    if any(keep):
        assert _cost(lengths, keep, gap) <= max(budget, gap)
    assert keep == select_by_score(lengths, scores, budget, gap, ends)


def test_a_line_too_long_to_keep_whole_shares_its_line_with_the_stub() -> None:
    """The kept start and end of a cut line sit on the stub's line, so the model sees that the line goes
    on; before, the start stood alone and read as a whole line (a JSON array or URL cut short)."""
    from lightmem_plugin.measure.fidelity import changed_lines
    from lightmem_plugin.reduction.work import Work, cut, render

    lines = [
        "Links: ["
        + ",".join(f'{{"title":"result {i}","url":"https://example.com/{i}"}}' for i in range(90))
        + "]"
    ]
    work = Work(lines, lines, [0])
    pieces = cut(work, 600, 400)
    assert pieces is not None
    shown = render(pieces, "0123456789abcdef0123456789abcdef")
    assert "\n" not in shown  # one line: start, stub, end
    assert shown.startswith(lines[0][:500]) and shown.endswith(lines[0][-300:])
    assert "[lightmem2: " in shown and 'lines="1:1"' in shown
    assert changed_lines(lines[0], shown) == []
