"""Error lines: the lines of a tool output an agent acts on when something failed.

Why a module of its own: the retention measure checks that these lines stay verbatim in every prompt
while their output is the newest of its command, and the reduction passes import the same recogniser
so they never cut them (DESIGN section 4). One definition keeps the measure and the passes honest
about the same lines.

What counts (each rule anchored at the start of the line, so a line is judged by its own shape):

- ``Traceback (most recent call last):`` (also indented or behind ``|`` in exception groups, or at
  the end of a line a program printed without its newline: sqlfluff's ``Are you sure you wish to
  attempt to fix these? [Y/n] Traceback (most recent call last):``, the one line that said why
  ``click.getchar()`` failed below it; the log pass had cut it) and
  the chained-exception separators ``During handling of the above exception ...`` /
  ``The above exception was the direct cause ...``;
- traceback frames ``  File "path", line N`` (any indentation, optional ``|``/``+`` group gutter);
- exception *message* lines at column 0: ``ValueError: ...``, ``pkg.mod.CustomError: ...``, a bare
  ``AssertionError``, ``KeyboardInterrupt``, a dotted ``pkg.mod.Name: message`` (how a traceback
  names a class that does not end in Error), and Elixir's ``** (CompileError) ...``;
- unittest headers ``FAIL: test_x (mod.Class)`` / ``ERROR: test_x (mod.Class)`` and its verbose
  result lines ``test_x (mod.Class) ... FAIL`` (any ``name ... FAILED``/``ERROR``, as check scripts
  print them: measured on Claude Code 2.1.332, ``check_137 ... FAILED: expected 3 replicas`` was cut
  from the middle of a failing script's output);
- pytest ``E   `` lines (``E`` and at least three spaces, as pytest writes them) and its summary
  lines ``FAILED path::test - ...`` / ``ERROR path - ...`` (also unittest's ``FAILED (failures=1)``);
- compiler and linter diagnostics ``file:line[:col]: error: ...`` (gcc, clang, mypy) and
  ``error[E0308]: ...`` (rustc); Elixir's indented ``    error: undefined function get/2 (...)`` (a
  message of several words, so a keyword argument ``    error: reason,`` in code is not one) and the
  line that says where, ``    └─ test/x_test.exs:128: Mod."test ..."/1``. Measured on a Claude Code
  session: a ``mix test`` that failed to compile printed five such errors, and head + tail showed the
  first one's place and cut the other four. Elixir closes a *warning* with the same ``└─`` line: that
  one is no error line (:func:`error_indexes` reads the diagnostic's header above it). Seen on Claude
  Code sessions: a passing ``mix test`` that first compiled dependencies printed ~40 deprecation
  warnings; their places were kept as error lines and their messages cut, so the model read 17
  stubs between bare ``└─ lib/decoder.ex:264:82`` lines, places of warnings it could not see.
- ``patch``'s refusals: ``patch: **** malformed patch at line 23: ...``, ``Hunk #2 FAILED at 140.``,
  ``1 out of 1 hunk ignored -- saving rejects to file x.py.rej`` and the ``Reversed (or previously
  applied) patch detected!`` that says why. Why: on the swe traces a failed ``patch -p1`` ends with
  its sign-off ``patching file x.py``, which a finished task's summary quoted as the error (2 of the
  10 failed patches), and no rule kept the line that says what went wrong.
- other languages' shapes (:data:`_OTHER_LANGUAGES`): a JavaScript stack frame ``    at f
  (src/a.js:3:7)``, jest's and vitest's failure headers (`` FAIL  src/a.test.js``, ``● suite ›
  test``, ``× test``) and frames (``❯ src/a.test.js:4:20``), tsc's ``a.ts(12,5): error TS2322``,
  ``npm ERR!``, an eslint error row; Java's ``Exception in thread "main" ...``, ``Caused by: ...`` and
  ``\tat pkg.Class.m(Class.java:5)``; Go's ``panic: ...``, ``goroutine 1 [running]:``, each frame's
  ``\t/src/main.go:8 +0x1d``, ``--- FAIL: TestX`` and ``FAIL\tpkg``; Rust's ``thread 'main'
  panicked at``, ``test x ... FAILED``, ``---- x stdout ----`` and the `` --> src/main.rs:4:5`` under
  an ``error[E0308]`` (under a ``warning:`` it is none, as Elixir's ``└─``); Ruby's
  ``app.rb:3:in 'f': ... (NoMethodError)``, ``\tfrom app.rb:7:in ...``, RSpec's ``Failure/Error:``.
  Why: the dev traces are Python, Elixir and JavaScript sessions, and head + tail cut the same lines
  of any language; an agent fixing a Go panic acts on its frame the way it acts on a Python one.

What does not: code that merely names an exception. A file view line ``    raise ValueError("x")``
is indented and has no ``Name: message`` shape; a docstring line ``    ValueError: if x < 0`` is
indented; a grep hit ``pkg/mod.py:12:    raise ValueError(...)`` starts with a path and has no
``: error:``. Exception lines must start at column 0 because that is where Python's traceback
printer puts them and where source code almost never has them.

Beside them, **status lines** (:func:`is_status_line`): a line that says how the command ended,
``<returncode>1</returncode>`` (mini-swe-agent), ``Exit code 1`` (Claude Code; its ``TaskOutput``
says ``<exit_code>1</exit_code>``), ``Process exited
with code 1`` (Codex), ``(Command exited with code 1)``. Not error lines (most say 0), but the
model reads success or failure from them, so no reduction may fold them away, and the audit of what
the model reads (``benchmarks/frame_audit.py``) checks them with the same rule.

Fast by construction: :func:`error_lines` first tests the whole text for a few substrings every
rule needs (most outputs have none and cost one scan), then each line passes a substring guard
before one anchored regex is tried.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Every error line but the dotted ``pkg.mod.Name: message`` form contains one of these: the guard
# before any regex runs (one C-level search per line).
_GUARDS = (
    "Error",
    "Exception",
    "Traceback",
    'File "',
    "FAIL",
    "ERROR",
    "E   ",
    "error",
    "Interrupt",
    "Exit",
    "StopIteration",
    "exception",
    "** (",
    "\u2514\u2500",
    "patch",
    "ignored",
    "    at ",
    "\tat ",
    "\tfrom ",
    "panic",
    "goroutine ",
    ".go:",
    "Caused by",
    "npm ERR!",
    "\u25cf ",
    "\u276f ",
    "\u00d7 ",
    "--> ",
    "---- ",
    "rspec ./",
)
_GUARD_RE = re.compile("|".join(map(re.escape, _GUARDS)))

_EXC_NAME = r"(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception)"
_BARE_EXC = (
    r"(?:[A-Za-z_]\w*\.)*(?:KeyboardInterrupt|SystemExit|StopIteration|StopAsyncIteration|GeneratorExit)"
)
_GUTTER = r"[ \t|+\-]*"  # indentation and the ``|`` / ``+-+`` gutter of printed exception groups

_PLACE = r"[^\s:()][^:\n]*:\d+"  # path:line
_OTHER_LANGUAGES = (
    # JavaScript / TypeScript: a stack frame, a test runner's failure headers and frames, tsc, npm
    r"[ \t]+at (?:async )?(?:[^()\n]+ \()?(?:file://)?[^\s()]+:\d+:\d+\)?$",
    r" ?FAIL  \S",  # jest / vitest: the failing file or test
    r"[ \t]*\u25cf \S.* \u203a \S",  # jest: ● suite › test
    r"[ \t]*\u00d7 \S",  # vitest: × a failed test
    rf"[ \t]*\u276f {_PLACE}:\d+",  # vitest: ❯ file:line:col, a frame
    r"[^\s(]+\(\d+,\d+\): error TS\d+",  # tsc: a.ts(12,5): error TS2322
    rf"{_PLACE}:\d+ - error TS\d+",  # tsc --pretty: a.ts:12:5 - error TS2322
    r"npm (?:ERR!|error) \S",
    r"[ \t]+\d+:\d+ +error +\S",  # eslint (stylish): 12:5  error  message  rule
    # Java / Kotlin: the uncaught exception, its frames and causes
    r'Exception in thread "[^"\n]*" \S',
    r"Caused by: \S",
    r"[ \t]+at [\w$./<>]+\((?:[\w$.-]+\.(?:java|kt|scala|groovy):\d+|Native Method|Unknown Source)\)$",
    # Go: a panic, its goroutine, each frame's place; a failed test and package
    r"panic: \S",
    r"goroutine \d+ \[[^\]\n]+\]:$",
    r"\t[^\s:]+\.go:\d+(?: \+0x[0-9a-f]+)?$",
    r"--- FAIL: \S",
    r"FAIL\t\S",
    r"[ \t]+\w+_test\.go:\d+: \S",  # t.Errorf
    # Rust: a panic, a failed test and its output's header, where a compile error is
    r"thread '[^'\n]*' panicked at ",
    r"test \S+ \.\.\. FAILED$",
    r"---- \S+ stdout ----$",
    rf"[ \t]*--> {_PLACE}",
    # Ruby: the error's line and its frames; RSpec's failure and rerun lines
    rf"{_PLACE}:in .*\(\w*(?:Error|Exception)\)$",
    rf"\tfrom {_PLACE}:in ",
    r"[ \t]*Failure/Error: ",
    rf"rspec \./{_PLACE} ",
)
"""Error lines of other languages, as their tools print them (the dev traces are Python, Elixir and
JavaScript sessions; an agent in a Go, Rust, Java or Ruby project reads these the same way)."""

_ERROR_RE = re.compile(
    "|".join(
        (
            rf"{_GUTTER}Traceback \(most recent call last\):",
            r".*\S[ \t]*Traceback \(most recent call last\):[ \t]*$",  # after a prompt with no newline
            rf"{_GUTTER}During handling of the above exception, another exception occurred:",
            rf"{_GUTTER}The above exception was the direct cause of the following exception:",
            rf'{_GUTTER}File "[^"\n]+", line \d+',
            rf"(?:{_EXC_NAME}|{_BARE_EXC})(?::(?: |$)|$)",  # exception line: column 0, name, ": " or end
            r"\s*\*\* \([A-Z][\w.]*\) ",  # Elixir / ExUnit exception
            r"(?:FAIL|ERROR): \S",  # unittest header (and pip's ERROR: lines)
            r"[\w.\-/\[\]]+(?: \([\w.]+\))? \.\.\. (?:FAIL|FAILED|ERROR)(?:[:\s]|$)",  # name ... FAIL
            r"E {3,}\S",  # pytest E line
            r"(?:FAILED|ERROR) [^\s:]+(?:::|\.py\b)",  # pytest short summary: FAILED path::test, ERROR x.py
            r"FAILED \(",  # unittest summary
            r"[^\s:]+::\S.*? (?:FAILED|ERROR)(?: |$)",  # pytest -v result line
            rf"[^\s:][^:\n]*:\d+: {_EXC_NAME}$",  # pytest location line: path:line: ExceptionName
            r"[^\s:][^:\n]*:\d+(?::\d+)?: (?:fatal )?error\b",  # gcc, clang, mypy
            r"error(?:\[E\d+\])?: \S",  # rustc, git apply, bundlers
            r"[ \t]+error: \S+ \S",  # Elixir 1.15+ compiler diagnostic, indented
            r"[ \t]*\u2514\u2500 [^\s:][^:\n]*:\d+",  # Elixir: where that diagnostic is (└─ path:line)
            r"\u2718 \[ERROR\] ",  # esbuild
            r"patch: \*{4} \S",  # patch's fatal errors (malformed patch, can't find file, garbage)
            r"Hunk #\d+ FAILED at \d+",
            r"\d+ out of \d+ hunks? (?:FAILED|ignored)\b",
            r"Reversed \(or previously applied\) patch detected!",
            *_OTHER_LANGUAGES,
        )
    )
)
_DOTTED_RE = re.compile(r"(?:[a-z_]\w*\.)+[A-Z]\w*: \S")  # pkg.mod.Name: message (a traceback's class)


def is_error_line(line: str) -> bool:
    """True when ``line`` (one line, no newline) is an error line by the rules in the module doc."""
    if not line:
        return False
    if _GUARD_RE.search(line) is not None and _ERROR_RE.match(line) is not None:
        return True
    return "a" <= line[0] <= "z" and ": " in line and _DOTTED_RE.match(line) is not None


_STATUS_RE = re.compile(
    r"\s*(?:<returncode>-?\d+</returncode>|<exit_code>-?\d+</exit_code>"
    r"|\(?(?:Process |Command )?(?:exited with|exit) (?:code|status):? -?\d+\)?"
    r"|Exit code:? -?\d+)\s*\Z",
    re.I,
)


def is_status_line(line: str) -> bool:
    """True when ``line`` (one line, no newline) only says how a command ended (module doc)."""
    return ("xit" in line or "returncode" in line) and _STATUS_RE.match(line) is not None


_ELIXIR_WHERE = re.compile(r"[ \t]*(?:\u2514\u2500|-->) ")
"""Where a diagnostic is: Elixir's ``└─ path:line``, rustc's `` --> src/main.rs:4:5``."""
_ELIXIR_HEADER = re.compile(r"[ \t]*(error|warning)(?:\[\w+\])?: \S")
_ELIXIR_BLOCK = 60
"""How far above a ``└─`` line its diagnostic's header may be (message, code excerpt and gutter)."""


def _closes_warning(lines: Sequence[str], i: int) -> bool:
    """Whether ``lines[i]``, an Elixir ``└─ path:line`` line, ends a warning (not an error): the
    nearest diagnostic header above it, within the diagnostic, says ``warning:``."""
    if _ELIXIR_WHERE.match(lines[i]) is None:
        return False
    for j in range(i - 1, max(-1, i - _ELIXIR_BLOCK), -1):
        header = _ELIXIR_HEADER.match(lines[j])
        if header is not None:
            return header.group(1) == "warning"
        if _ELIXIR_WHERE.match(lines[j]) is not None:  # the diagnostic before: this one has no header
            return False
    return False


def error_indexes(lines: Sequence[str]) -> set[int]:
    """Indexes of the error lines among one output's ``lines`` (no newlines): :func:`is_error_line`,
    except an Elixir ``└─`` place line that ends a warning (its header is above it)."""
    return {i for i, line in enumerate(lines) if is_error_line(line) and not _closes_warning(lines, i)}


def error_lines(text: str) -> list[str]:
    """The error lines of ``text`` in order of appearance (repeats included), verbatim."""
    if _GUARD_RE.search(text) is None and ": " not in text:
        return []
    lines = text.split("\n")
    return [lines[i] for i in sorted(error_indexes(lines))]


_FRAME_LINE = re.compile(r'^[ \t|+\-]*File "[^"\n]+", line \d+')


def frame_code_lines(lines: list[str]) -> set[int]:
    """Indexes of the source line printed under each traceback frame (the code the frame points at).

    Not error lines themselves, but the reduction keeps them with their frame: ``File "x.py", line 3``
    without ``    return a / b`` under it tells the agent where, not what.
    """
    out: set[int] = set()
    for i, line in enumerate(lines[:-1]):
        if _FRAME_LINE.match(line):
            nxt = lines[i + 1]
            if nxt.startswith("    ") and not _FRAME_LINE.match(nxt):
                out.add(i + 1)
    return out
