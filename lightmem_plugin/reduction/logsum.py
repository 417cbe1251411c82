"""Log pass: keep errors, tracebacks, failed tests and summary lines of a long log; elide the noise.

Why these lines: they are what agents quote back (the exception message, the frames of a traceback
with their file paths, line numbers and code, the failing test's name) and what tells the outcome
(the ``N passed`` line). Runs of look-alike lines (``PASSED`` per test, progress, repeated
warnings) carry one fact many times: their first and last line show the pattern, and a line
identical to a later one adds nothing. The head and the tail are kept too, as truncation would.

The pass only scores lines; :func:`.truncate.select_by_score` spends the budget. It only runs on
text that is clearly a log (:func:`is_log`): patterns that source code does not produce, so a file
view that mentions ``Error`` keeps its plain head/tail truncation.

Speed: a 50 MB log has a million lines, so every per-line test is either anchored at the line
start (``re.match``) or guarded by a plain substring test, and only the first :data:`SCAN` chars
of a line are examined.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import truncate
from .spec import PassSpec
from .work import MARK_COST, Piece, Work, selectable, with_protected

if TYPE_CHECKING:
    from .base import PassContext

S_SUMMARY = 100
S_TAIL = 97
S_ERROR = 95
S_FAILURE_HEADER = 85
S_LAST_FRAMES = 80
S_HEAD_FIRST = 84
S_FRAME = 60
S_NEAR_ERROR = 55
S_LIBRARY_FRAME = 40
S_HEAD = 35
S_WARNING = 30
S_RUN_EDGE = 3
S_FILLER = 1
HEAD_FIRST_SHARE = 0.5
"""The first half of the head allowance ranks above frames: a script's first prints matter."""
SCAN = 400
"""Only this many leading chars of a line are matched against patterns."""
SAMPLE = 2000
"""is_log() looks at this many lines from each end of the log."""

# Lines that only logs produce (all anchored at the line start); is_log() counts them.
_SIGNAL_RE = re.compile(
    r"Traceback \(most recent call last\):"
    r"|\s*File \"[^\"]+\", line \d+"
    r"|E {3}"
    r"|={3,} .* ={3,}$"
    r"|_{3,} .* _{3,}$"
    r"|\S+::\S+ (?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b"
    r"|(?:FAILED|ERROR|PASSED) \S+::"
    r"|\S+\.py:\d+: \w+"
    r"|\S+:\d+:\d+: (?:error|warning|note)\b"
    r"|(?:error|warning)(?:\[\w+\])?: "
    r"|npm (?:ERR!|WARN)"
    r"|make(?:\[\d+\])?: "
    r"|\[?(?:INFO|WARN|WARNING|ERROR|DEBUG|FATAL|CRITICAL)\]?[ :]"
    r"|\d{4}-\d\d-\d\d[ T]\d\d:\d\d"
    r"|Ran \d+ tests? in "
    r"|(?:OK|FAILED) \((?:failures|errors|skipped)="
    r"|(?:Successfully installed|Collecting|Downloading|Requirement already satisfied|Building wheel)\b"
    r"|\s+at \S+ \(.*:\d+(?::\d+)?\)$"
    r"|.*\[ *\d{1,3}%\]$",
)
_ERROR_START_RE = re.compile(
    r"Traceback \(most recent call last\):"
    r"|E {3}"
    r"|(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\b(?::|$)"
    r"|npm ERR!|make(?:\[\d+\])?: \*\*\*|Killed$",
)
_ERROR_WORD_RE = re.compile(
    r"(?:FAIL(?:ED|URES?)?|ERRORS?|FATAL|PANIC|CRITICAL)\b"
    r"|(?:error|fatal|panic)(?:\[\w+\])?: |Segmentation fault|core dumped"
)
_SUMMARY_START_RE = re.compile(
    r"={3,} .*\d.*\b(?:passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?)\b"
    r"|={3,} no tests ran\b"
    r"|Ran \d+ tests? in "
    r"|(?:OK|FAILED)(?: \(.*\))?$"
    r"|(?:BUILD|Build) (?:SUCCESS|SUCCEEDED|FAILED|failed|succeeded)"
    r"|Successfully (?:installed|built)\b"
    r"|test result: "
    r"|Found \d+ errors?\b|All checks passed|\d+ files? (?:reformatted|left unchanged|would be)",
)
_FAILURE_HEADER_RE = re.compile(r"_{3,} .*\w.* _{3,}$")
_LOCATED_ERROR_RE = re.compile(r"\S+:\d+: (?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Failure)\b")
_SUMMARY_COUNT_RE = re.compile(r"\d+ (?:passed|failed|errors?)\b.*\bin \d")
_FRAME_RE = re.compile(
    r"\s*File \"[^\"]+\", line \d+|\S+\.\w+:\d+: |\s+at \S+ \(.*:\d+(?::\d+)?\)$|\S+:\d+:\d+: "
)
_LIBRARY_RE = re.compile(
    r"<frozen |[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python\d|^\s*at (?:node:|java\.)"
)
_WARNING_RE = re.compile(r"(?:[Ww]arn(?:ing)?s?|WARN(?:ING)?S?)\b|[Dd]eprecat")
_MARKER_ONLY_RE = re.compile(r"\s*[~^]+\s*$")
_DIGITS = str.maketrans("", "", "0123456789")


def is_log(lines: Sequence[str]) -> bool:
    """True when enough lines (from both ends of a long log) carry patterns only logs produce."""
    sample = lines if len(lines) <= 2 * SAMPLE else [*lines[:SAMPLE], *lines[-SAMPLE:]]
    hits = sum(1 for line in sample if _SIGNAL_RE.match(line[:SCAN]))
    return hits >= 3 and hits * 20 >= len(sample)


def _is_error(line: str) -> bool:
    if _ERROR_START_RE.match(line) or _LOCATED_ERROR_RE.match(line):
        return True
    return bool(_ERROR_WORD_RE.search(line))


def _is_summary(line: str) -> bool:
    if _SUMMARY_START_RE.match(line) or "short test summary info" in line:
        return True
    return ("passed" in line or "failed" in line or "error" in line) and bool(_SUMMARY_COUNT_RE.search(line))


def _base_score(line: str) -> int:
    line = line[:SCAN]
    if not line.strip() or _MARKER_ONLY_RE.match(line):
        return 0
    if _is_summary(line):
        return S_SUMMARY
    if _is_error(line):
        return S_ERROR
    if _FAILURE_HEADER_RE.match(line):
        return S_FAILURE_HEADER
    if _FRAME_RE.match(line):
        return S_LIBRARY_FRAME if _LIBRARY_RE.search(line) else S_FRAME
    if _WARNING_RE.search(line):
        return S_WARNING
    return S_FILLER


def _shape(line: str) -> str:
    """A cheap look-alike key: the line's two ends with digits removed."""
    t = line.strip().translate(_DIGITS)
    return t[:12] + "\x00" + t[-12:]


def _mark_runs(lines: Sequence[str], scores: list[int]) -> None:
    """Lower look-alike lines in runs of 4+ to filler, keeping a faint claim on each run's ends."""
    n = len(lines)
    i = 0
    while i < n:
        shape = _shape(lines[i])
        j = i + 1
        while j < n and _shape(lines[j]) == shape:
            j += 1
        if j - i >= 4 and shape != "\x00":
            for k in range(i, j):
                if scores[k] <= S_WARNING:
                    scores[k] = S_FILLER
            scores[i] = max(scores[i], S_RUN_EDGE)
            scores[j - 1] = max(scores[j - 1], S_RUN_EDGE)
        i = j


def _code_line(lines: Sequence[str], frame: int) -> int | None:
    """Index of the source line printed under a traceback frame, if there is one."""
    k = frame + 1
    if k >= len(lines) or not lines[k].strip() or _FRAME_RE.match(lines[k][:SCAN]):
        return None
    return k if not _MARKER_ONLY_RE.match(lines[k]) and _base_score(lines[k]) < S_ERROR else None


def _mark_tracebacks(lines: Sequence[str], scores: list[int]) -> None:
    """Rank the frames that locate a failure: the last one, the first one (usually the agent's own
    entry point) and the last three outside libraries; each frame's code line goes with it."""
    frames: list[int] = []
    for i, line in enumerate(lines):
        if scores[i] in (S_FRAME, S_LIBRARY_FRAME):
            frames.append(i)
            code = _code_line(lines, i)
            if code is not None:
                scores[code] = max(scores[code], scores[i] - 1)
            continue
        if scores[i] == S_ERROR and frames:
            own = [f for f in frames if scores[f] == S_FRAME][-3:]
            chosen = sorted({frames[-1], frames[0], *own}, reverse=True)
            for rank, f in enumerate(chosen):
                score = S_LAST_FRAMES - 2 * rank
                scores[f] = max(scores[f], score)
                code = _code_line(lines, f)
                if code is not None:
                    scores[code] = max(scores[code], score - 1)
            frames = []
        elif line.strip() and not line.startswith((" ", "\t")) and scores[i] < S_FRAME:
            frames = []


def _mark_repeats(lines: Sequence[str], scores: list[int]) -> None:
    """A line identical to a later one tells nothing new: only its last occurrence ranks (in a
    chained traceback or a test summary the last one is the one that counts)."""
    seen: set[str] = set()
    for i in range(len(lines) - 1, -1, -1):
        if scores[i] > S_RUN_EDGE:
            if lines[i] in seen:
                scores[i] = S_RUN_EDGE
            else:
                seen.add(lines[i])


def _mark_ends(lines: Sequence[str], scores: list[int], head_chars: int, tail_chars: int) -> None:
    """The head and tail that truncation would keep rank too (the tail above errors)."""
    used = 0
    for i, line in enumerate(lines):
        used += len(line) + 1
        if used > head_chars:
            break
        if line.strip():
            rank = S_HEAD_FIRST if used <= head_chars * HEAD_FIRST_SHARE else S_HEAD
            scores[i] = max(scores[i], rank)
    used = 0
    for i in range(len(lines) - 1, -1, -1):
        used += len(lines[i]) + 1
        if used > tail_chars:
            break
        if lines[i].strip():
            scores[i] = max(scores[i], S_TAIL)


def score_lines(lines: Sequence[str], head_chars: int, tail_chars: int) -> list[int]:
    """A keep-priority per line: summaries, tail, errors, head, last frames, then the rest."""
    scores = [_base_score(line) for line in lines]
    _mark_runs(lines, scores)
    _mark_tracebacks(lines, scores)
    _mark_repeats(lines, scores)
    n = len(lines)
    errors = [i for i, s in enumerate(scores) if s >= S_ERROR]
    for i in errors:
        for k in (i - 2, i - 1, i + 1, i + 2):
            if 0 <= k < n and lines[k].strip() and not _MARKER_ONLY_RE.match(lines[k]):
                scores[k] = max(scores[k], S_NEAR_ERROR - 5 * abs(k - i))
    _mark_ends(lines, scores, head_chars, tail_chars)
    return scores


WHAT = "chars of log (errors, summaries, head and tail shown)"


def select(work: Work, ctx: PassContext) -> list[Piece] | None:
    """Errors, tracebacks, summaries, head and tail of a log under the budget, regions marked."""
    if not selectable(work) or not is_log(work.lines):
        return None
    table = ctx.table
    scores = score_lines(work.lines, table.headChars, table.tailChars)
    keep = truncate.select_by_score(
        [len(line) for line in work.lines], scores, table.capChars, MARK_COST, True
    )
    return with_protected(work, keep, WHAT, table.keepErrorLines)


PASS = PassSpec(
    "log", "select", False, "a log keeps errors, tracebacks, summaries, head and tail", select, WHAT
)
