"""Goal boundaries when the host puts its own instructions right after the user's goal."""

from __future__ import annotations

from eviction_helpers import call, result, text

from lightmem_plugin.eviction.goals import finished_tasks, goal_tasks


def test_a_system_message_right_after_the_goal_stays_with_it_and_the_work_follows() -> None:
    # Claude Code 2.1.33x: the first prompt, then its "# Environment" block as a system message
    msgs = [
        text("user", "Survey the modules"),
        text("system", "# Environment\nPrimary working directory: /w"),
        call("c1", "cat a.py"),
        result("c1", "print(1)"),
        text("assistant", "Surveyed."),
        text("user", "Now release"),
        text("developer", "release rules"),
        call("c2", "make release"),
        result("c2", "ok"),
    ]
    tasks = goal_tasks(msgs)
    assert [(t.goal, t.first, t.last) for t in tasks] == [(0, 2, 4), (5, 7, 8)]
    assert [t.number for t in finished_tasks(msgs)] == [1]


def test_a_system_note_inside_the_work_leaves_with_it() -> None:
    msgs = [
        text("user", "one"),
        text("system", "env"),
        call("c1", "ls"),
        result("c1", "x"),
        text("system", "keep the user updated"),
        call("c2", "ls"),
        result("c2", "y"),
        text("user", "two"),
    ]
    assert (goal_tasks(msgs)[0].first, goal_tasks(msgs)[0].last) == (2, 6)
