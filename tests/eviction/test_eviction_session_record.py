"""The session record: decisions with supersession and cancellation, files, errors, at_turn, rendering."""

from __future__ import annotations

import pytest
from eviction_helpers import ASTROID, Session, load_trace, retry_session
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin.eviction.decisions import extract_decisions
from lightmem_plugin.eviction.entries import of_chat
from lightmem_plugin.eviction.heuristic import HeuristicEstimator
from lightmem_plugin.eviction.lifecycle import TaskRegistry
from lightmem_plugin.eviction.record_render import BUDGETS, render
from lightmem_plugin.eviction.session_record import ErrorEntry, FileTouch, Goal, SessionRecord, extract
from lightmem_plugin.eviction.signals import Said
from lightmem_plugin.tokens import count_tokens


@pytest.mark.parametrize(
    ("text", "trigger", "choice", "replaces", "reason"),
    [
        ("Let's go with SQLite for the cache.", "go with", "SQLite for the cache", None, None),
        (
            "I'll use httpx instead of requests because it has timeouts.",
            "instead",
            "httpx",
            "requests",
            "it has timeouts",
        ),
        (
            "We should switch from unittest to pytest since fixtures help.",
            "switch",
            "pytest",
            "unittest",
            "fixtures help",
        ),
        ("Instead of patching, I'll use a subclass.", "instead", "a subclass", "patching", None),
        (
            "I decided to keep the public API unchanged.",
            "decided",
            "keep the public API unchanged",
            None,
            None,
        ),
        (
            "The fix is to add a `visit_unknown` method.",
            "decided",
            "add a `visit_unknown` method",
            None,
            None,
        ),
        (
            "Fixed: the cache key includes the query string.",
            "fixed",
            "the cache key includes the query string",
            None,
            None,
        ),
        ("Let me look at the file first.", None, None, None, None),
        # a choice that only points back at the conversation says nothing once that is gone (seen on
        # Claude Code: "Decisions in force: - that alias in the next edits")
        ("Expected — I'll use that alias in the next edits.", None, None, None, None),
        ("OK, we'll go with it.", None, None, None, None),
    ],
)
def test_decision_phrases(
    text: str, trigger: str | None, choice: str | None, replaces: str | None, reason: str | None
) -> None:
    decisions = extract_decisions([Said(3, "assistant", text)])
    if trigger is None:
        assert decisions == ()
        return
    (d,) = decisions
    assert (d.trigger, d.choice, d.replaces, d.reason, d.valid_from) == (trigger, choice, replaces, reason, 3)
    assert d.evidence == text and d.status == "active"


def test_supersession_and_cancellation() -> None:
    said = [
        Said(1, "user", "Add caching. Let's go with SQLite for the cache store."),
        Said(3, "assistant", "I will use requests for HTTP calls."),
        Said(5, "assistant", "I'll use httpx instead of requests because it supports timeouts."),
        Said(7, "user", "Actually, switch from SQLite to Redis since we run Redis in prod."),
        Said(9, "assistant", "We decided to add a retry wrapper around fetch."),
        Said(11, "user", "Never mind the retry wrapper, let's not use retries at all."),
        Said(13, "assistant", "Actually, let's go with Memcached."),
    ]
    d = {x.id: x for x in extract_decisions(said)}
    assert (d["d1"].status, d["d1"].valid_until, d["d1"].superseded_by) == ("superseded", 7, "d4")
    assert (d["d2"].status, d["d2"].superseded_by, d["d3"].replaces) == ("superseded", "d3", "requests")
    assert (d["d4"].choice, d["d4"].replaces, d["d4"].reason) == ("Redis", "SQLite", "we run Redis in prod")
    assert (d["d5"].status, d["d5"].valid_until, d["d5"].superseded_by) == ("cancelled", 11, None)
    # an implicit revision ("Actually, ...") supersedes the latest decision in force
    assert (d["d4"].status, d["d6"].replaces, d["d6"].valid_from) == ("superseded", "Redis", 13)
    assert [x.id for x in extract_decisions(said) if x.status == "active"] == ["d3", "d6"]


def record_of_retry_session() -> tuple[SessionRecord, dict[str, int]]:
    s, at = retry_session()
    est, reg = HeuristicEstimator(), TaskRegistry()
    for n in range(3, len(s.messages) + 1):
        reg.apply(est.estimate(s.turns[:n], reg), max_turn=n - 1)
    return extract(s.turns, reg, source=est), at


def test_record_of_a_hand_written_session() -> None:
    record, at = record_of_retry_session()
    assert [g.turn for g in record.goals] == [1, at["goal2"]]
    assert record.files_in("modified") == ("client.py", "cli.py")
    assert record.files_in("created") == ("client_retry.py",)
    assert [e.command for e in record.open_errors] == ["python -m pytest tests/ -q"]
    fixed = [e for e in record.errors if e.how == "fixed"]
    assert [(e.turn, e.closed_at) for e in fixed] == [(at["test_fail"], at["test_pass"])]
    choices = {d.choice: d.status for d in record.decisions}
    assert choices == {
        "exponential backoff": "active",
        "requests for the retry adapter": "superseded",
        "httpx": "active",
        "add a global retry counter": "cancelled",
    }
    assert [(t.id, t.lifecycle) for t in record.tasks] == [("h1", "evictable"), ("h2", "active")]


def test_at_turn_shows_what_was_believed_then() -> None:
    record, at = record_of_retry_session()
    before = record.at_turn(at["test_fail"])
    assert {d.choice: d.status for d in before.decisions} == {
        "exponential backoff": "active",
        "requests for the retry adapter": "active",
    }
    assert before.files_in("modified") == () and before.files_in("read") == ("client.py",)
    assert [e.turn for e in before.open_errors] == [at["test_fail"]]
    mid = record.at_turn(at["sed_cli"] - 1)
    assert "add a global retry counter" in {d.choice for d in mid.active_decisions}
    assert mid.open_errors == () and [g.turn for g in mid.goals] == [1, at["goal2"]]
    assert record.at_turn(record.turn) == record


def test_render_levels_fit_budgets_and_put_the_important_first() -> None:
    record, _ = record_of_retry_session()
    texts = {level: render(record, level) for level in BUDGETS}
    for level, text in texts.items():
        assert count_tokens(text) <= BUDGETS[level]
        assert text == render(record, level)
    critical = texts["critical"].splitlines()
    assert critical[1].startswith("Goal (turn 16): Also add a --retries flag")
    assert critical[2:4] == [
        "Open errors:",
        "- turn 21: `python -m pytest tests/ -q` -> ImportError: cannot import name 'fetch'",
    ]
    standard = texts["standard"]
    assert "httpx (instead of requests) because it has built-in transport retries" in standard
    assert "Files modified: client.py, cli.py" in standard
    assert "add a global retry counter (cancelled at turn 19)" in standard
    assert (
        standard.index("Open errors")
        < standard.index("Decisions in force")
        < standard.index("Files modified")
    )


def test_a_finished_tasks_failure_is_told_on_its_line_not_as_open() -> None:
    """A continuous chain's record listed a ``sed`` syntax error of a task three goals back under
    "Open errors", above the tasks, as if the current task had to fix it."""
    s = Session("Make the admin inline plural default to its verbose_name.")
    s.call("sed -i '2042c\\ x)' options.py", "bash: -c: line 1: syntax error near unexpected token `)'", rc=2)
    s.say("Fix the crash of Q() & Exists().", role="user")
    s.call(
        "python -m pytest tests/queries -q",
        "E   ImportError: cannot import name 'Exists'\n1 error in 0.2s",
        rc=1,
    )
    text = render(extract(s.turns), "full")
    opened = text.split("Open errors:\n", 1)[1].split("\n")
    assert opened[0].startswith("- turn 5: `python -m pytest tests/queries -q` -> E ImportError")
    assert not opened[1].startswith("- ")
    assert "ended failing: bash: -c: line 1: syntax error" in text.split("Finished tasks:", 1)[1]


def test_record_of_a_real_trace() -> None:
    messages = of_chat(load_trace(ASTROID)["messages"])
    record = extract(messages)
    assert "astroid/nodes/as_string.py" in record.files_in("modified")
    assert "reproduce_issue.py" in record.files_in("created")
    assert "astroid/nodes/node_classes.py" in record.files_in("read")
    for level, budget in BUDGETS.items():
        assert count_tokens(render(record, level)) <= budget


def test_file_state_rules() -> None:
    assert FileTouch("a", ((1, "read"), (3, "create"))).state == "modified"
    assert FileTouch("a", ((1, "create"), (3, "modify"))).state == "created"
    assert FileTouch("a", ((1, "create"), (3, "delete"))).state == "deleted"
    assert FileTouch("a", ((1, "read"),)).as_of(0) is None


def test_a_write_then_fix_session() -> None:
    s = Session("Make the build pass.")
    s.call("cd /repo && python -m pytest -q", "1 failed", rc=1)
    s.call("cd /repo && python -m pytest -q", "1 passed")
    record = extract(s.turns)
    assert record.open_errors == () and record.errors[0].how == "fixed"


_records = st.builds(
    lambda goals, files, errors: SessionRecord(
        turn=500,
        goals=tuple(Goal(i, g) for i, g in enumerate(goals)),
        files=tuple(FileTouch(f"src/pkg_{i}/module_{i}.py", ((i, a),)) for i, a in enumerate(files)),
        errors=tuple(ErrorEntry(i, f"python run_{i}.py --flag", e) for i, e in enumerate(errors)),
    ),
    st.lists(st.text(min_size=1, max_size=400), max_size=4),
    st.lists(st.sampled_from(["read", "create", "modify", "delete"]), max_size=40),
    st.lists(st.text(min_size=1, max_size=200), max_size=6),
)


@settings(max_examples=60, deadline=None)
@given(_records, st.sampled_from(list(BUDGETS)))
def test_render_never_exceeds_its_budget(record: SessionRecord, level: str) -> None:
    text = render(record, level)  # type: ignore[arg-type]
    assert count_tokens(text) <= BUDGETS[level]  # type: ignore[index]
    assert text.startswith("Session record (turn 500):")


def test_the_task_line_counts_the_tasks_in_each_state() -> None:
    """The line named the registry's ids (``h1-h4 evictable``), which nothing the model reads defines;
    it counts each state once, in a fixed order, whatever the registry's order."""
    from lightmem_plugin.eviction.session_record import TaskStatus

    order = [("h1", "evictable"), ("h3", "evictable"), ("h4", "evictable"), ("h5", "active")]
    order += [("h2", "evictable"), ("h6", "completed"), ("h7", "completed"), ("h9", "active")]
    tasks = tuple(TaskStatus(i, f"work {i}", state, (n, n)) for n, (i, state) in enumerate(order))  # type: ignore[arg-type]
    text = render(SessionRecord(turn=20, tasks=tasks), "full")
    assert "Tasks: 2 active, 2 completed, 4 done (may leave the context); current: work h9" in text


CONTINUED = (
    "This session is being continued from a previous conversation that ran out of context. The summary "
    "below covers the earlier portion of the conversation.\n\nAnalysis:\nLet me go through it in order.\n\n"
    "Summary:\n1. Primary Request and Intent:\n   The user asked to add a retry limit to the HTTP client,\n"
    "   then to document it.\n\n2. Key Technical Concepts:\n   - exponential backoff\n\n"
    "7. Pending Tasks:\n   - document the flag\n\n"
    "Please continue the conversation from where we left off without asking the user any further questions."
)


def test_a_hosts_continuation_summary_is_recorded_by_the_request_it_states() -> None:
    """After Claude Code compacts, the first user message is its summary of the session so far; the goal
    line showed the summary's lead-in ("This session is being continued ...") and nothing of the task."""
    from lightmem_plugin.eviction.goals import stated_goal
    from lightmem_plugin.eviction.session_record import FinishedTask, TaskFacts

    assert (
        stated_goal(CONTINUED)
        == "The user asked to add a retry limit to the HTTP client,\n   then to document it."
    )
    record = SessionRecord(
        turn=30,
        goals=(Goal(0, CONTINUED), Goal(20, "Now make the limit configurable")),
        finished=(FinishedTask(1, 0, CONTINUED, TaskFacts()),),
    )
    text = render(record, "full")
    assert (
        "- task 1 (turn 0): The user asked to add a retry limit to the HTTP client, then to document it."
        in text
    )
    assert "being continued" not in text
    only = render(SessionRecord(turn=3, goals=(Goal(0, CONTINUED),)), "critical")
    assert (
        "Goal (turn 0): The user asked to add a retry limit to the HTTP client, then to document it." in only
    )
    # a summary without the section, or a user who writes those words, keeps the text as written
    plain = "This session is being continued from a previous conversation. Fix the flaky test."
    assert stated_goal(plain) == plain


def test_absolute_paths_are_written_once_under_the_directory_they_share() -> None:
    """Claude Code names files by absolute path: the record repeated the project's directory before
    every file, a third of a standard record, and fewer files fitted. The directory is named once;
    a path elsewhere stays absolute, and a budget too small for that line keeps them all whole."""
    root = "/home/u/projects/worktrees/app"
    files = tuple(
        FileTouch(p, ((3, action),))  # type: ignore[arg-type]
        for p, action in [
            (f"{root}/lib/app/alpha.ex", "modify"),
            (f"{root}/lib/app/beta.ex", "modify"),
            (f"{root}/test/app/alpha_test.exs", "create"),
            ("/tmp/claude-1000/tasks/b0be39e.output", "read"),
        ]
    )
    record = SessionRecord(turn=9, goals=(Goal(0, "Add beta"),), files=files)
    text = render(record, "standard")
    assert f"Paths below are relative to {root}/" in text
    assert "Files modified: lib/app/alpha.ex, lib/app/beta.ex" in text
    assert "Files created: test/app/alpha_test.exs" in text
    assert "Files read: /tmp/claude-1000/tasks/b0be39e.output" in text
    assert text.count(root) == 1
    # one file under a directory is not worth a line naming it
    lone = SessionRecord(turn=9, files=files[:1] + files[3:])
    assert "relative to" not in render(lone, "standard") and f"{root}/lib/app/alpha.ex" in render(
        lone, "standard"
    )


def test_a_path_relative_to_the_work_directory_is_written_under_the_record_s_base() -> None:
    """The tracker names files relative to the first directory a command cd-ed to (here the project's
    ``assets``), while the base the record names comes from absolute paths (the project): 8463c716's
    record listed ``assets/js/app.js`` as ``js/app.js``, a file that does not exist."""
    root = "/home/u/projects/worktrees/app"
    files = (
        FileTouch(f"{root}/lib/app/alpha.ex", ((3, "modify"),)),
        FileTouch(f"{root}/lib/app/beta.ex", ((4, "modify"),)),
        FileTouch("js/app.js", ((5, "modify"),)),
    )
    record = SessionRecord(turn=9, goals=(Goal(0, "Add beta"),), files=files, workdir=f"{root}/assets")
    assert "Files modified: lib/app/alpha.ex, lib/app/beta.ex, assets/js/app.js" in render(record, "standard")
    # without a base named (no absolute path shared), each path stays as the commands named it
    alone = SessionRecord(turn=9, files=files[2:], workdir=f"{root}/assets")
    assert "Files modified: js/app.js" in render(alone, "standard")


def test_the_work_directory_comes_from_the_session_s_first_cd() -> None:
    s = Session("Fix the build")
    s.call("cd /home/u/projects/worktrees/app/assets && sed -i 's/a/b/' js/app.js", "")
    assert extract(s.turns).workdir == "/home/u/projects/worktrees/app/assets"


def test_a_hosts_note_is_no_goal_of_the_record() -> None:
    """Claude Code's background-task notice is a user message: the record's goal line showed it (and,
    with the notice's words removed, an empty goal)."""
    notice = (
        "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n</task-notification>\n"
        "Read the output file to retrieve the result: /tmp/t/b1.output"
    )
    s = Session("Add a retry flag to the client")
    s.call("cat client.py", "def get(url):\n    return http(url)\n")
    s.say(notice, role="user")
    record = extract(s.turns)
    assert [g.text for g in record.goals] == ["Add a retry flag to the client"]
    assert "Goal (turn 1): Add a retry flag to the client" in render(record, "critical")


def test_a_nudge_to_go_on_is_no_goal_of_the_record() -> None:
    """The user's "continue" after the agent stopped mid-work: the record's goal is still the task."""
    s = Session("Add a retry flag to the client")
    s.call("cat client.py", "def get(url):\n    return http(url)\n")
    s.say("continue", role="user")
    s.call("sed -n 1,5p client.py", "def get(url):\n")
    record = extract(s.turns)
    assert [g.text for g in record.goals] == ["Add a retry flag to the client"]


def test_a_finished_tasks_record_line_names_the_files_it_deleted() -> None:
    from lightmem_plugin.eviction.session_record import FinishedTask, TaskFacts

    facts = TaskFacts(modified=("/app/src/a.py",), deleted=("/app/src/old.py",), tests=1)
    record = SessionRecord(
        turn=30,
        goals=(Goal(0, "Drop the old module"), Goal(20, "Now document it")),
        finished=(FinishedTask(1, 0, "Drop the old module", facts),),
    )
    line = next(x for x in render(record, "full").splitlines() if x.startswith("- task 1"))
    assert (
        line
        == "- task 1 (turn 0): Drop the old module -> edited: /app/src/a.py; tests passed; deleted /app/src/old.py"
    )
