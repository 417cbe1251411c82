"""Bytes outside stubs: every shown line outside lightmem2's own lines is a line of the original."""

from __future__ import annotations

from typing import Any

import pytest

from lightmem_plugin.measure.fidelity import ChangedLinesTracker, changed_lines, shown_lines, strip_blocks
from lightmem_plugin.prefix.stabilizer import SESSION_BLOCK_PREFIX, TAIL_PREFIX
from lightmem_plugin.reduction.base import stub
from lightmem_plugin.reduction.dedup import reference
from lightmem_plugin.reduction.linedup import marker
from lightmem_plugin.reduction.work import Mark

KEY = "0123456789abcdef0123456789abcdef"
ORIGINAL = "\n".join(["def f(x):  ", "    return x", "", "def g():", "    pass", "# end"])


def test_a_stripped_trailing_space_is_a_changed_line() -> None:
    assert changed_lines(ORIGINAL, ORIGINAL.replace("def f(x):  ", "def f(x):")) == ["def f(x):"]
    assert changed_lines(ORIGINAL, ORIGINAL) == []


@pytest.mark.parametrize(
    "ours",
    [
        stub(KEY, 120, (3, 5)),
        Mark(2, 4).text(),
        marker(3, 5),
        reference("call_7", KEY, 1200),
        f'[lightmem2: output archived as {KEY}, no longer current (re-run); recover with lightmem2_recover(key, lines="1:9")]',
    ],
)
def test_stub_and_marker_lines_are_accepted(ours: str) -> None:
    reduced = "\n".join(["def f(x):  ", ours, "# end"])
    assert changed_lines(ORIGINAL, reduced) == []
    assert shown_lines(reduced) == 2


def test_kept_lines_must_keep_their_order() -> None:
    assert changed_lines(ORIGINAL, "def g():\ndef f(x):  ") == ["def f(x):  "]
    assert changed_lines("a\nb\na", "a\na") == []  # a line that repeats may be kept twice


def test_a_line_cut_inside_is_changed() -> None:
    reduced = f"def f(x):  \n    ret\n{stub(KEY, 40)}\n# end"
    assert changed_lines(ORIGINAL, reduced) == ["    ret"]


def test_eviction_record_and_stabilizer_blocks_are_ours() -> None:
    evicted = (
        f"[lightmem2: output archived as {KEY}, no longer current (tests pass); recover with lightmem2_recover(key)]\n"
        "[lightmem2 session record]\nGoal: fix the area function\n- tests pass"
    )
    assert changed_lines(ORIGINAL, evicted) == []
    with_tail = ORIGINAL + TAIL_PREFIX + "<TIMESTAMP>=2026-11-30T05:45:03Z]"
    assert strip_blocks(with_tail) == ORIGINAL
    assert changed_lines(ORIGINAL, with_tail) == []
    both = ORIGINAL + SESSION_BLOCK_PREFIX + "<WORKDIR>=/w]" + TAIL_PREFIX + "<TIMESTAMP>=x]"
    assert changed_lines(ORIGINAL, both) == []
    # a tool output that merely mentions the prefix inside a line is left alone
    assert strip_blocks("x\n\n[lightmem2 now: a]\nmore") == "x\n\n[lightmem2 now: a]\nmore"


def test_tracker_counts_each_shown_form_once_and_aligns_from_the_end() -> None:
    tool: dict[str, Any] = {"role": "tool", "content": ORIGINAL}
    stripped = {"role": "tool", "content": ORIGINAL.replace("def f(x):  ", "def f(x):")}
    user = {"role": "user", "content": "go"}
    tracker = ChangedLinesTracker()
    for _ in range(3):  # the same form re-read on three calls
        tracker.add_call([user, tool], [user, stripped])
    assert (tracker.changed, tracker.shown) == (1, 6)
    # a policy that drops the head: the tool messages still pair up from the end
    tracker.add_call([user, user, tool], [stripped])
    assert tracker.changed == 1


def test_stabilizer_tail_as_its_own_text_part_is_ours() -> None:
    """Content given as parts (Claude Code tool results): the tail is a part of its own."""
    parts = [{"type": "text", "text": ORIGINAL}]
    tail = {"type": "text", "text": TAIL_PREFIX + "<TIMESTAMP>=2026-11-30T05:45:03Z]"}
    tracker = ChangedLinesTracker()
    tracker.add_call([{"role": "tool", "content": parts}], [{"role": "tool", "content": [*parts, tail]}])
    assert (tracker.changed, tracker.shown) == (0, 6)


LONG = "\n".join(["first", "x" * 50 + "MIDDLE" + "y" * 50, "z" * 80 + "END", "last"])


def test_a_line_cut_inside_with_the_stub_on_it_is_accepted() -> None:
    cut = "\n".join(["first", "x" * 20 + stub(KEY, 200, (2, 3)) + "z" * 10 + "END", "last"])
    assert changed_lines(LONG, cut) == []
    assert changed_lines(LONG, "\n".join(["first", "x" * 20 + stub(KEY, 100, (2, 2)), "last"])) == []
    assert changed_lines(LONG, "\n".join(["first", stub(KEY, 100, (2, 3)) + "END", "last"])) == []


def test_a_cut_line_that_looks_whole_or_is_not_the_original_is_a_changed_line() -> None:
    # before: the kept start of a long line sat on its own line, looking like the whole line
    alone = "\n".join(["first", "x" * 20, stub(KEY, 200, (2, 3)), "last"])
    assert changed_lines(LONG, alone) == ["x" * 20]
    wrong = "\n".join(["first", "q" * 20 + stub(KEY, 200, (2, 3)) + "END", "last"])
    assert changed_lines(LONG, wrong) == [wrong.split("\n")[1]]
    wrong_end = "\n".join(["first", "x" * 20 + stub(KEY, 200, (2, 3)) + "FIN", "last"])
    assert changed_lines(LONG, wrong_end) == [wrong_end.split("\n")[1]]
