"""The host's automatic compaction, as replay models it.

Why: every long Claude Code session recorded here hit the host's compaction once, at about 167k
tokens. The host then sends one more call that reads the whole context and writes a summary, and
from the next call on the model sees that summary instead of the history: the context is written to
the cache again, and what the agent later needs from before the summary is gone unless the summary
repeats it. A replay of the recorded prompts shows the compaction where the host made it for the
vanilla session; a policy that keeps the context smaller would have met it later or never. So replay
can start from the history as if the host had not compacted (``TraceCall.uncompacted``) and apply the
host's rule itself: past the host's threshold, a compaction before the next call, priced as the
summarising call (the context read, an instruction, the summary as output) and followed by the
summary and whatever the host adds after it.

What a modelled compaction keeps: the host's system messages, the summary the host recorded for its
n-th compaction (the same message, so a vanilla replay meets the recorded prompts again), or, past
the recorded ones, a stand-in of the recorded summaries' size that repeats nothing verbatim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .traces.base import ChatMessage, RecordedCompaction, Trace, TraceKind, appends_to


@dataclass(frozen=True)
class HostLimit:
    """When a host compacts: past ``threshold`` context tokens (a call's input plus its output plus
    what was added since), before its next call; ``None``: the host never compacts. ``keep_recent``:
    tokens of the latest messages the host keeps whole after the summary (0: it keeps none)."""

    threshold: int | None
    source: str
    keep_recent: int = 0


HOST_LIMITS: dict[TraceKind, HostLimit] = {
    "claude-code": HostLimit(
        167_000,
        "Claude Code 2.x with a 200k-token model: the window less its output reserve (20k) and summary "
        "buffer (13k); the recorded automatic compactions fired at 167,094, 167,731 and 170,251 "
        "tokens, each right after the first call past 167,000",
    ),
    "openclaw": HostLimit(
        200_000 - 20_000,
        "OpenClaw 2026.9.6 with a 200k-token model: the window less compaction.reserveTokens (16,384 by "
        "default, raised to its floor of 20,000); it keeps the latest 20,000 tokens "
        "(compaction.keepRecentTokens) after the summary",
        keep_recent=20_000,
    ),
    "swe": HostLimit(None, "mini-swe-agent does not compact: a session past the window ends in an error"),
}

INSTRUCTION_TOKENS = 800
"""The summarising call's instruction (Claude Code 2.1.332's: 3,612 characters)."""

SUMMARY_TOKENS = 3_500
"""A stand-in summary's size where the recording has no summary to reuse (the recorded Claude Code
summaries are 12,181-15,743 characters)."""


@dataclass(frozen=True)
class HostCompaction:
    """One compaction the modelled host made: before call ``before_call`` (0-based), at
    ``context_tokens``, writing ``summary_tokens`` of output."""

    before_call: int
    context_tokens: int
    summary_tokens: int


@dataclass
class HostCompactor:
    """The host's history through a replay: whole until the context passes the threshold, then the
    summary and what came after it.

    ``count_tokens`` counts a list of messages as the replay's cache model does.
    """

    trace: Trace
    threshold: int | None
    count_tokens: Callable[[list[ChatMessage]], int]
    keep_recent: int = 0
    done: list[HostCompaction] = field(default_factory=list)
    _summary: ChatMessage | None = None
    _base: list[ChatMessage] = field(default_factory=list)  # the history when the host compacted
    _kept: int = 0  # where the messages it kept whole start in it

    def context(self, i: int, before_tokens: int, scale: float = 1.0) -> int:
        """What the host counts before call ``i``: the previous call's input and output as the
        provider reported them (``before_tokens``), and the messages added since (counted here, in
        the provider's tokens at ``scale`` per token counted)."""
        calls = self.trace.calls
        before, now = calls[i - 1].uncompacted, calls[i].uncompacted
        added = now[len(before) :] if appends_to(before, now) else now
        return before_tokens + round(self.count_tokens(added) * scale)

    def due(self, i: int, before_tokens: int, scale: float = 1.0) -> int | None:
        """The context size when the host compacts before call ``i``, else None."""
        if self.threshold is None or i == 0:
            return None
        size = self.context(i, before_tokens, scale)
        return size if size > self.threshold else None

    def compact(self, i: int, size: int) -> ChatMessage:
        """Compact everything before call ``i``; the summary the calls from ``i`` on see."""
        recorded = self.trace.compactions
        n = len(self.done)
        if n < len(recorded):
            summary = recorded[n].summary
        else:
            summary = stand_in(n + 1, _summary_size(recorded, self.count_tokens))
        self._summary = summary
        self._base = self.trace.calls[i].uncompacted
        self._kept = self._kept_from(self._base)
        self.done.append(HostCompaction(i, size, self.count_tokens([summary])))
        return summary

    def _kept_from(self, history: list[ChatMessage]) -> int:
        """Where the latest messages of at most ``keep_recent`` tokens start, at a message that is
        not a tool result (a result stays with its call); ``len(history)`` when none are kept."""
        start, total = len(history), 0
        for k in range(len(history) - 1, -1, -1):
            total += self.count_tokens([history[k]])
            if total > self.keep_recent:
                break
            if history[k].get("role") not in ("tool", "system"):
                start = k
        return start

    def prompt(self, i: int) -> list[ChatMessage]:
        """The prompt the host sends at call ``i``."""
        whole = self.trace.calls[i].uncompacted
        if self._summary is None or not appends_to(self._base, whole):
            return whole  # not compacted yet, or a history the host rewrote itself since
        system = [m for m in self._base[: self._kept] if m.get("role") == "system"][:1]
        return [*system, self._summary, *whole[self._kept :]]


def stand_in(n: int, tokens: int) -> ChatMessage:
    """A summary of ``tokens`` tokens that repeats nothing the session said, for compaction ``n``."""
    return {
        "role": "user",
        "content": f"[the host's summary of the conversation before compaction {n}]\n"
        + " summary" * max(0, tokens - 16),
    }


def _summary_size(recorded: list[RecordedCompaction], count: Callable[[list[ChatMessage]], int]) -> int:
    """The mean size of the recorded summaries, or :data:`SUMMARY_TOKENS` without any."""
    sizes = [count([c.summary]) for c in recorded]
    return round(sum(sizes) / len(sizes)) if sizes else SUMMARY_TOKENS


def host_limit(trace: Trace) -> HostLimit:
    """The compaction rule of the host that recorded ``trace``."""
    return HOST_LIMITS[trace.kind]
