"""Goal boundaries when the host puts its own instructions right after the user's goal."""

from __future__ import annotations

from typing import Any

from eviction_helpers import call, result, text

from lightmem_plugin.eviction.goals import finished_tasks, goal_tasks
from lightmem_plugin.model import Message


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


NOTICE = (
    "<task-notification>\n<task-id>bd0afab</task-id>\n<output-file>/tmp/t/bd0afab.output</output-file>\n"
    '<status>completed</status>\n<summary>Background command "Run tests" completed (exit code 0)</summary>\n'
    "</task-notification>\nRead the output file to retrieve the result: /tmp/t/bd0afab.output"
)


def _chat(msgs: list[Message]) -> list[dict[str, Any]]:
    from lightmem_plugin.wire.chat import codec as openai_chat

    return [openai_chat.message_to_chat(m) for m in msgs]


def test_claude_codes_notes_are_no_goals_and_an_interruption_does_not_finish_the_task() -> None:
    """Claude Code writes a background command's completion notice and "[Request interrupted by
    user]" as user messages. Taken for goals, each closed the task before it: both collapses aggressive
    mode made on the Claude Code traces archived unfinished work as finished. What the user says after
    stopping the agent redirects the same task, in its own message or in the note's."""
    from lightmem_plugin.eviction.goals import goal_words, is_goal
    from lightmem_plugin.measure.retention import last_goal

    assert goal_words(NOTICE) == "" and not is_goal(
        text("user", "[Request interrupted by user for tool use]")
    )
    work = [call("c1", "mix test &"), result("c1", "started bd0afab"), text("assistant", "Waiting.")]
    for redirect in (
        [text("user", "[Request interrupted by user]"), text("user", "create the beads")],
        [text("user", "[Request interrupted by user]\ncreate the beads")],
    ):
        msgs = [text("user", "Plan the beads"), *work, text("user", NOTICE), *work, *redirect, *work]
        tasks = goal_tasks(msgs)
        assert [(t.goal, t.last) for t in tasks] == [(0, len(msgs) - 1)], redirect
        assert finished_tasks(msgs) == []
        assert last_goal(_chat(msgs)) == 0  # the retention measure draws the same boundary
    # a goal after finished work still closes it
    msgs = [text("user", "Plan the beads"), *work, text("user", "Now release")]
    assert [t.number for t in finished_tasks(msgs)] == [1]


def test_a_nudge_to_go_on_continues_the_task() -> None:
    """A Claude Code session's agent stopped on an Edit's result; the user typed "continue". Taken for
    a goal, it closed the task: aggressive mode archived the unfinished work as "task 1 finished" and
    the spec and test file the agent went on using left with it."""
    from lightmem_plugin.eviction.goals import continues
    from lightmem_plugin.measure.retention import last_goal

    work = [call("c1", "bd show spotter-dov.1"), result("c1", "spec: attach_computer ...")]
    for nudge in ("continue", "Continue.", "ok, keep going", "please continue", "go ahead"):
        assert continues(nudge), nudge
        msgs = [text("user", "Implement spotter-dov.1"), *work, text("user", nudge), *work]
        assert [(t.goal, t.last) for t in goal_tasks(msgs)] == [(0, len(msgs) - 1)], nudge
        assert finished_tasks(msgs) == [] and last_goal(_chat(msgs)) == 0, nudge
    # a message that asks for something is a goal, even when it starts like a nudge
    for goal in ("continue with the release notes", "fix the flaky test"):
        assert not continues(goal), goal
        msgs = [
            text("user", "Implement spotter-dov.1"),
            *work,
            text("assistant", "Done."),
            text("user", goal),
        ]
        assert [t.number for t in finished_tasks(msgs)] == [1], goal
