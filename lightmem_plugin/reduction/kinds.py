"""What kind of output a tool result is, from the command that produced it and from its content.

Why kinds: agents use different lines of different outputs. Measured on the dev traces (swe, outputs
above the normal trigger), what the agent later quotes or acts on is: in a test run, the failures with
their tracebacks and the summary line; in a traceback, the frames and the exception; in search
results, the match lines; in a file view, whatever part it asked for (its lines are spread over the
whole view, not at the ends); in a script's prints and a listing, anything (the agent wrote the
script to print it; it picks names from the middle of a listing). Head + tail truncation serves none
of these, so each kind gets its own select pass (:mod:`.passes`) and head + tail stays the fallback
for ``other``.

The command is read from the tool call's arguments (``{"command": ...}`` of a shell tool, or a host's
named tool such as Claude Code's ``Read``/``Grep``/``Glob``, or the ``cmd`` of each
``tools.exec_command`` in a Codex code-mode script); a chain such as ``cd /repo && python
-m pytest -x 2>&1 | tail -50`` is classified by its most telling program. Content decides when the
command says nothing (``./run`` printing a traceback) and confirms what the command claims (a
``pytest`` run that never started is a traceback or ``other``; a script that ran a test suite is a
test run).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

Kind = Literal[
    "file_view",
    "search",
    "test_run",
    "traceback",
    "build_log",
    "diff",
    "json",
    "html",
    "listing",
    "report",
    "script",
    "other",
]
KINDS: tuple[Kind, ...] = get_args(Kind)


@dataclass(frozen=True)
class ToolCall:
    """The call that produced an output: tool name and raw arguments (JSON text or plain)."""

    name: str = ""
    arguments: str = ""

    @property
    def command(self) -> str:
        """The shell command line, when the tool is a shell (``command``/``cmd``/``script`` argument)."""
        try:
            args = json.loads(self.arguments) if self.arguments.strip().startswith("{") else None
        except ValueError:
            args = None
        if isinstance(args, dict):
            for key in ("command", "cmd", "script", "code"):
                value = args.get(key)
                if isinstance(value, str):
                    return value
                if isinstance(value, list) and all(isinstance(v, str) for v in value):
                    return " ".join(value)
            return ""
        if self.name == CODE_MODE_TOOL:
            return code_mode_commands(self.arguments)
        return self.arguments if self.name.lower() in ("bash", "shell", "sh", "exec_command") else ""


CODE_MODE_TOOL = "exec"
"""Codex's code mode (its default model): one free-form ``exec`` tool whose input is JavaScript that
runs the commands, ``const r = await tools.exec_command({cmd: "cat f.py"}); text(r);``."""
_CODE_MODE_CMD = re.compile(
    r"""tools\.exec_command\(\s*\{\s*["']?cmd["']?\s*:\s*("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"""
)


def code_mode_commands(script: str) -> str:
    """The command lines a Codex code-mode script runs, one a line ("" when it runs none we can read)."""
    found: list[str] = []
    for match in _CODE_MODE_CMD.finditer(script):
        literal = match.group(1)
        if literal.startswith("'"):  # a single-quoted JavaScript string: the same escapes, other quote
            literal = '"' + literal[1:-1].replace("\\'", "'").replace('"', '\\"') + '"'
        try:
            value = json.loads(literal)
        except ValueError:
            continue
        if isinstance(value, str):
            found.append(value)
    return "\n".join(found)


_TOOL_KINDS: dict[str, Kind] = {
    "read": "file_view",
    "view": "file_view",
    "read_file": "file_view",
    "grep": "search",
    "search": "search",
    "glob": "listing",
    "ls": "listing",
    "list_dir": "listing",
    # a subagent's final message, written for this agent to read (Claude Code's Task, later Agent):
    # on the dev traces 60% of its later uses were cut when it was reduced like any other output
    "task": "report",
    "agent": "report",
    # a web search's results and a fetched page's digest (Claude Code's WebSearch, WebFetch): what the
    # agent asked to read; on the dev traces head + tail cut the install line it then followed
    "websearch": "report",
    "webfetch": "report",
}
_TEST_PROGRAMS = re.compile(
    r"(?:^|[\s/])(?:pytest|py\.test|tox|nox|runtests\.py|unittest|nosetests|"
    r"manage\.py\s+test|go\s+test|cargo\s+(?:test|nextest)|(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test|jest|mocha"
    r"|phpunit|rspec|mix\s+test|dotnet\s+test|vitest|deno\s+test|swift\s+test|ctest|sbt\s+test"
    r"|(?:mvn|mvnw|gradle|gradlew)\s+(?:[\w:.=-]+\s+)*(?:[\w.-]*:)*test|make\s+(?:test|check)|rake\s+(?:test|spec)"
    r"|artisan\s+test)\b"
)


_PREFIXES = {
    "npx": 1,
    "bunx": 1,
    "pnpx": 1,
    "bundle": 2,
    "uv": 2,
    "poetry": 2,
    "pipenv": 2,
    "pdm": 2,
    "hatch": 2,
}
"""Programs that run another (``npx jest``, ``bundle exec rspec``, ``uv run pytest``): how many words
of theirs come before it."""


def runs_tests(words: Sequence[str]) -> bool:
    """Whether the simple command ``words`` (program first) runs a test suite, by the same list of
    test programs as the kind of its output: the session record's ``Tests run`` (``eviction.effects``)
    counted only Python's, so a finished task's summary said nothing of a ``mix test`` or ``go test``.
    Anchored at the program: ``echo make test`` and ``pip install pytest`` run none."""
    if not words:
        return False
    skip = _PREFIXES.get(posixpath.basename(words[0]), 0)
    rest = [posixpath.basename(words[0]), *words[1:]] if skip == 0 else list(words[skip:])
    while skip and rest and rest[0].startswith("-"):  # npx --yes vitest
        rest = rest[1:]
    return bool(rest) and _TEST_PROGRAMS.match(" ".join(rest)) is not None


_SEARCH = re.compile(r"^(?:grep|egrep|fgrep|rg|ag|ack|git\s+grep)\b")
_VIEW = re.compile(r"^(?:cat|nl|head|tail|less|more|bat|sed\s+-n|awk\s+'NR)\b")
_LIST = re.compile(r"^(?:ls|find|tree|du|git\s+ls-files|git\s+status)\b")
_GIT_LIST = re.compile(
    r"^git\s+(?:log\b(?!.*\s(?:-p|--patch|-u)\b)|(?:show|diff)\b.*\s--(?:stat|name-only|name-status)\b)"
)
"""``git log`` without a patch (commits, one a line with ``--oneline``), ``git show/diff --stat``
(the files a commit changed): lists the agent picks from. Read as ``other`` and a diff before,
head + tail cut their middle (an astroid session's commit range, 30 lines it asked for)."""
_SHOW = re.compile(r"^[\w.-]+(?:\s+[a-z][\w-]*)?\s+(?:show|view|describe)\b")
"""A tool's "show me this item" subcommand (``bd show ID``, ``gh issue view 12``, ``kubectl describe
pod p``): a document for the agent to read, often the task's own spec. On the dev traces Claude Code
later quoted the spec's bullets (which files to change, what to add) from ``bd show``; reduced as
``other`` (head + tail) 32% of those uses were out of view. ``git show`` is a diff (checked first)."""
_BUILD = re.compile(
    r"^(?:pip3?\s+install|python3?\s+-m\s+pip\s+install|python3?\s+setup\.py|make|cmake|npm\s+(?:install|ci|run\s+build)"
    r"|yarn\s+(?:install|build)|cargo\s+build|go\s+build|mvn|gradle|apt(?:-get)?\s+install|conda\s+install|uv\s+pip)\b"
)
_DIFF_CMD = re.compile(r"^(?:git\s+(?:diff|show|log\s+-p)|diff\s+-u|diff\b)")
_SETUP = re.compile(
    r"^(?:cat\s[^|]*(?:>|<<)|tee\b|printf\b|mkdir\b|cp\b|mv\b|rm\b|touch\b|chmod\b|ln\b|sleep\b|true\b|set\b"
    r"|git\s+(?:add|commit|checkout|stash|apply)\b|patch\b|sed\s+-i)"
)
"""Segments that write or set up rather than print what the agent asked to see."""
_RUN = re.compile(r"^(?:python3?|node|bash|sh|ruby|perl|java|\./)\S*\s")
_SCRIPT = re.compile(
    r"^(?:python3?(?:\.\d+)?|node|ruby|perl|php)\s+(?:-[uBEIOsS]+\s+)*"
    r"(?:-[ce]\s|(?![\w./-]*\b(?:setup|manage)\.py\b)[\w./-]+\.(?:py|js|mjs|cjs|rb|pl|php)\b)"
)
"""A program run on a script file or inline code (``python check_fix.py``, ``python -c "..."``,
``node probe.js``): what the agent wrote a script to print. Not ``-m`` (a module of the project or a
tool), nor ``setup.py``/``manage.py`` (a project's build and admin commands), nor ``bash x.sh``
(often a build). :mod:`.fileview` says why its prints stay whole."""
XARGS_VALUE_OPTIONS = "nIPdLEsa"
"""The ``xargs`` options that take a value (``-n 1``, ``-I {}``): the word after them is no program."""
_XARGS = re.compile(rf"^xargs(?:\s+(?:-[{XARGS_VALUE_OPTIONS}]\s*\S+|--[\w-]+(?:=\S+)?|-[0rtpx]+))*\s+")
"""``xargs`` and its options: the program it runs is the one that prints (``find . | xargs grep -n x``)."""
_FIND_EXEC_SEARCH = re.compile(r"\s-exec(?:dir)?\s+(?:grep|egrep|fgrep|rg)\b")
"""``find ... -exec grep -n x {} +``: search results, like ``find | xargs grep``. Read as a listing
before, so head + tail cut its match lines (a django session's later-used matches, 27 and 47 calls
on)."""
_SEGMENT_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\n)\s*")

_PYTEST_HEADER = re.compile(
    r"^={3,} (?:test session starts|FAILURES|ERRORS|short test summary info) ={3,}", re.M
)
_PYTEST_SUMMARY = re.compile(
    r"^(?:=+ .*\b(?:passed|failed|error|errors|skipped|no tests ran)\b"
    r"|\d+ (?:passed|failed|errors?|skipped|deselected)\b)"  # -q prints it bare: `12 passed in 0.31s`
    r".* in [\d.]+s",
    re.M,
)
_UNITTEST_RAN = re.compile(r"^Ran \d+ tests? in [\d.]+s$", re.M)
_OTHER_SUMMARY = re.compile(
    r"^(?:(?:\d+ doctests?, )?\d+ tests?, \d+ failures?\b"  # ExUnit
    r"|\d+ examples?, \d+ failures?\b"  # RSpec
    r"|test result: (?:ok|FAILED)\. \d+ passed"  # cargo test
    r"|Tests:\s+.*\d+ total$"  # Jest
    r"|[ \t]*(?:Test Files|Tests)  +\d+ (?:failed|passed)\b"  # vitest
    r"|(?:ok  |FAIL)\t\S+\t(?:[\d.]+s|\(cached\))"  # go test, per package
    r")",
    re.M,
)
_SUMMARY_TAIL = 4000
"""Chars from an output's end that hold its last three lines, a runner's summary among them."""
_UNITTEST_HEAD = re.compile(r"^(?:FAIL|ERROR): \S+ \(", re.M)
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):$", re.M)
_SEARCH_LINE = re.compile(r"^(?:(?=[^:\n]*[A-Za-z./_])[^\s:][^:\n]{0,300}:\d+[:-]|\d+[:-](?!\d\d[-:.]\d))")
"""``path:12:`` / ``path-12-`` (grep -n, rg) or ``12:`` (grep -n on one file). The path must hold a
letter, dot, slash or underscore and a bare number must not start a clock: a log whose lines begin
``2026-11-30 12:00:00`` or ``12:00:01`` is a log, not search results (it read as one before, and the
search budget then kept a 24 KB build log nearly whole)."""
_NUMBERED_LINE = re.compile(r"^\s*\d+(?:\t| {1,3}|→)")


_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?[^\n]*\n.*?\n\s*\1\s*(?:\n|$)", re.S)


def _programs(command: str) -> list[str]:
    """The program part of each segment of a shell chain (``cd``, env assignments and heredoc
    bodies dropped: a heredoc is data the command writes, not a command)."""
    out: list[str] = []
    command = _HEREDOC.sub("<<HEREDOC\n", command)
    for segment in _SEGMENT_SPLIT.split(command.strip()):
        for piece in segment.split("|"):
            words = piece.strip()
            while re.match(r"^[A-Za-z_][A-Za-z0-9_]*=\S*\s+", words):  # VAR=value prefix
                words = re.sub(r"^[A-Za-z_][A-Za-z0-9_]*=\S*\s+", "", words, count=1)
            words = _XARGS.sub("", words)
            if (
                words
                and not words.startswith(("cd ", "cd\t", "#", "echo ", "export ", "source "))
                and words not in ("cd", "pwd")
            ):
                out.append(words)
    return out


def kind_of_command(call: ToolCall | None) -> Kind | None:
    """The kind the command (or tool) promises, or None when it says nothing."""
    if call is None:
        return None
    named = _TOOL_KINDS.get(call.name.lower())
    if named is not None:
        return named
    programs = _programs(call.command)
    if not programs:
        return None
    joined = " ".join(programs)
    if _TEST_PROGRAMS.search(joined):
        return "test_run"
    telling = [p for p in programs if not _SETUP.match(p)]
    if not telling:
        return None
    first = telling[0]
    programs = telling
    if _SCRIPT.match(first):
        return "script"  # its content decides first (a traceback, a test run, a log)
    if _RUN.match(first):
        return None  # a program's output: its content decides (a traceback, a log, plain prints)
    if _GIT_LIST.match(first):
        return "listing"
    if _DIFF_CMD.match(first):
        return "diff"
    if _BUILD.match(first):
        return "build_log"
    if _SEARCH.match(first):
        return "search"
    if _VIEW.match(first):
        # `cat -n f | grep x` is a search over a file view; `grep x f | head` stays a search
        return "search" if any(_SEARCH.match(p) for p in programs[1:]) else "file_view"
    if _LIST.match(first):
        searched = _FIND_EXEC_SEARCH.search(first) or any(_SEARCH.match(p) for p in programs[1:])
        return "search" if searched else "listing"
    if _SHOW.match(first):
        return "search" if any(_SEARCH.match(p) for p in programs[1:]) else "report"
    return None


def _share(lines: Sequence[str], pattern: re.Pattern[str]) -> float:
    sample = [line for line in lines[:400] if line.strip()]
    return sum(1 for line in sample if pattern.match(line)) / len(sample) if sample else 0.0


def reports_tests(text: str) -> bool:
    """Whether ``text`` holds a test runner's own summary (pytest's ``== 2 passed in 0.10s ==``,
    unittest's ``Ran 4 tests in 0.031s``, or another runner's among the last three lines), whatever
    command printed it: a script that runs a suite (``python run_q_tests.py``, a ``python -c`` calling
    ``unittest.main``) ran tests. Another runner's summary counts only at the end: up in the middle it
    may be a script's print (Claude Code's TaskOutput of a background ``mix test`` names no command)."""
    if _PYTEST_SUMMARY.search(text) or _UNITTEST_RAN.search(text):
        return True
    tail = text[-_SUMMARY_TAIL:].splitlines()[-3:]  # the last lines, without splitting a long output
    return bool(_OTHER_SUMMARY.search("\n".join(line.strip() for line in tail)))


def shows_test_run(text: str) -> bool:
    """Whether ``text`` shows a test runner at work: its summary anywhere, pytest's section rules, or a
    unittest ``FAIL: test_x (...)`` header. A test command that printed none of it ran no test the
    agent saw (``pytest ... 2>/dev/null || echo "Test failed"`` prints only the echo)."""
    return bool(
        reports_tests(text)
        or _PYTEST_HEADER.search(text)
        or _OTHER_SUMMARY.search(text)
        or _UNITTEST_HEAD.search(text)
    )


def classify(text: str, call: ToolCall | None = None) -> Kind:
    """The output's kind: the command's promise checked against the content, else the content alone."""
    lines = text.splitlines()
    promised = kind_of_command(call)
    is_test = bool(_PYTEST_HEADER.search(text)) or reports_tests(text)
    is_test = is_test or bool(promised == "test_run" and _OTHER_SUMMARY.search(text))
    is_test = is_test or bool(_UNITTEST_HEAD.search(text) and _TRACEBACK.search(text))
    if promised == "test_run" and is_test:
        return "test_run"
    if promised in ("file_view", "search", "listing", "diff", "build_log", "report"):
        return promised
    if is_test:
        return "test_run"
    if promised == "script":
        # also when it crashed: the traceback pass kept the frames and cut the prints above them, which
        # the agent wrote the script for (a django session's "Deferred SQL after create_model:"
        # lines, used three times after); whole, the same K on the swe traces
        return "script"
    if _TRACEBACK.search(text):
        return "traceback"
    if promised == "test_run":
        return "other"  # a test command that printed no test output (not installed, a syntax error ...)
    if _share(lines, _SEARCH_LINE) >= 0.6:
        return "search"
    if _share(lines, _NUMBERED_LINE) >= 0.8:
        return "file_view"
    return "other"
