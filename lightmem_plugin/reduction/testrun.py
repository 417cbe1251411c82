"""Test runs: every failure with its whole traceback, and the summary; the passing noise goes.

Why: what an agent does after a test run depends on which tests failed, where, and why (the frames
and the ``E`` lines of pytest, the ``FAIL:`` block of unittest, the numbered blocks of ExUnit and
RSpec, the blocks of jest, vitest, go test and cargo test: :data:`_BLOCKS`), and on the outcome line (``2 failed,
40 passed``, ``Ran 12 tests ... FAILED (failures=1)``). The rest, per-test ``PASSED`` lines, progress
dots, collection and platform headers, states one fact many times. So the failure sections and
summary lines are kept whole, whatever the budget; the rest gets the head and tail of the budget.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .ansi import strip_ansi
from .spec import PassSpec
from .work import Piece, Work, head_tail_plus

if TYPE_CHECKING:
    from .base import PassContext

WHAT = "chars of test run (failures and summary shown)"
_PYTEST_SECTION = re.compile(r"^={3,} (FAILURES|ERRORS|short test summary info) ={3,}$")
_OTHER_SECTION = re.compile(r"^={3,} .* ={3,}$")
_UNITTEST_RULE = re.compile(r"^(?:={20,}|-{20,})$")
_UNITTEST_HEAD = re.compile(r"^(?:FAIL|ERROR): ")
_NUMBERED_FAILURE = re.compile(r"^  \d+\) \S")  # ExUnit and RSpec: "  1) test name (Module)"
_NUMBERED_END = re.compile(r"^(?:\S|Finished in )")
_BLOCKS = (
    # (where a failure's block starts, where the block after it or the run's end starts)
    (re.compile(r"^\s*\u25cf (?!Console$)\S"), re.compile(r"^(?:\S|\s*\u25cf \S| (?:PASS|FAIL) )")),  # jest
    (re.compile(r"^\u23af+ Failed Tests? \d+ \u23af+$"), re.compile(r"^\s*Test Files\s")),  # vitest
    (re.compile(r"^\s*--- FAIL: \S"), re.compile(r"^(?:\S|\s*--- (?:FAIL|PASS|SKIP): )")),  # go test
    (re.compile(r"^---- \S+ stdout ----$"), re.compile(r"^test result: ")),  # cargo test
)
"""The failure blocks of other runners: jest's ``● suite › test`` (its Expected/Received and code
frame, indented), vitest's ``⎯⎯ Failed Tests 1 ⎯⎯`` section, go test's ``--- FAIL: TestX`` with its
indented ``x_test.go:12:`` lines, cargo's ``---- name stdout ----`` through its ``failures:`` list.
Why: their error lines (:mod:`~.reduction.error_lines`) say where a test failed, the rest of the block says
why (``Expected: 3``, ``Received: 4``, ``- Expected`` / ``+ Received``), and head + tail cut that."""
_SUMMARY = re.compile(
    r"^(?:=+ .*\b(?:passed|failed|errors?|skipped|xfailed|deselected|no tests ran)\b.*=+"
    r"|Ran \d+ tests? in .*|OK(?: \(.*\))?|FAILED \(.*\)|(?:FAILED|ERROR) \S+.*"
    r"|test result: .*|Tests?: .*\d+ (?:passed|failed).*|\d+ (?:passed|failed)[,.].*"
    r"|(?:\d+ doctests?, )?\d+ (?:tests?|examples?), \d+ failures?.*|Finished in .*"
    r"|Test Suites: .*|\s*Test Files\s+\d+ .*|\s*Tests\s+\d+ (?:failed|passed).*"  # jest, vitest
    r"|(?:FAIL|ok )\t\S+.*|FAIL|PASS)$"  # go test
)


def failure_lines(lines: list[str]) -> set[int]:
    """Indexes of lines inside failure sections (pytest FAILURES/ERRORS/summary, unittest blocks)."""
    keep: set[int] = set()
    inside = False
    unittest_block = False
    numbered = False
    block_end: re.Pattern[str] | None = None
    for i, raw in enumerate(lines):
        line = strip_ansi(raw)
        if block_end is not None and block_end.match(line):
            block_end = None
        if block_end is None:
            block_end = next((end for start, end in _BLOCKS if start.match(line)), None)
            if block_end is not None:
                keep.add(i)
                continue
        else:
            keep.add(i)
        if _NUMBERED_FAILURE.match(line):
            numbered = True
        elif numbered and _NUMBERED_END.match(line):
            numbered = False
        if _PYTEST_SECTION.match(line):
            inside = True
        elif _OTHER_SECTION.match(line) and inside:
            inside = False
        if _UNITTEST_HEAD.match(line):
            unittest_block = True
            if i > 0 and _UNITTEST_RULE.match(lines[i - 1]):
                keep.add(i - 1)
        elif (
            unittest_block
            and line.startswith("-" * 20)
            and i + 1 < len(lines)
            and lines[i + 1].startswith("Ran ")
        ) or (
            unittest_block
            and line.startswith("=" * 20)
            and i + 1 < len(lines)
            and not _UNITTEST_HEAD.match(lines[i + 1])
        ):
            unittest_block = False
        if inside or unittest_block or numbered or _SUMMARY.match(line):
            keep.add(i)
    return keep


_RESULT_LINE = re.compile(
    r"^(?:\S+::\S.* (?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b"  # pytest -v
    r"|\w+ \([\w.]+\)(?: \S.*)? \.\.\. (?:ok|FAIL|ERROR|skipped|expected failure)\b)"  # unittest -v
)
LIST_CHARS = 4000
"""Up to this many chars, a verbose run's per-test result lines all stay: they are the list of tests
the run selected, and the agent picks the next test to run from it. Measured on the swe traces: the
only later uses normal mode left out of view were three such names (``pytest -k "dict"``, a 65-test
``linter_test.py`` run); a longer list keeps its head and tail like the rest."""


def result_lines(lines: list[str]) -> set[int]:
    """Indexes of a verbose run's per-test result lines, when together they fit :data:`LIST_CHARS`."""
    found = [i for i, line in enumerate(lines) if _RESULT_LINE.match(strip_ansi(line))]
    return set(found) if sum(len(lines[i]) + 1 for i in found) <= LIST_CHARS else set()


def select(work: Work, ctx: PassContext) -> list[Piece] | None:
    """Failures and summaries whole, a short list of per-test results whole, head and tail of the
    rest; the whole run when it is all of those (not None, which would hand it on to the head/tail
    fallback, cutting a failure)."""
    if work.origin is None:
        return None
    keep = failure_lines(work.lines) | result_lines(work.lines)
    pieces = head_tail_plus(work, ctx.table.headChars, ctx.table.tailChars, keep, WHAT)
    return list(work.lines) if pieces is None else pieces  # all failures and summary: shown whole


PASS = PassSpec(
    "testrun",
    "select",
    False,
    "a test run keeps every failure whole and the summary",
    select,
    WHAT,
    kinds=("test_run",),
)
