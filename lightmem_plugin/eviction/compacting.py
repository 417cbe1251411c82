"""Lossless compaction before the host's: page out the old history at a batch, so the host never
summarises it.

Why (DESIGN 1b, "Host compaction"): a host compacts when a call's context passes its threshold
(Claude Code 167,000 tokens, OpenClaw 180,000): one more LLM call reads the whole context and writes a
summary, the context is written to the cache again, and what the agent later needs from before the
summary is gone unless the summary repeats it (replayed on the Claude Code traces: 2-4% of later uses
lost). lightmem2 already has what a lossless compaction needs: the archive, the batch machinery
(:mod:`.paging`, :mod:`.applying`) and the session record. So when the context comes within
``eviction.compactMarginTokens`` of the host's threshold, the next batch pages out every tool output and
long argument older than the newest ``eviction.compactKeepTokens`` of history, whatever the cost rule
says (the host's compaction would break the cache anyway, and lose what it drops): each becomes a stub
whose key recovers it byte-exact, the first carries the session record, and what the user and the
assistant wrote stays. No summarising call, nothing lost.

How big the context is, the host's way: the provider counts it (its tokenizer, the system prompt and
tools, thinking the host sends), and lightmem2 counts the messages it sends with its own tokenizer. The
ratio of the two at the last call whose usage came (:class:`Gauge`) turns lightmem2's count into the
host's; without any usage, lightmem2's own count (which undercounts: the margin must hold the rest).
The ratio a batch decides with is kept in the session state, so a restarted process decides the same.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ..config import EvictionConfig
from ..model import Message, Request, ToolCallPart
from ..tokens import TokenCounter
from .choosing import MIN_SAVING_TOKENS, PLACEHOLDER_KEY, Candidate
from .collapse import Collapse, collapsed_at
from .entries import tool_result
from .stubs import COMPACTED, output_stub, stub_arguments

HOST_THRESHOLDS: dict[str, int] = {"claude-code": 167_000, "openclaw": 180_000}
"""Context tokens past which each host compacts (the figures and their sources:
:data:`..measure.compaction.HOST_LIMITS`)."""

DEFAULT_THRESHOLD = HOST_THRESHOLDS["claude-code"]
"""An unknown host's: Claude Code's, the lowest of the known ones (acting early loses nothing)."""

MAX_RATIO = 4.0
"""The provider's count per token lightmem2 counts is taken as at most this (a usage that says more
belongs to another request: a retry, a host's own side call)."""


def threshold(config: EvictionConfig, host: str | None) -> int:
    """Context tokens past which the host compacts: ``eviction.compactAtTokens``, else the host's rule."""
    if config.compactAtTokens is not None:
        return config.compactAtTokens
    return HOST_THRESHOLDS.get(host or "", DEFAULT_THRESHOLD)


class Gauge:
    """The provider's tokens per token lightmem2 counts, from the last call whose usage came."""

    def __init__(self) -> None:
        self.sent = 0
        """lightmem2's count of the messages the last call sent (0: not known)."""
        self.ratio: float | None = None
        """The provider's input tokens over :attr:`sent` at the last call whose usage came."""

    def usage(self, provider_input: int) -> None:
        """The provider counted ``provider_input`` input tokens for the last call."""
        if self.sent > 0 and provider_input > 0:
            self.ratio = min(MAX_RATIO, max(1.0, provider_input / self.sent))


def estimate(sizes: list[int], ratio: float) -> int:
    """The context in the host's count: lightmem2's count of the messages times ``ratio``."""
    return round(sum(sizes) * ratio)


def kept_from(sizes: list[int], head: int, keep_tokens: int) -> int:
    """Where the newest messages of at most ``keep_tokens`` tokens start (never before ``head``)."""
    start, total = len(sizes), 0
    for k in range(len(sizes) - 1, head - 1, -1):
        total += sizes[k]
        if total > keep_tokens:
            break
        start = k
    return start


def candidates(
    ids: list[str | None],
    owners: list[int],
    original: Request,
    sent: Request,
    head: int,
    end: int,
    paged: tuple[Mapping[str, str], Mapping[str, str], list[Collapse]],
    counter: TokenCounter,
    shell: bool,
    keep: Collection[str] = (),
) -> list[Candidate]:
    """Every tool output and tool-call argument in messages ``head`` to ``end`` (exclusive) that a stub
    makes shorter by at least :data:`.choosing.MIN_SAVING_TOKENS`, not paged out already, in message
    order (the first output's stub then carries the session record). ``paged``: the outputs, arguments
    and finished tasks paged out already (:class:`.state.EvictionState`'s stubs, args, collapses);
    ``keep``: outputs that stay whatever their age (the newest run of a command while it has error
    lines, :func:`.choosing.acted_on`: a compaction that paged them out hid 70% of the error lines the
    agent went on to act on, on the long dev Claude Code sessions)."""
    stubs, args, collapses = paged
    items: list[Candidate] = []
    stub_tokens = counter.count(output_stub(PLACEHOLDER_KEY, COMPACTED, (10_000, 10_999), shell))
    for turn, cid in enumerate(ids):
        m = owners[turn]
        if cid is None or not head <= m < end or cid in stubs or cid in keep or collapsed_at(collapses, m):
            continue
        part = tool_result(sent.messages[m], cid)
        saving = (counter.count(part.text()) if part is not None else 0) - stub_tokens
        if saving >= MIN_SAVING_TOKENS:
            items.append(Candidate(m, cid, saving, 0.0, COMPACTED))
    for m in range(head, end):
        msg: Message = original.messages[m]
        if msg.role != "assistant" or collapsed_at(collapses, m):
            continue
        for p in msg.parts:
            if not isinstance(p, ToolCallPart) or p.id in args:
                continue
            stubbed = stub_arguments(p.arguments, PLACEHOLDER_KEY, shell, (10_000, 10_999))
            if stubbed is None:
                continue
            saving = counter.count(p.arguments) - counter.count(stubbed[0])
            if saving >= MIN_SAVING_TOKENS:
                items.append(Candidate(m, f"args:{p.id}", saving, 0.0, COMPACTED))
    return sorted(items, key=lambda it: (it.index, it.ident))
