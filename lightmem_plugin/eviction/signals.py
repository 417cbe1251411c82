"""Tool events read from an OpenAI chat-form conversation, incrementally.

Why a shared, incremental log: the heuristic estimator and the session record both need "which call
read or wrote which file, did it fail, what did it print", and the estimator re-reads the whole
session every few turns. Hosts only append, so :class:`EventLog` parses each message once and re-parses
from scratch only if an already-seen message changed (checked by a per-message xxh3 fingerprint, about
1 µs a message) or was removed.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import xxhash

from ..model import Message, ToolCallPart
from ..reduction.error_lines import error_lines
from ..reduction.kinds import reports_tests, shows_test_run
from .effects import Effects, FileTracker, Kind, add_path
from .entries import answered_call, tool_calls, turn_text

_RC = re.compile(r"^\s*<returncode>(-?\d+)</returncode>")
_EXIT = re.compile(r"(?:exit code|exit_code|exit status|exited with code|returncode)[\"':=\s]*(-?\d+)", re.I)
_ERROR_LINE = re.compile(
    r"^(?:[\w.]*(?:Error|Exception|Exit)\b.*|FAILED .*|ERROR[: ].*|E +\w+.*|fatal: .*|error: .*)$", re.M
)
# a traceback's frames, header and chain separators: where it failed, not why
_FRAME = re.compile(r'^[ \t|+\-]*(?:File "|Traceback \(|During handling|The above exception)')
_SAYS_FAILED = re.compile(r"\b(?:FAIL(?:ED|URE)?|[Ff]ailed|[Ee]rror|ERROR)\b")
# a test run that failed, or never ran (pytest's and unittest's summaries; a missing runner)
_UNITTEST_TALLY = re.compile(r"FAILED \((?:failures|errors)=\d+")
"""unittest's last line, ``FAILED (errors=1)``: it says that the run failed, not why; the exception
line above it does (``ModuleNotFoundError: No module named 'django'``)."""
_PYTEST_FAIL = re.compile(
    rf"\b\d+ (?:failed|errors?)\b|^{_UNITTEST_TALLY.pattern}|No module named|command not found", re.M
)
_APPLY_PATCH = re.compile(r"^\*\*\* (?P<op>Add|Update|Delete) File: (?P<path>.+)$", re.M)
_CD = re.compile(r"^cd \S+ && ")
_ENV = re.compile(r"^(?:[A-Za-z_]\w*=\S*\s+)+(?=\S)")
"""Variables set for the one command (``PYTHONPATH=src:$PYTHONPATH pytest ...``): not what ran."""
_ECHO = re.compile(r"\s*(?:&&|;|\|\|)\s*echo\b[^&;|]*$")
"""A closing ``&& echo "Patch applied successfully"``: the agent's own words, not what ran."""
_VIEW = re.compile(r"(?:\s*2>&1|\s*\|\s*(?:head|tail)(?:\s+-n)?(?:\s+[-+]?\d+)?)+\s*$")
"""What only chooses which part of a command's output the agent sees (``2>&1 | tail -20``)."""
_PIPED = re.compile(r"\|\s*(?:head|tail|grep|egrep|sed|awk|cut|sort|uniq|less|more|cat|tee)\b[^|]*$")
"""The command's last stage only filters what it printed, so the exit code is the filter's."""
_FRAME_LINE = re.compile(r'^\s+File "[^"]*", line \d+')
_CRASH_SCAN = 8000  # chars from the end that hold the exception and the frames right above it
_CRASH_TAIL = 6
"""At most this many lines may follow an uncaught traceback's exception line (its message's own
continuation lines) for the output to end in the crash."""
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?::(?:\s.*)?)?$")
"""An exception line: its (dotted) class name, then its message (``django.core.exceptions.ImproperlyConfigured: ...``)."""
_NOT_RUN = re.compile(r"^\S*sh: (?:-c: )?(?:line )?1: [Ss]yntax error\b", re.M)
"""The shell could not parse the command's first line, so none of it ran (bash runs a script line by
line: a syntax error further down leaves the lines above it run). Why: ``sed -i '...model\\'s ...'
options.py`` closed its quote early; bash said ``syntax error near unexpected token `)'`` and the
finished task's summary still listed ``verbose_name``, ``or``, ``a``, ``custom`` as files it modified."""
_RUNNER_MISSING = re.compile(
    r"No module named '?(?:pytest|nose|tox|nox)'?\s*$"
    r"|\b(?:pytest|py\.test|tox|nox|nosetests|jest|vitest|mocha): (?:command )?not found",
    re.M,
)
"""The test command found no test runner, so it ran no test. Why: in the continuous chains the agent's
``python -m pytest ...`` said ``No module named pytest`` and it ran the suite by a script next; the
finished task's summary still said ``Tests run 1x; last ... failed: No module named pytest``."""
_SHELL_TOOLS = ("bash", "shell", "exec_command", "execute_bash", "run_command", "terminal", "local_shell")
_PATH_KEYS = ("path", "file_path", "filePath", "filename", "file", "notebook_path")


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """One tool call and its result, with what it did to files."""

    seq: int
    call_index: int
    result_index: int | None
    tool: str
    command: str
    norm: int
    kind: Kind
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    whole: tuple[str, ...]
    full: tuple[str, ...]
    deletes: tuple[str, ...]
    returncode: int | None
    failed: bool
    output_chars: int
    output_hash: int
    error_line: str
    call_chars: int
    label: str
    """A short, stable rendering of the call for evidence and record lines: its first command line
    and, for a script of several, its last one (see :func:`command_label`). Set once when the event
    is made: the session record reads every finished task's labels at each batch of calls."""


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([\w.-]+)\1")
_OPEN_QUOTE = re.compile(r"""(?:^|\s)-c\s+(['"])$""")
_SETUP = re.compile(
    r"(?:import |from \S+ import |sys\.path\.|os\.environ|os\.chdir\(|django\.setup\(|settings\.configure\(|#)"
)
"""A script's opening lines that every probe shares: three ``python -c "`` calls of one task were
all labelled ``python -c "import os``; the first line after them says what each did."""


def _setup_line(line: str) -> bool:
    """Whether a (stripped) code line is set-up or only part of a statement: an import, a path or
    settings line, a line that opens or continues a bracket (``DEBUG=True,``), or a block's header."""
    return (
        bool(_SETUP.match(line))
        or line.endswith((",", "(", "[", "{", ":"))
        or line.startswith((")", "]", "}"))
    )


def command_label(command: str, width: int = 70) -> str:
    """The first command line of ``command`` and, when more ran after it, `` … `` and the last one.

    Heredoc bodies are not command lines, and a ``python -c "`` that opens its code on the next line
    shows its first statement after the set-up (:func:`_setup_line`). Why: a summary said ``Ended failing: `cat > fix2.patch << 'EOF'` -> error: corrupt
    patch at line 14`` where the ``git apply`` under the heredoc failed, and ``python -c "`` named
    no code at all."""
    lines = command.strip().splitlines()
    shown: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line:
            continue
        shown.append(line)
        for m in _HEREDOC.finditer(line):  # skip each body to its delimiter line
            while i < len(lines) and lines[i].strip() != m.group(2):
                i += 1
            i += 1
    if not shown:
        return ""
    first = _ENV.sub("", _CD.sub("", shown[0]))
    opened = _OPEN_QUOTE.search(first)
    if opened and len(shown) > 1:
        code = (
            list(itertools.takewhile(lambda ln: not ln.startswith(opened.group(1)), shown[1:])) or shown[1:2]
        )
        first = f"{first}{next((ln for ln in code if not _setup_line(ln)), code[0])}"
        last = ""  # the rest is the code and its closing quote
    else:
        last = shown[-1] if len(shown) > 1 else ""
    if not last:
        return _clip(first, width)
    room = width - 3
    tail = _clip(last, room // 2)
    head_room = room - len(tail)  # a script's first line: ``cat > f.py << 'EOF'``, ``cp a b``: its start
    return f"{first if len(first) <= head_room else first[: head_room - 3] + '...'} … {tail}"


def _clip(line: str, width: int) -> str:
    """``line`` in ``width`` chars: whole; else without the filters that only pick the part of its
    output shown (``2>&1 | tail -50``, ``| grep -v Warning``) and a closing ``&& echo "done"``; else
    its start and end around ``...``.

    Why the end: it names what the command ran on. Cut at the end, two runs of one suite read the
    same (``Tests run 10x; last `PYTHONPATH=src:$PYTHONPATH python -m pytest tests/test_serializatio...`
    passed`` above ``Ended failing: `PYTHONPATH=src:$PYTHONPATH python -m pytest tests/test_serializatio...` ->
    FAILED``: two different tests)."""
    while len(line) > width:
        shorter = _ECHO.sub("", _PIPED.sub("", _VIEW.sub("", line))).rstrip()
        if not shorter or shorter == line:
            break
        line = shorter
    if len(line) <= width:
        return line
    end = (width - 3) * 2 // 5
    return f"{line[: width - 3 - end]}...{line[len(line) - end :]}"


def run_key(command: str) -> int:
    """One key for the runs of one command, whatever part of its output each run showed.

    Why: a finished task's summary says which commands ended failing, by the newest run of each. An
    agent reruns a test suite as ``pytest tests/ -x 2>&1 | tail -50``, then ``... | tail -20``; keyed
    by the whole line, the second run passing left the first listed as ``Ended failing`` (seen on
    the continuous chains: ``FAILED tests/test_utils.py::...`` under a suite that passed last)."""
    return xxhash.xxh3_64_intdigest(_VIEW.sub("", _spelled(command)).encode("utf-8", "surrogatepass"))


def _spelled(command: str) -> str:
    """``command`` as its reruns spell it too: whitespace runs as one space, no leading ``cd DIR &&``."""
    return _CD.sub("", " ".join(command.split()))


@dataclass(frozen=True, slots=True)
class Said:
    """A user or assistant text at message ``index``."""

    index: int
    role: str
    text: str


def _fingerprint(msg: Message) -> int:
    h = xxhash.xxh3_64()
    h.update(msg.role.encode())
    h.update(turn_text(msg).encode("utf-8", "surrogatepass"))
    for call in tool_calls(msg):
        h.update(f"{call.id}|{call.name}|{call.arguments}".encode("utf-8", "surrogatepass"))
    h.update(answered_call(msg).encode("utf-8", "surrogatepass"))
    return h.intdigest()


def _arguments(call: ToolCallPart) -> tuple[str, dict[str, Any]]:
    args: Any
    try:
        args = json.loads(call.arguments)
    except ValueError:
        args = {"command": call.arguments}
    return call.name or "tool", args if isinstance(args, dict) else {}


def _effects(tracker: FileTracker, tool: str, args: dict[str, Any]) -> tuple[str, Effects]:
    """The command text shown for a call and its file effects."""
    command = args.get("command", args.get("cmd"))
    if isinstance(command, list):
        words = [str(w) for w in command]
        wrapped = words[:2] in (["bash", "-lc"], ["bash", "-c"], ["sh", "-c"]) and len(words) > 2
        command = words[2] if wrapped else " ".join(words)
    low = tool.lower()
    path_key = next((k for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
    if "patch" in low and isinstance(args.get("input", args.get("patch")), str):
        text = str(args.get("input", args.get("patch")))
        return f"{tool} {text[:60]}", apply_patch_effects(tracker, text)
    if path_key is not None and not (low in _SHELL_TOOLS and isinstance(command, str)):
        return _editor(tracker, tool, args, str(args[path_key]))
    if isinstance(command, str):
        return command, tracker.shell(command)
    explores = any(w in low for w in ("grep", "glob", "search", "find", "list", "ls"))
    return tool, Effects(kind="explore" if explores else "other")


def apply_patch_effects(tracker: FileTracker, text: str) -> Effects:
    """Effects of an ``apply_patch`` envelope (``*** Update File: path``)."""
    fx = Effects(kind="write")
    for m in _APPLY_PATCH.finditer(text):
        path = tracker.norm(m.group("path").strip(), None)
        add_path(fx.deletes if m.group("op") == "Delete" else fx.writes, path)
        if m.group("op") == "Add":
            add_path(fx.whole, path)
    return fx


def _editor(tracker: FileTracker, tool: str, args: dict[str, Any], raw: str) -> tuple[str, Effects]:
    sub = str(args.get("command") or "")
    low = f"{tool} {sub}".lower()
    path = tracker.norm(raw, None)
    fx = Effects()
    if path is None:
        return f"{tool} {sub} {raw}".strip(), fx
    if any(w in low for w in ("view", "read", "open", "cat")):
        fx.reads.append(path)
        if not any(k in args for k in ("view_range", "offset", "limit")):
            fx.full.append(path)
        fx.kind = "read"
    elif any(w in low for w in ("create", "write")):
        fx.writes.append(path)
        fx.whole.append(path)
        fx.kind = "write"
    elif any(w in low for w in ("edit", "replace", "insert", "undo", "patch")):
        fx.writes.append(path)
        fx.kind = "write"
    return f"{tool} {sub} {path}".replace("  ", " ").strip(), fx


def _test_kind(kind: Kind, output: str, reported: bool) -> Kind:
    """The call's kind, corrected by what it printed: a run whose output holds a test runner's summary
    ran tests (a ``python run_q_tests.py`` or ``python -c`` calling ``unittest``: its ``Ran 15 tests ...
    OK`` is how the task ended, and the summary named the failed ``pytest`` attempt before it
    instead); a test command that found no runner ran none. ``reported``: :func:`reports_tests` of
    ``output``."""
    if kind in ("run", "other") and reported:
        return "test"
    if kind == "test" and not reported and _RUNNER_MISSING.search(output[-1000:]):
        return "run"
    return kind


def _outcome(output: str, fx: Effects, tested: bool, piped: bool) -> tuple[int | None, bool, str]:
    """Return code (if the output says), whether the call failed, and its salient error line;
    ``tested``: judge it as a test run too (a failure summary fails it whatever the exit code);
    ``piped``: the command ends in a filter (``| tail -50``), whose exit code says nothing of it."""
    m = _RC.match(output)
    if m is None:
        m = _EXIT.search(output[:200]) or _EXIT.search(output[-200:])
    rc = int(m.group(1)) if m else None
    if rc is not None:
        failed = rc != 0 and not (rc == 1 and fx.benign_rc1)
        failed = failed or (piped and ends_in_crash(output))
    else:
        head = output.lstrip()[:12].lower()
        failed = "Traceback (most recent call last)" in output or head.startswith(("error", "<exception>"))
    if tested and _PYTEST_FAIL.search(output[-2000:]):
        failed = True
    if not failed:
        return rc, False, ""
    line = _unframed(_failure_line(output[-4000:])) or f"exit {rc}"
    return rc, True, line if len(line) <= 160 else line[:157] + "..."


def ends_in_crash(output: str) -> bool:
    """Whether ``output`` ends in an uncaught Python exception: an exception line right under a
    traceback's frames (``  File "...", line N``), followed by at most a few lines of its message.

    Why: behind ``2>&1 | tail -50`` the exit code is tail's, so a script that crashed read as a call
    that succeeded (a ``python run_tests.py 2>&1 | tail -200`` ending in ``ImproperlyConfigured``: no
    ``Ended failing`` in its task's summary, and no open error in the session record). The header is
    not required: ``tail`` may have cut it (pytest crashing on its config, 50 lines of frames)."""
    lines = [ln for ln in output[-_CRASH_SCAN:].splitlines() if ln.strip() and not ln.startswith("</")]
    first = max(1, len(lines) - _CRASH_TAIL - 1)
    for n in range(first, len(lines)):
        if lines[n][:1].isspace() or not lines[n - 1][:1].isspace() or not _EXCEPTION.match(lines[n]):
            continue
        above = n - 1
        while above >= 0 and lines[above][:1].isspace():
            if _FRAME_LINE.match(lines[above]):
                return True
            above -= 1
    return False


def _failure_line(tail: str) -> str:
    """The line that says why a failed call failed, as a task summary and the session record quote it.

    In order: the last line of an error's own shape (``ValueError: ...``, ``FAILED ...``,
    ``fatal: ...``); the last error line the reduction protects (:mod:`~.reduction.error_lines`: a dotted
    ``pkg.ImproperlyConfigured: ...``, an Elixir ``error:``), not a frame or a traceback header; the last line that says it
    failed (``== [q.sql] FAIL``, ``Hunk #1 FAILED at 21.``); else the last line. Why not simply the
    last line: measured on the swe traces, 198 of 441 failed calls had no line of the first shape, and
    their last line was often the tool's sign-off (sqlfluff's ``All Finished 📜 🎉!`` under its
    violations, ``patching file x.py`` under a failed hunk), which a summary then quoted as the error.
    """
    errors = _ERROR_LINE.findall(tail)
    errors = [e for e in errors if not _UNITTEST_TALLY.match(e)] or errors
    if errors and errors[-1].strip():
        return str(errors[-1].strip())
    protected = [ln.strip() for ln in error_lines(tail) if not _FRAME.match(ln)]
    if protected:
        return protected[-1]
    lines = [ln.strip() for ln in tail.strip().splitlines() if ln.strip() and not ln.startswith("<")]
    said = [ln for ln in lines if _SAYS_FAILED.search(ln)]
    return said[-1] if said else lines[-1] if lines else ""


def _unframed(line: str) -> str:
    """``line`` without the ``</output>`` a host frame puts after an output with no final newline."""
    return line[: -len("</output>")].rstrip() if line.endswith("</output>") else line


class EventLog:
    """Tool events, user goals and assistant texts of one conversation, kept in step with it."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.tracker = FileTracker()
        self.events: list[ToolEvent] = []
        self.outputs: list[str] = []
        self.said: list[Said] = []
        self._prints: list[int] = []
        self._pending: dict[str, tuple[int, str, str, Effects, int]] = {}
        self.generation = 0

    @property
    def n_messages(self) -> int:
        """How many messages have been read."""
        return len(self._prints)

    def update(self, messages: Sequence[Message]) -> None:
        """Read the messages not seen yet; start over if an earlier one changed."""
        seen = len(self._prints)
        if seen > len(messages) or any(_fingerprint(messages[i]) != self._prints[i] for i in range(seen)):
            generation = self.generation + 1
            self._reset()
            self.generation = generation
            seen = 0
        for index in range(seen, len(messages)):
            self._read(index, messages[index])

    def _rebase(self, workdir: str) -> None:
        """Make paths recorded before the work directory was known relative to it, like later ones."""
        prefix = workdir + "/"

        def fix(paths: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(dict.fromkeys(p[len(prefix) :] if p.startswith(prefix) else p for p in paths))

        self.events = [
            replace(
                e,
                reads=fix(e.reads),
                writes=fix(e.writes),
                whole=fix(e.whole),
                full=fix(e.full),
                deletes=fix(e.deletes),
            )
            if any(p.startswith(prefix) for p in (*e.reads, *e.writes, *e.deletes))
            else e
            for e in self.events
        ]
        for _, _, _, fx, _ in self._pending.values():
            for name in ("reads", "writes", "whole", "full", "deletes"):
                setattr(fx, name, list(fix(tuple(getattr(fx, name)))))
        self.tracker.texts = {fix((k,))[0]: v for k, v in self.tracker.texts.items()}
        self.generation += 1

    def _read(self, index: int, msg: Message) -> None:
        workdir = self.tracker.workdir
        self._read_message(index, msg)
        if workdir is None and self.tracker.workdir is not None:
            self._rebase(self.tracker.workdir)

    def _read_message(self, index: int, msg: Message) -> None:
        self._prints.append(_fingerprint(msg))
        role = msg.role
        text = turn_text(msg)
        if role in ("user", "assistant") and text.strip():
            self.said.append(Said(index, role, text))
        if role == "assistant":
            for call in tool_calls(msg):
                tool, args = _arguments(call)
                command, fx = _effects(self.tracker, tool, args)
                self._pending[call.id] = (index, tool, command, fx, len(call.arguments))
        elif role == "tool":
            pending = self._pending.pop(answered_call(msg), None)
            if pending is not None:
                self._event(pending, index, text)

    def _event(self, pending: tuple[int, str, str, Effects, int], index: int, output: str) -> None:
        call_index, tool, command, fx, size = pending
        if _NOT_RUN.search(output[:600]):
            fx = Effects(kind=fx.kind)
        reported = reports_tests(output)
        kind = _test_kind(fx.kind, output, reported)
        # a missing runner still failed the test command; a script that ran a suite is judged as one
        piped = _PIPED.search(command.rstrip()) is not None
        rc, failed, error_line = _outcome(output, fx, tested="test" in (fx.kind, kind), piped=piped)
        if kind == "test" and not failed and not (reported or shows_test_run(output)):
            kind = "run"  # it printed no test run: it says nothing of how the tests went
        self.events.append(
            ToolEvent(
                seq=len(self.events),
                call_index=call_index,
                result_index=index,
                tool=tool,
                command=command,
                norm=xxhash.xxh3_64_intdigest(_spelled(command).encode("utf-8", "surrogatepass")),
                kind=kind,
                reads=tuple(fx.reads),
                writes=tuple(fx.writes),
                whole=tuple(fx.whole),
                full=tuple(fx.full),
                deletes=tuple(fx.deletes),
                returncode=rc,
                failed=failed,
                output_chars=len(output),
                output_hash=xxhash.xxh3_64_intdigest(output.encode("utf-8", "surrogatepass")),
                error_line=error_line,
                call_chars=size,
                label=command_label(command) or tool,
            )
        )
        self.outputs.append(output)
