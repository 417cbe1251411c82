"""Task boundaries: where the user set a new goal, and which messages did the work of each goal.

Why from the messages alone: an assistant agent (an OpenClaw chat, a long Claude Code session) runs
task after task in one session, and a new user message is the strongest signal that the work before
it is finished (DESIGN 5). The boundary must be found the same way on every call and after a restart,
so it is a pure function of the request: a **goal** is a user message with text of its own (not only
tool results, not only the host's context blocks); the **work** of a goal is every assistant and tool
message after it up to the next goal. A developer message in the middle ends the work there (hosts put
instructions there; they are never collapsed); a system message in the middle of the work is the
host's note on it (Claude Code's "the user hasn't heard from you" nudge) and leaves with it. One right after the goal, before any work,
is the host's context for it and stays with the goal (Claude Code 2.1.33x sends its ``# Environment``
block as a ``role: "system"`` message right after the first user message).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Message, TextPart, ToolCallPart, ToolResultPart

# blocks hosts add to user messages that are context, not a request of the user
_HOST_BLOCKS = re.compile(
    r"<(system-reminder|environment_context|user_instructions|command-name|command-message|"
    r"command-args|local-command-stdout|local-command-caveat)>.*?</\1>",
    re.S,
)
# Claude Code's first message after it compacted a session: its own summary of what came before, with
# the user's request in a numbered section (then concepts, files, errors, pending tasks, current work)
_CONTINUED = re.compile(r"\s*This session is being continued from a previous conversation\b")
_INTENT = re.compile(
    r"^[ \t]*(?:\d+\.[ \t]*)?Primary Request and Intent:[ \t]*\n(?P<body>.*?)(?=^[ \t]*\d+\.[ \t]+\S[^\n]*:[ \t]*$|\Z)",
    re.M | re.S,
)
_WORK_ROLES = frozenset({"assistant", "tool"})
_CONTEXT_ROLES = frozenset({"system", "developer"})


@dataclass(frozen=True, slots=True)
class GoalTask:
    """The ``number``-th goal (1-based): its user message and the message range of its work."""

    number: int
    goal: int
    first: int
    last: int

    @property
    def empty(self) -> bool:
        """True when no assistant or tool message answered the goal."""
        return self.last < self.first


# Claude Code's notes in a user message that no user wrote: a background command finished (the notice
# and its "Read the output file..." line), and the note that the user stopped the agent
_NOTICE = re.compile(
    r"<task-notification>.*?</task-notification>\s*(?:Read the output file to retrieve the result: \S+)?",
    re.S,
)
_INTERRUPTED = re.compile(r"\s*\[Request interrupted by user[^\]\n]*\]\s*")


def goal_words(text: str) -> str:
    """The user's own words in a user message's text: the host's context blocks and notes removed.

    Why the notes: Claude Code writes them as user messages. Taken for goals, a background command's
    completion notice (``<task-notification>``) closed the task that started the command, and
    ``[Request interrupted by user]`` closed the task the user had just stopped: on the Claude Code
    traces both of aggressive mode's collapses fired on such notes, archiving unfinished work as
    "finished" (one agent then read a task id that only the collapsed work named)."""
    return _INTERRUPTED.sub("\n", _NOTICE.sub("", _HOST_BLOCKS.sub("", text))).strip()


_CONTINUE = re.compile(
    r"(?:(?:ok(?:ay)?|yes|please|now)[,.!]?\s+)?"
    r"(?:continue|go on|keep going|carry on|proceed|resume|go ahead|keep at it|next step|finish(?: it| up)?)"
    r"(?:\s+(?:please|then|with (?:it|that|the task)))?[\s.!]*",
    re.I,
)


def continues(text: str) -> bool:
    """Whether a user message's ``text`` only tells the agent to go on ("continue", "ok, keep going").

    Why: such a nudge sets no goal; the user sends it when the agent stopped before the work was done
    (a turn that ended on a tool result). Taken for a goal, it closed the task: on a Claude Code trace
    aggressive mode archived the unfinished work as "task 1 finished" at the user's "continue", the
    spec the agent was implementing, a subagent's report and the test file it then copied from went
    with it (79 later uses out of view, 31 of the agent's own words)."""
    return _CONTINUE.fullmatch(goal_words(text)) is not None


def interrupted(text: str) -> bool:
    """Whether a user message's ``text`` holds the note that the user stopped the agent."""
    return _INTERRUPTED.search(text) is not None


def stated_goal(text: str) -> str:
    """What a goal's text asks, for the session record: a host's continuation summary stands for the
    request it states, not for its lead-in.

    Why: after Claude Code compacts a session, the goal the record showed was "This session is being
    continued from a previous conversation that ran out of context. The summary below covers the
    earlier portion..." (all three Claude Code sessions in ../shared/traces): the line that should
    remind the model of the task said nothing about it. The summary's "Primary Request and Intent"
    section says what the user asked; a summary without one stays as it is.
    """
    words = goal_words(text)
    if _CONTINUED.match(words) and (found := _INTENT.search(words)) and found.group("body").strip():
        return found.group("body").strip()
    return words


def goal_text(msg: Message) -> str:
    """What the user asked in ``msg`` (host context blocks removed), or "" when it is no goal."""
    if msg.role != "user" or any(isinstance(p, ToolResultPart) for p in msg.parts):
        return ""
    return goal_words("".join(p.text for p in msg.parts if isinstance(p, TextPart)))


def is_goal(msg: Message) -> bool:
    """True for a user message that sets a goal: text of its own, no tool results."""
    return bool(goal_text(msg))


def _asked(messages: Sequence[Message], before: int) -> bool:
    """Whether the agent's last words before message ``before`` were a question to the user."""
    for msg in reversed(messages[:before]):
        if msg.role == "assistant":
            text = "".join(p.text for p in msg.parts if isinstance(p, TextPart)).rstrip()
            if text:
                return text.endswith("?") and not any(isinstance(p, ToolCallPart) for p in msg.parts)
        elif msg.role != "user":
            return False
    return False


def after_interruption(messages: Sequence[Message], at: int) -> bool:
    """Whether user message ``at``, or the user messages right before it, hold the note that the user
    stopped the agent. What the user says then redirects the task it stopped (seen: "create the
    beads" after stopping the agent's planning of them); it does not start a new one, and the stopped
    work is not finished."""
    for msg in reversed(messages[: at + 1]):
        if msg.role != "user":
            return False
        if interrupted("".join(p.text for p in msg.parts if isinstance(p, TextPart))):
            return True
    return False


def goal_tasks(messages: Sequence[Message]) -> list[GoalTask]:
    """Every goal in ``messages`` with the range of its work (the last one's may still grow).

    A user message that answers a question the agent ended its turn with ("Shall I apply the fix?"
    -> "yes") continues that task: it is part of the work, not a new goal. So does one right after the
    user interrupted the agent (:func:`after_interruption`), and a nudge to go on (:func:`continues`)."""
    goals = [
        i
        for i, m in enumerate(messages)
        if is_goal(m)
        and not (i and (_asked(messages, i) or after_interruption(messages, i) or continues(goal_text(m))))
    ]
    out: list[GoalTask] = []
    for n, g in enumerate(goals):
        first = g + 1
        while first < len(messages) and (
            messages[first].role in _CONTEXT_ROLES
            or (messages[first].role == "user" and not is_goal(messages[first]))
        ):
            first += 1  # the host's context right after the goal (blocks, instructions) belongs to it
        end = goals[n + 1] if n + 1 < len(goals) else len(messages)
        last = first - 1
        while last + 1 < end and messages[last + 1].role in _WORK_ROLES | {"user", "system"}:
            last += 1  # a developer message ends the work: host instructions stay
        # context right before the next goal (blocks, a system note) stays with it
        while (
            last >= first and messages[last].role in ("user", "system") and not _has_results(messages[last])
        ):
            last -= 1
        out.append(GoalTask(n + 1, g, first, last))
    return out


def finished_tasks(messages: Sequence[Message]) -> list[GoalTask]:
    """The goals a later goal closed, with work to collapse."""
    tasks = goal_tasks(messages)
    return [t for t in tasks[:-1] if not t.empty]


def _has_results(msg: Message) -> bool:
    return any(isinstance(p, ToolResultPart) for p in msg.parts)
