"""A finished task as one archived message: its archive document, its summary, and its fingerprint.

Why one message: once the user moved on, the work of the previous goal (dozens of tool calls, their
outputs, the assistant's turns) is re-read on every later call and almost never used again; replacing
the whole range by one assistant message keeps the conversation valid for every API (a user goal, an
assistant answer, the next user goal) and leaves only what the next task may need: what the task did,
which files it changed, how it ended, the agent's last words, and the key that brings all of it back.

The archive is a plain document, not JSON: tool outputs and assistant texts are kept verbatim, line
for line, so ``lightmem2_recover(key, lines=...)`` can return exactly the part wanted; tool-call
arguments are written as their decoded values (a command is shown as the command, not as an escaped
JSON string). The fingerprint covers what reduction never changes (roles, texts the model and user
wrote, tool-call ids, names and arguments, result ids), so a collapse is re-applied on every later call
exactly when the same messages are there again, and never onto messages a host rewrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import xxhash

from ..model import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from ..reduction.base import STUB_PREFIX
from .session_record import task_facts
from .signals import ToolEvent

FINAL_REPLY_CHARS = 1500
_MAX_FILES = 8


@dataclass(frozen=True, slots=True)
class Collapse:
    """A finished task replaced by one message: where, what it must match, what replaces it."""

    number: int
    first: int
    last: int
    fingerprint: str
    text: str
    key: str
    call_index: int
    tokens_saved: int
    goal: int = -1
    """The index of the task's request when it left too (:func:`short_goal`), else -1."""
    goal_fingerprint: str = ""
    goal_text: str = ""
    """What stays of the request: its first lines and a stub."""

    def to_list(self) -> list[object]:
        """JSON-ready form for the persisted session state."""
        out: list[object] = [
            self.number,
            self.first,
            self.last,
            self.fingerprint,
            self.text,
            self.key,
            self.call_index,
            self.tokens_saved,
        ]
        if self.goal >= 0:
            out += [self.goal, self.goal_fingerprint, self.goal_text]
        return out

    @classmethod
    def from_list(cls, data: Sequence[object]) -> Collapse:
        """The inverse of :meth:`to_list`; raises ``ValueError``/``TypeError`` on a malformed entry."""
        number, first, last, fp, text, key, call, saved, *goal = data
        if goal and len(goal) != 3:
            raise ValueError(f"a collapse's request part has {len(goal)} fields, expected 3")
        return cls(
            int(str(number)),
            int(str(first)),
            int(str(last)),
            str(fp),
            str(text),
            str(key),
            int(str(call)),
            int(str(saved)),
            int(str(goal[0])) if goal else -1,
            str(goal[1]) if goal else "",
            str(goal[2]) if goal else "",
        )


def collapsed_at(collapses: Sequence[Collapse], index: int) -> bool:
    """Whether message ``index`` lies in a finished task that already left as one summary."""
    return any(c.first <= index <= c.last for c in collapses)


def fingerprint(messages: Sequence[Message]) -> str:
    """A digest of what identifies ``messages`` and no reduction changes."""
    h = xxhash.xxh3_64()
    for msg in messages:
        h.update(b"\x00" + msg.role.encode())
        for p in msg.parts:
            if isinstance(p, TextPart) and msg.role != "tool":
                h.update(b"\x01" + p.text.encode("utf-8", "surrogatepass"))
            elif isinstance(p, ToolCallPart):
                h.update(f"\x02{p.id}\x03{p.name}\x03{p.arguments}".encode("utf-8", "surrogatepass"))
            elif isinstance(p, ToolResultPart):
                h.update(f"\x04{p.tool_call_id}".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def argument_text(arguments: str) -> str:
    """Tool-call arguments as a reader wants them: each top-level value raw, under its name."""
    try:
        obj = json.loads(arguments)
    except ValueError:
        return arguments
    if not isinstance(obj, dict):
        return arguments
    out: list[str] = []
    for name, value in obj.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        out.append(f"[{name}]")
        out.append(shown)
    return "\n".join(out)


GOAL_HEADER = "--- user (the request) ---"


def archive_document(
    number: int,
    first: int,
    last: int,
    messages: Sequence[Message],
    request: str | None = None,
    spell: Callable[[str], str] = str,
) -> str:
    """The archived text of a finished task: its request when that left too (under a header after
    the title line, so its lines are ``3`` to ``2 +`` its line count), then every message of its
    work, verbatim, with headers naming each call as the model read it (``spell``)."""
    lines = [f"=== lightmem2: task {number}, messages {first}-{last} ==="]
    if request is not None:
        lines += [GOAL_HEADER, request]
    for msg in messages:
        for p in msg.parts:
            if isinstance(p, TextPart) and msg.role != "tool":
                lines += [f"--- {msg.role} ---", p.text]
            elif isinstance(p, ToolCallPart):
                lines += [f"--- call {spell(p.id)}: {p.name} ---", argument_text(p.arguments)]
            elif isinstance(p, ToolResultPart):
                status = " (error)" if p.is_error else ""
                lines.append(f"--- output of {spell(p.tool_call_id)}{status} ---")
                for sub in p.content:
                    lines.append(
                        sub.text
                        if isinstance(sub, TextPart)
                        else "[image]"
                        if isinstance(sub, ImagePart)
                        else "[block]"
                    )
    return "\n".join(lines) + "\n"


def request_text(msg: Message) -> str | None:
    """The text of a request that can leave with its task: one plain text block (a message with
    several blocks or images keeps its shape, and the host's cache markers with it), else None."""
    if len(msg.parts) != 1 or not isinstance(msg.parts[0], TextPart):
        return None
    return msg.parts[0].text


def short_goal(text: str, number: int, key: str, limit: int, shell: bool = False) -> str | None:
    """What stays of a finished task's long request: its first lines (at most ``limit`` characters;
    a first line longer than that is cut and shares its line with the stub) and a stub that names
    the archive lines holding the rest; None when the request is short enough to stay whole."""
    if limit <= 0 or len(text) <= 2 * limit:
        return None  # below that the stub and the re-read would eat most of the saving
    cut = text.rfind("\n", 0, limit + 1)
    head = text[:cut] if cut > 0 else text[:limit]
    lines = f"3:{3 + text.count(chr(10))}"  # the title line, the header, then the request
    hint = (
        f"run: lightmem2 recover {key} --lines {lines}"
        if shell
        else f'recover with lightmem2_recover(key, lines="{lines}")'
    )
    stub = (
        f"{STUB_PREFIX}the rest of this request ({len(text) - len(head):,} chars) left with task "
        f"{number}, archived as {key}; {hint}]"
    )
    return f"{head}\n{stub}" if cut > 0 else head + stub


def _final_reply(messages: Sequence[Message]) -> str:
    """The agent's last words in the task (its last assistant text), cut at a line within the cap."""
    for msg in reversed(messages):
        if msg.role != "assistant":
            continue
        text = "".join(p.text for p in msg.parts if isinstance(p, TextPart)).strip()
        if not text:
            continue
        if len(text) <= FINAL_REPLY_CHARS:
            return text
        cut = text.rfind("\n", 0, FINAL_REPLY_CHARS)
        return text[: cut if cut > 0 else FINAL_REPLY_CHARS].rstrip() + "\n[... the rest is in the archive]"
    return ""


def _calls_after_reply(messages: Sequence[Message]) -> int:
    """How many tool calls the agent made after its last words in the task (0 when it ended talking)."""
    n = 0
    for msg in reversed(messages):
        if msg.role != "assistant":
            continue
        n += sum(isinstance(p, ToolCallPart) for p in msg.parts)
        if any(isinstance(p, TextPart) and p.text.strip() for p in msg.parts):
            break  # its text came before its calls (hosts send text, then tool calls)
    return n


def _paths(paths: list[str]) -> str:
    shown = ", ".join(paths[:_MAX_FILES])
    return shown + (f" (+{len(paths) - _MAX_FILES} more)" if len(paths) > _MAX_FILES else "")


def summary(
    number: int,
    key: str,
    messages: Sequence[Message],
    events: Sequence[ToolEvent],
    created: Collection[str],
    shell: bool = False,
) -> str:
    """The one message that stands for a finished task: what it did, how it ended, how to recover it.

    The recovery hint names the search: a task's archive runs to hundreds of thousands of chars, and
    nothing in the summary says which lines hold the output the agent wants back, so without it the
    only way to one output was the whole archive."""
    calls = sum(isinstance(p, ToolCallPart) for m in messages for p in m.parts)
    hint = (
        f"run: lightmem2 recover {key} --lines A:B (lightmem2 search TEXT finds A:B)"
        if shell
        else 'recover with lightmem2_recover(key, lines="A:B") (lightmem2_search finds A:B)'
    )
    lines = [
        f"{STUB_PREFIX}task {number} finished; its {len(messages)} messages ({calls} tool calls) "
        f"archived as {key}; {hint}]"
    ]
    facts = task_facts(events, created)
    if facts.modified:
        lines.append(f"Files modified: {_paths(list(facts.modified))}")
    if facts.created:
        lines.append(f"Files created: {_paths(list(facts.created))}")
    if facts.deleted:
        lines.append(f"Files deleted: {_paths(list(facts.deleted))}")
    if facts.tests:
        verdict = "passed" if facts.last_test_failed is None else f"failed: {facts.last_test_failed}"
        lines.append(f"Tests run {facts.tests}x; last `{facts.last_test}` {verdict}")
    for command, error in facts.failing:
        if (command, error) != (facts.last_test, facts.last_test_failed):  # else said on the Tests line
            lines.append(f"Ended failing: `{command}` -> {error}")
    reply = _final_reply(messages)
    if reply:
        lines.append("Last reply:")
        lines.append(reply)
        after = _calls_after_reply(messages)
        if after:  # the reply announced work that then ran: say so, or the model may redo it
            ran = list(events[-after:])  # the task's last calls: answered, so each is an event
            shown = "; ".join(e.label for e in ran[-3:])
            more = f" (the last 3 of {after})" if after > 3 and shown else ""
            ended = "; the last one failed" if ran and ran[-1].failed else ""
            made = f"{after} more tool call{'s' if after > 1 else ''}"
            lines.append(f"Then it made {made}{more}{': ' + shown if shown else ''}{ended}")
    return "\n".join(lines)
