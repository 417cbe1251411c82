"""Does each prompt still carry the task statement? What the retention metric does not score.

Retention judges spans of tool output the agent went on to use; it says nothing about the task
itself. A context manager that rewrites or drops the first user message (the issue to fix, its
constraints, how to submit) can keep every used span and still leave the agent guessing what it
was asked, and a user would notice that first. So, per replayed prompt:

- ``task_statement_present``: the fraction of prompts holding the first user message's text verbatim
  inside one message (content or tool-call arguments);
- ``task_lines_present``: the mean fraction of its lines (16+ chars, stripped) that the prompt still
  holds, so a statement that lost one line reads differently from one that is gone.

``TaskProbe`` wraps any policy (a name replay knows, or a factory) and is itself a policy factory,
so it slots into ``replay_paths`` unchanged::

    with tempfile.TemporaryDirectory() as tmp:
        probe = TaskProbe("normal", Path(tmp))
        row = summarize(replay_paths([path], probe)) | probe.figures()
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightmem_plugin.errors import UsageError
from lightmem_plugin.measure.replay import PolicyFactory, SessionPolicy, policy_for
from lightmem_plugin.measure.retention import MIN_LINE_CHARS, message_text
from lightmem_plugin.measure.traces.base import Trace

ChatMessage = dict[str, Any]


def task_statement(prompt: list[ChatMessage]) -> str | None:
    """The text of the first user message of a prompt, or None when it has none."""
    for message in prompt:
        if message.get("role") == "user":
            text = message_text(message).strip()
            return text or None
    return None


def task_lines(task: str) -> list[str]:
    """The task statement's lines long enough to mean something on their own (stripped, distinct)."""
    return list(
        dict.fromkeys(s for s in (line.strip() for line in task.split("\n")) if len(s) >= MIN_LINE_CHARS)
    )


class _Session:
    """One session's policy, checking each transformed prompt against the session's task statement."""

    def __init__(self, inner: SessionPolicy, task: str | None, probe: TaskProbe) -> None:
        self.inner = inner
        self.task = task
        self.lines = task_lines(task) if task else []
        self.probe = probe
        self._seen: dict[int, tuple[Mapping[str, Any], bool, frozenset[int]]] = {}

    def _check(self, message: Mapping[str, Any]) -> tuple[bool, frozenset[int]]:
        """Whether one message holds the whole statement, and which of its lines; memoised per object."""
        hit = self._seen.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1], hit[2]
        text = message_text(message)
        whole = self.task is not None and self.task in text
        lines = (
            frozenset(range(len(self.lines)))
            if whole
            else frozenset(i for i, line in enumerate(self.lines) if line in text)
        )
        self._seen[id(message)] = (message, whole, lines)
        return whole, lines

    def transform(self, index: int, prompt: list[ChatMessage]) -> list[ChatMessage]:
        out = self.inner.transform(index, prompt)
        if self.task is None:
            return out
        whole = False
        found: set[int] = set()
        for message in out:
            has, lines = self._check(message)
            whole = whole or has
            found |= lines
        self.probe.record(whole, len(found) / len(self.lines) if self.lines else float(whole))
        return out

    def lookup(self, key: str) -> str | None:
        return self.inner.lookup(key)

    def __getattr__(self, name: str) -> Any:
        """Everything else is the wrapped policy's: the replay hands a lightmem2 mode the provider's
        usage (``observe``: how it learns the host's count for its compaction) and reads its
        ``session`` (cold starts). Before this, the probe hid both from every benchmark row: aggressive
        never saw a usage, compacted too late on 8463c716, and the rows said 0 cold starts."""
        return getattr(self.inner, name)


class TaskProbe:
    """A policy factory that wraps another and counts prompts still carrying the task statement."""

    def __init__(self, policy: str | PolicyFactory, root: Path | None = None) -> None:
        if isinstance(policy, str):
            if root is None:
                raise UsageError(
                    f"TaskProbe({policy!r}) got no root; pass root=, a directory for its artifact registry"
                )
            policy = policy_for(policy, root)
        self.factory: PolicyFactory = policy
        self.prompts = 0
        self.present = 0
        self.line_share = 0.0

    def __call__(self, trace: Trace) -> SessionPolicy:
        task = task_statement(trace.calls[0].prompt) if trace.calls else None
        return _Session(self.factory(trace), task, self)

    def record(self, whole: bool, line_share: float) -> None:
        self.prompts += 1
        self.present += whole
        self.line_share += line_share

    def figures(self) -> dict[str, float | int]:
        """The two fractions over every probed prompt (1.0 when no prompt had a task statement)."""
        n = self.prompts
        return {
            "task_statement_prompts": n,
            "task_statement_present": round(self.present / n, 4) if n else 1.0,
            "task_lines_present": round(self.line_share / n, 4) if n else 1.0,
        }
