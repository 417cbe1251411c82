"""Error lines: the lines of a tool output an agent acts on when something failed.

Why one recogniser: the reduction passes must never cut these lines (DESIGN 4, normal mode), and the
benchmark measures that they stayed in view; both must agree on what an error line is. Recognised:

- ``Traceback (most recent call last):`` and traceback frames ``  File "path", line N[, in f]``;
- exception lines: ``Name(Error|Exception|Warning)[: message]`` at the start of a line, dotted names
  allowed (``django.core.exceptions.ImproperlyConfigured: ...``), also after pytest's ``E   ``;
- pytest ``E `` lines, ``FAILED``/``ERROR`` summary lines, unittest ``FAIL:``/``ERROR:`` headers;
- compiler and linter diagnostics ``path:line[:col]: error|fatal error|Error``.

Ordinary code is not an error line: ``    raise ValueError("x")`` in a file view is code, not an
exception that happened, and ``except KeyError:`` is a handler. Every test is anchored at the line
start, so scanning a million-line log stays linear and cheap.
"""

from __future__ import annotations

import re

_FRAME = re.compile(r'^\s*File "[^"\n]+", line \d+')
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):\s*$")
_EXCEPTION = re.compile(
    r"^(?:E\s+)?(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Warning|Failure|Interrupt|Exit)(?::\s.*|:?\s*$)"
)
_QUALIFIED = re.compile(r"^(?:[a-z_]\w*\.)+[A-Z]\w+: \S")
"""``package.module.SomeName: message``: an exception named by its module path (Django's
``ImproperlyConfigured``, ``StopIteration`` ...), whatever its suffix."""
_PYTEST_E = re.compile(r"^E\s{2,}\S")
_SUMMARY = re.compile(r"^(?:FAILED|ERROR)\s+\S+(?:::|\.py)")
_UNITTEST = re.compile(r"^(?:FAIL|ERROR): \S")
_DIAGNOSTIC = re.compile(r"^[^\s:][^:\n]{0,300}:\d+(?::\d+)?: (?:error|fatal error|Error|ERROR)\b")
_CHAINED = re.compile(r"^(?:During handling of the above exception|The above exception was the direct cause)")


def is_error_line(line: str) -> bool:
    """True when ``line`` reports a failure (see the module docstring for what counts)."""
    if not line or len(line) > 2000:
        return False
    head = line[:1]
    if head in " \t":
        return bool(_FRAME.match(line) or _TRACEBACK.match(line))
    return bool(
        _TRACEBACK.match(line)
        or _EXCEPTION.match(line)
        or _QUALIFIED.match(line)
        or _PYTEST_E.match(line)
        or _SUMMARY.match(line)
        or _UNITTEST.match(line)
        or _CHAINED.match(line)
        or _DIAGNOSTIC.match(line)
    )


def error_lines(text: str) -> list[str]:
    """The error lines of ``text``, in order."""
    return [line for line in text.splitlines() if is_error_line(line)]


def frame_code_lines(lines: list[str]) -> set[int]:
    """Indexes of the source line printed under each traceback frame (the code the frame points at)."""
    out: set[int] = set()
    for i, line in enumerate(lines[:-1]):
        if _FRAME.match(line):
            nxt = lines[i + 1]
            if nxt.startswith("    ") and not _FRAME.match(nxt):
                out.add(i + 1)
    return out
