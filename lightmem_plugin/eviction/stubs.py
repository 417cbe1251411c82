"""The text that stands in for what eviction archived: an output's stub, an argument's, a request's.

Why one module for every stub: a batch prices a page-out by what the stub will weigh before it
archives anything (:mod:`.choosing`, with a placeholder key of the same length), then writes the very
same text with the real key (:mod:`.paging`); both must build it one way. Every stub names the
archive's key and how to bring the text back (``lightmem2 recover`` on a host without the recover
tool), so nothing paged out is lost to the model.
"""

from __future__ import annotations

import json
import re

from ..model import Message
from .collapse import request_text, short_goal
from .goals import GoalTask

EVICTED = "[lightmem2: output archived as "
"""How the stub of an output a batch paged out begins (``report`` reads its savings by it)."""
_AT_TURN = re.compile(r",? (?:at|by) turn \d+")
_PATH = re.compile(r"(?<![\w.])/(?:[^\s/:,]+/)+([^\s/:,]+)")
_CHUNK = re.compile(r"^task \S+ finished$")


def stub_reason(why: str) -> str:
    """Why an output was paged out, as its stub says it: the estimator's evidence without its message
    numbers (the model counts no messages) and with file names for paths.

    Why say it: the stub said "output of finished work" for every output, also for a read an edit had
    superseded while its task went on (a review of the Claude Code traces: 13 of the 16 such stubs),
    which tells the model the work is done."""
    if not why or _CHUNK.match(why):
        return "the step of the work it served is done"
    return _PATH.sub(r"\1", _AT_TURN.sub("", why)).strip()


def recover_hint(key: str, lines: tuple[int, int] | None, shell: bool) -> str:
    """How a stub tells the model to bring back archive ``key`` (its ``lines`` only, when known):
    the command line on a host without the recover tool (``shell``), else the tool call."""
    if shell:
        return f"run: lightmem2 recover {key}" + (f" --lines {lines[0]}:{lines[1]}" if lines else "")
    return "recover with lightmem2_recover(key" + (f', lines="{lines[0]}:{lines[1]}"' if lines else "") + ")"


COMPACTED = "to keep the context under the host's compaction limit"
"""Why a compaction paged an output out (:mod:`.compacting`): it may well be current, so its stub does
not say it is no longer."""


def output_stub(key: str, why: str, lines: tuple[int, int] | None, shell: bool) -> str:
    """The stub of a tool output a batch paged out (its session record, if any, is added after it)."""
    hint = recover_hint(key, lines, shell)
    if why == COMPACTED:
        return f"{EVICTED}{key} {why}; {hint}]"
    return f"{EVICTED}{key}, no longer current ({stub_reason(why)}); {hint}]"


def largest_leaf(arguments: str) -> tuple[str, str] | None:
    """The name and value of the longest top-level string argument, if the arguments are an object."""
    try:
        obj = json.loads(arguments)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    strings = [(k, v) for k, v in obj.items() if isinstance(v, str)]
    return max(strings, key=lambda kv: len(kv[1])) if strings else None


def stub_arguments(
    arguments: str, key: str, shell: bool, lines: tuple[int, int] | None = None
) -> tuple[str, str] | None:
    """The arguments with their longest string value replaced by its first line and a stub naming
    the archive; (new arguments JSON, the name replaced), or None when they are not a JSON object."""
    leaf = largest_leaf(arguments)
    if leaf is None:
        return None
    name, value = leaf
    obj = json.loads(arguments)
    head = value.split("\n", 1)[0]
    head = head if len(head) <= 160 else head[:159] + "…"
    hint = recover_hint(key, lines, shell)
    obj[name] = f"{head}\n[lightmem2: {len(value):,} chars of this executed call archived as {key}; {hint}]"
    return json.dumps(obj, ensure_ascii=False), name


def request_stub(t: GoalTask, messages: list[Message], key: str, shell: bool, keep_chars: int) -> str | None:
    """What stays of task ``t``'s request when it leaves with the task (collapse.short_goal), or
    None when it stays whole (short, not one text block, or host context between it and the
    work: that context stays, so the request does too)."""
    if not keep_chars or t.first != t.goal + 1:
        return None
    text = request_text(messages[t.goal])
    if text is None:
        return None
    return short_goal(text, t.number, key, keep_chars, shell)
