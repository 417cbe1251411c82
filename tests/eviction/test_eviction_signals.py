"""The incremental event log: outcomes, editor tools, re-parsing, and liveness signals."""

from __future__ import annotations

import json

import pytest
from eviction_helpers import ASTROID, Session, load_trace, retry_session

from lightmem_plugin.eviction.entries import answered_call, of_chat, turn_text
from lightmem_plugin.eviction.liveness import Liveness
from lightmem_plugin.eviction.signals import EventLog, ToolEvent, command_label
from lightmem_plugin.model import Message, TextPart, ToolResultPart


@pytest.mark.parametrize(
    ("output", "command", "rc", "failed", "error"),
    [
        ("<returncode>0</returncode>\n<output>\nok\n</output>", "python a.py", 0, False, ""),
        ("<returncode>1</returncode>\n<output>\n</output>", "grep -n x a.py", 1, False, ""),
        ("<returncode>2</returncode>\n<output>\nboom\n</output>", "grep -n x a.py", 2, True, "boom"),
        (
            '<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  File "a.py"\n'
            "ModuleNotFoundError: No module named 'wrapt'\n</output>",
            "python a.py",
            1,
            True,
            "ModuleNotFoundError: No module named 'wrapt'",
        ),
        (
            "Process exited with code 3\nfatal: not a git repository",
            "git log",
            3,
            True,
            "fatal: not a git repository",
        ),
        (
            "<exception>An error occurred while executing the command</exception>",
            "pip install x",
            None,
            True,
            "",
        ),
        ("<returncode>0</returncode>\n<output>\n2 failed, 3 passed\n</output>", "pytest -q", 0, True, ""),
        (  # the linter's sign-off is its last line; the verdict is the FAIL line above it
            "<returncode>65</returncode>\n<output>\n== [q.sql] FAIL\nL:   1 | P:   1 | L045 | Query "
            "defines a CTE but does not use it.\nAll Finished 📜 🎉!\n</output>",
            "sqlfluff lint q.sql",
            65,
            True,
            "== [q.sql] FAIL",
        ),
        (  # a dotted exception class not ending in Error, then the script's own prints
            "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
            '  File "t.py", line 3, in <module>\ndjango.core.exceptions.ImproperlyConfigured: '
            "Requested setting DATABASES\nQuery group_by: (Mock(),)\n</output>",
            "python t.py",
            1,
            True,
            "django.core.exceptions.ImproperlyConfigured: Requested setting DATABASES",
        ),
        (  # a lower-case exception class: its message, not the traceback's header or a frame
            "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
            '  File "/usr/lib/python3.11/re/_parser.py", line 1080, in parse_template\n'
            "re.error: bad escape \\s at position 8\n</output>",
            "python t.py",
            1,
            True,
            "re.error: bad escape \\s at position 8",
        ),
        (  # patch refused its hunks and then signed off with the next file it patched
            "<returncode>1</returncode>\n<output>\npatching file src/m/marshalling.py\nReversed (or previously "
            "applied) patch detected!  Assume -R? [n] \nApply anyway? [n] \nSkipping patch.\n2 out of 2 hunks "
            "ignored -- saving rejects to file src/m/marshalling.py.rej\npatching file src/m/schema.py\n</output>",
            "patch -p1 < final_fix.patch",
            1,
            True,
            "2 out of 2 hunks ignored -- saving rejects to file src/m/marshalling.py.rej",
        ),
        (
            "<returncode>2</returncode>\n<output>\npatch: **** malformed patch at line 23:          return None\n"
            "\npatching file django/urls/resolvers.py\nHunk #1 succeeded at 21 (offset -6 lines).\n</output>",
            "patch -p1 < fix.patch",
            2,
            True,
            "patch: **** malformed patch at line 23:          return None",
        ),
        (  # an output with no final newline: the host's closing tag is on its last line
            "<returncode>1</returncode>\n<output>\nSorry: IndentationError: unexpected indent (a.py, line 6)"
            "</output>",
            "python -m py_compile a.py",
            1,
            True,
            "Sorry: IndentationError: unexpected indent (a.py, line 6)",
        ),
        ("plain output", "echo hi", None, False, ""),
    ],
)
def test_outcomes(output: str, command: str, rc: int | None, failed: bool, error: str) -> None:
    event = _one_event(command, output)
    assert (event.returncode, event.failed) == (rc, failed)
    if error:
        assert event.error_line == error
    elif failed:
        assert event.error_line


def _one_event(command: str, output: str) -> ToolEvent:
    """The event of one bash call ``command`` answered by ``output``."""
    s = Session("goal")
    arguments = json.dumps({"command": command})
    s.messages.append(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": arguments}}
            ],
        }
    )
    s.messages.append({"role": "tool", "tool_call_id": "c1", "content": output})
    log = EventLog()
    log.update(s.turns)
    (event,) = log.events
    return event


def _framed(rc: int, body: str) -> str:
    return f"<returncode>{rc}</returncode>\n<output>\n{body}\n</output>"


_CRASH = (
    'Traceback (most recent call last):\n  File "/testbed/run_tests.py", line 9, in <module>\n'
    '    django.setup()\n  File "/testbed/django/db/utils.py", line 122, in load_backend\n'
    "    raise ImproperlyConfigured(\n"
    "django.core.exceptions.ImproperlyConfigured: 'django.db.backends.dummy' isn't an available database backend.\n"
    "Try using 'django.db.backends.XXX', where XXX is one of:\n    'mysql', 'oracle', 'postgresql', 'sqlite3'"
)


@pytest.mark.parametrize(
    ("command", "output", "kind", "failed", "error"),
    [
        (  # a script that runs the suite ran tests: its unittest summary says how they went
            "python run_q_tests.py 2>&1 | tail -50",
            _framed(
                0,
                "test_deconstruct (tests.queries.test_q.QTests) ... ok\n\n"
                + "-" * 70
                + "\nRan 15 tests in 0.001s\n\nOK",
            ),
            "test",
            False,
            "",
        ),
        (  # ... and failed them though it exited 0; the exception says why, not unittest's tally
            "python -c \"import unittest; unittest.main(module='t', exit=False)\"",
            _framed(
                0,
                'ERROR: test_a (t.T.test_a)\nTraceback (most recent call last):\n  File "t.py", line 4, in test_a\n'
                "ModuleNotFoundError: No module named 'sqlparse'\n\n"
                + "-" * 70
                + "\nRan 1 test in 0.000s\n\nFAILED (errors=1)",
            ),
            "test",
            True,
            "ModuleNotFoundError: No module named 'sqlparse'",
        ),
        (  # pytest -q prints its summary bare
            "python check.py",
            _framed(0, "..\n2 passed in 0.05s"),
            "test",
            False,
            "",
        ),
        (  # no runner: no test ran, and the command failed
            "cd /testbed && python -m pytest tests/x.py -xvs 2>&1 | tail -50",
            _framed(0, "/opt/miniconda3/bin/python: No module named pytest"),
            "run",
            True,
            "/opt/miniconda3/bin/python: No module named pytest",
        ),
        (
            "pytest -q",
            _framed(127, "bash: pytest: command not found"),
            "run",
            True,
            "bash: pytest: command not found",
        ),
        (  # the echo is all it printed: it says nothing of the tests
            'python -m pytest tests/t.py -xvs 2>/dev/null || echo "Test failed, let me try differently"',
            _framed(0, "Test failed, let me try differently"),
            "run",
            False,
            "",
        ),
        (  # Django's own runner is a test runner; behind a tail its crash exits 0
            "python -m django test admin_inlines --verbosity=0 2>&1 | tail -50",
            _framed(0, _CRASH),
            "test",
            True,
            "django.core.exceptions.ImproperlyConfigured: 'django.db.backends.dummy' isn't an available database backend.",
        ),
        (  # a script that crashed behind a pipe failed, though tail exited 0
            "python run_tests.py 2>&1 | tail -200",
            _framed(0, _CRASH),
            "run",
            True,
            "",
        ),
        (  # tail cut the traceback's header: the frames and the exception still end the output
            "python -m pytest t.py 2>&1 | tail -3",
            _framed(
                0,
                '  File "/x/_pytest/config/__init__.py", line 1814, in _getini_toml\n    raise TypeError(\n'
                "TypeError: config option 'testpaths' expects a list",
            ),
            "test",
            True,
            "TypeError: config option 'testpaths' expects a list",
        ),
        (  # unpiped, exit 0 is the script's own: it printed a traceback it caught and went on
            "python run_tests.py",
            _framed(0, _CRASH),
            "run",
            False,
            "",
        ),
        (  # piped, a traceback followed by the script's further prints is one it caught
            "python probe.py 2>&1 | tail -20",
            _framed(0, _CRASH + "\nstep 2\nstep 3\nstep 4\nstep 5\nstep 6\nstep 7\nstep 8"),
            "run",
            False,
            "",
        ),
    ],
)
def test_what_ran_tests_and_how_it_ended(
    command: str, output: str, kind: str, failed: bool, error: str
) -> None:
    """Read in the continuous chains' task summaries: ``Tests run 1x; last `python -m pytest ...`
    failed: No module named pytest`` for tasks whose suite then passed through a script; a ``python
    run_tests.py 2>&1 | tail -200`` that crashed counted as a success (tail's exit code)."""
    event = _one_event(command, output)
    assert (event.kind, event.failed) == (kind, failed)
    if error:
        assert event.error_line == error


SYNTAX_ERROR_COMMAND = "sed -i '2c\\\\ # default (the model\\'s name or a custom one)' opts.py"
"""The quote closes early at ``model\\'``: our splitter reads ``name or a custom one`` as sed's files,
bash gives up on line 1 (``syntax error near unexpected token `)'``) and runs nothing."""


@pytest.mark.parametrize(
    ("output", "ran"),
    [
        (
            "<returncode>2</returncode>\n<output>\nbash: -c: line 1: syntax error near unexpected token "
            "`)'\nbash: -c: line 1: `sed -i '2c\\\\ # default (the model\\\\'s name or a custom one)' opts.py'\n</output>",
            False,
        ),
        ('Exit code 2\n/bin/sh: 1: Syntax error: ")" unexpected', False),
        (  # a syntax error further down: the lines above it ran
            "<returncode>2</returncode>\n<output>\nbash: -c: line 3: syntax error: unexpected end of file\n</output>",
            True,
        ),
        ("<returncode>0</returncode>\n<output>\n</output>", True),
    ],
)
def test_a_command_the_shell_could_not_parse_wrote_nothing(output: str, ran: bool) -> None:
    s = Session("goal")
    args = json.dumps({"command": SYNTAX_ERROR_COMMAND})
    s.messages.append(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": args}}],
        }
    )
    s.messages.append({"role": "tool", "tool_call_id": "c1", "content": output})
    log = EventLog()
    log.update(s.turns)
    (event,) = log.events
    assert event.writes == (("name", "or", "a", "custom", "one") if ran else ())


@pytest.mark.parametrize(
    ("tool", "args", "reads", "writes", "whole"),
    [
        ("str_replace_editor", {"command": "view", "path": "/repo/a.py"}, ("/repo/a.py",), (), ()),
        (
            "str_replace_editor",
            {"command": "create", "path": "b.py", "file_text": "x"},
            (),
            ("b.py",),
            ("b.py",),
        ),
        ("str_replace_editor", {"command": "str_replace", "path": "c.py"}, (), ("c.py",), ()),
        ("Read", {"file_path": "d.py"}, ("d.py",), (), ()),
        ("Edit", {"file_path": "e.py", "old_string": "a", "new_string": "b"}, (), ("e.py",), ()),
        ("Write", {"file_path": "f.py", "content": "x"}, (), ("f.py",), ("f.py",)),
        ("shell", {"command": ["bash", "-lc", "cat g.py"]}, ("g.py",), (), ()),
        (
            "apply_patch",
            {"input": "*** Begin Patch\n*** Update File: h.py\n*** End Patch"},
            (),
            ("h.py",),
            (),
        ),
    ],
)
def test_tools_other_than_bash(
    tool: str,
    args: dict[str, object],
    reads: tuple[str, ...],
    writes: tuple[str, ...],
    whole: tuple[str, ...],
) -> None:
    s = Session("goal")
    s.call(json.dumps(args), "done", tool=tool)
    log = EventLog()
    log.update(s.turns)
    (event,) = log.events
    assert (event.reads, event.writes, event.whole) == (reads, writes, whole)


def test_content_parts_and_pending_calls() -> None:
    s = Session("goal")
    s.messages.append({"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "image"}]})
    s.messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c9",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                }
            ],
        }
    )
    log = EventLog()
    log.update(s.turns)
    assert turn_text(s.turns[-2]) == "part one" and log.events == []
    s.messages.append({"role": "tool", "tool_call_id": "c9", "content": "a.py"})
    log.update(s.turns)
    assert [e.call_index for e in log.events] == [3] and log.n_messages == 5


def test_incremental_equals_from_scratch_and_changes_reparse() -> None:
    messages = of_chat(load_trace(ASTROID)["messages"])
    step = EventLog()
    for n in range(1, len(messages) + 1, 7):
        step.update(messages[:n])
    step.update(messages)
    fresh = EventLog()
    fresh.update(messages)
    assert step.events == fresh.events and step.said == fresh.said
    generation = step.generation
    edited = list(messages)
    changed = "<returncode>0</returncode>\n<output>\nchanged\n</output>"
    edited[5] = Message("tool", [ToolResultPart(answered_call(messages[5]), [TextPart(changed)])])
    step.update(edited)
    assert step.generation > generation and step.outputs[1].endswith("changed\n</output>")


def test_workdir_found_late_rebases_earlier_paths() -> None:
    messages = of_chat(load_trace(ASTROID)["messages"])
    log = EventLog()
    log.update(messages[:10])  # absolute /testbed/... paths, no cd yet
    assert "/testbed/astroid/nodes/as_string.py" in log.events[2].reads
    log.update(messages)
    assert log.events[2].reads == ("astroid/nodes/as_string.py",)
    assert log.tracker.workdir == "/testbed"


def test_liveness_signals_on_a_hand_written_session() -> None:
    s, at = retry_session()
    log = EventLog()
    log.update(s.turns)
    live = Liveness()
    for e in log.events:
        live.add(e, log.outputs[e.seq], log.outputs)
    by_turn = {e.call_index: e.seq for e in log.events}
    assert live.dead[by_turn[at["ls"]]].startswith("results followed up: client.py")
    assert live.dead[by_turn[at["cat_client"]]] == f"read of client.py superseded by edit at turn {at['sed']}"
    assert live.dead[by_turn[at["test_fail"]]] == f"failed; same command succeeded at turn {at['test_pass']}"
    assert live.fixed[by_turn[at["test_fail"]]] == by_turn[at["test_pass"]]
    assert live.dead[by_turn[at["sed"]]] == f"edit verified by passing run at turn {at['test_pass']}"
    assert by_turn[at["test_err"]] not in live.dead, "the last failure is still open"
    assert list(live.created) == ["client_retry.py"]


def test_repeated_output_and_repeated_error() -> None:
    s = Session("goal")
    listing = "\n".join(f"file_{i}.py" for i in range(20))
    first = s.call("ls src", listing)
    s.call("ls ./src", listing)
    err = "Traceback (most recent call last):\n  File \"{}\"\nImportError: cannot import name 'x'"
    fail = s.call("python a.py", err.format("a.py"), rc=1)
    s.call("python b.py", err.format("b.py"), rc=1)
    log = EventLog()
    log.update(s.turns)
    live = Liveness()
    for e in log.events:
        live.add(e, log.outputs[e.seq], log.outputs)
    assert live.dead[0] == f"same output again at turn {first + 2}"
    assert live.dead[2] == f"same error again at turn {fail + 2}" and 2 not in live.fixed


@pytest.mark.parametrize(
    ("command", "label"),
    [
        (  # the heredoc wrote the patch; the git apply under it is what failed
            "cd /testbed && cat > fix2.patch << 'EOF'\n--- a/m.py\n+++ b/m.py\nEOF\ngit apply fix2.patch",
            "cat > fix2.patch << 'EOF' … git apply fix2.patch",
        ),
        ("cat > f.py << 'EOF'\nprint(1)\nEOF", "cat > f.py << 'EOF'"),  # only the write ran
        ('python -c "\nimport numpy as np\nprint(np.__version__)\n"', 'python -c "print(np.__version__)'),
        (  # the set-up every probe shares is skipped: its first statement says what this one did
            'cd /testbed && python -c "\nimport os\nimport django\nfrom django.conf import settings\nsettings.configure(\n'
            "    DEBUG=True,\n    INSTALLED_APPS=[],\n)\ndjango.setup()\nfrom django.db.models import Q\n"
            'print(Q() & Exists(Product.objects.all()))\n"',
            'python -c "print(Q() & Exists(Product.objects.all()))',
        ),
        (
            'python -c "\nimport sys\nimport os\n"',
            'python -c "import sys',
        ),  # nothing but set-up: its first line
        ("cp m.py.orig m.py\npatch -p1 < fix.patch", "cp m.py.orig m.py … patch -p1 < fix.patch"),
        (
            "python -m pytest tests/test_x.py -xvs 2>&1 | tail -100",
            "python -m pytest tests/test_x.py -xvs 2>&1 | tail -100",
        ),
        ("x" * 80, "x" * 41 + "..." + "x" * 26),
        (  # too long: the variables, then the filters go; then the middle, so the test it ran shows
            "PYTHONPATH=src:$PYTHONPATH python -m pytest tests/test_serialization.py::TestFieldSerialization"
            "::test_datetime_field_rfc822 -xvs 2>&1 | tail -30",
            "python -m pytest tests/test_serialization...datetime_field_rfc822 -xvs",
        ),
        (
            "cat > test_edge.py << 'EOF'\nimport x\nEOF\n\npython test_klucher_edge.py 2>&1 | grep -v \"RuntimeWarning\"",
            "cat > test_edge.py << 'EOF' … python test_klucher_edge.py 2>&1",
        ),
        (
            "cp django/utils/tree.py.backup django/utils/tree.py && patch -p1 < patch.txt && echo "
            '"Patch applied successfully"',
            "cp django/utils/tree.py.backup django/uti...y && patch -p1 < patch.txt",
        ),
    ],
)
def test_a_call_label_names_what_ran(command: str, label: str) -> None:
    assert command_label(command) == label
    assert len(label) <= 70
