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
estimate starts from the provider's count at the last call whose usage came (:class:`Gauge`) and adds
what the messages gained since, in lightmem2's count times the provider's tokens per token (at most
:data:`INCREMENT_RATIO`); without any usage, lightmem2's own count (which undercounts: the margin must
hold the rest). What a batch decides with is kept in the session state, so a restarted process
decides the same.
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

MAX_MARGIN_SHARE = 0.41
"""The default margin is at most this share of the threshold: a host on a small window (OpenClaw on a
64k model compacts past ~48,000) would otherwise be within it from its first call, and compact at
every batch. Claude Code's 167,000 allows 68,470, above the default 67,000: unchanged."""

MAX_KEEP_SHARE = 0.25
"""The newest history a compaction keeps whole is at most this share of the threshold: on a small
window the default would be most of the history there is, and little would page out."""

MIN_SAVING_SHARE = 0.25
"""A compaction runs only when what it pages out is at least this share of the context (lightmem2's
count). Past it the context is mostly what no compaction pages out (what the user and the assistant
wrote, the newest work, the head): compacting again would re-write the context for little, and do it
at every batch (replayed on the long Claude Code traces with compaction from 80,000 tokens: nine
compactions in one session, the last five from ~80,000 to ~75,000 each, $8.05 of cache writes against
$2.40). Skipped, the context grows until a compaction pays again, still before the host's threshold."""

INCREMENT_RATIO = 1.25
"""Provider tokens per token lightmem2 counts, for what the messages gained since the last measured
call, at most: the tokenizers differ by 10-25% on text and code. The whole ratio is no measure of it:
it carries the system prompt and tools, which do not grow with the messages (on OpenClaw's ~12,700-
token head, scaling the whole context by it put a 26,000-token context at 38,500)."""

MAX_RATIO = 4.0
"""The provider's count per token lightmem2 counts is taken as at most this (a usage that says more
belongs to another request: a retry, a host's own side call)."""


def threshold(config: EvictionConfig, host: str | None, told: int | None = None) -> int:
    """Context tokens past which the host compacts: ``eviction.compactAtTokens``, else what the host
    told for this request (``told``: OpenClaw's token budget for the messages, from the model's own
    window), else the host's rule for a 200k window (:data:`HOST_THRESHOLDS`).

    Why the host's word before the table: OpenClaw compacts past the model's window less its reserve,
    and a model's window is anything from 32k to 1M; the table's 180,000 holds for 200k models only,
    so on a 128k model the host compacted (lossily) long before lightmem2 would have. OpenClaw's
    budget is for the messages alone (its window less the reserve and the prompt), so it is compared
    with the messages alone (:func:`messages_only`)."""
    if config.compactAtTokens is not None:
        return config.compactAtTokens
    if told is not None and messages_only(config, told):
        return told
    return HOST_THRESHOLDS.get(host or "", DEFAULT_THRESHOLD)


def messages_only(config: EvictionConfig, told: int | None) -> bool:
    """True when the threshold in force is a budget the host told for the messages alone (OpenClaw's
    ``tokenBudget``), so the estimate leaves out the system prompt and tools (:func:`estimate`)."""
    return config.compactAtTokens is None and told is not None and told > 0


def margin(config: EvictionConfig, limit: int) -> int:
    """How far under ``limit`` compaction starts: ``eviction.compactMarginTokens`` as the user set it,
    else its default, at most :data:`MAX_MARGIN_SHARE` of the limit."""
    value = config.compactMarginTokens
    return (
        value
        if "compactMarginTokens" in config.model_fields_set
        else min(value, round(limit * MAX_MARGIN_SHARE))
    )


def keep_cap(limit: int) -> int:
    """The most of the newest history a compaction under ``limit`` keeps whole by default, the newest
    tool output included (:data:`MAX_KEEP_SHARE` of it)."""
    return round(limit * MAX_KEEP_SHARE)


def keep(config: EvictionConfig, limit: int) -> int:
    """Tokens of the newest history a compaction under ``limit`` keeps whole:
    ``eviction.compactKeepTokens`` (its default at most :func:`keep_cap`)."""
    value = config.compactKeepTokens
    return value if "compactKeepTokens" in config.model_fields_set else min(value, keep_cap(limit))


def ratio_of(measured: tuple[int, int] | None) -> float:
    """The provider's tokens per token lightmem2 counts, from ``measured`` (the provider's input,
    lightmem2's count of the messages then), at least 1 and at most :data:`MAX_RATIO`; 1 unmeasured."""
    if measured is None:
        return 1.0
    provider, sent = measured
    return min(MAX_RATIO, max(1.0, provider / sent))


class Gauge:
    """The provider's count and lightmem2's, at the last call whose usage came."""

    def __init__(self) -> None:
        self.sent = 0
        """lightmem2's count of the messages the last call sent (0: not known)."""
        self.measured: tuple[int, int] | None = None
        """(the provider's input tokens, :attr:`sent`) at the last call whose usage came."""

    @property
    def ratio(self) -> float | None:
        """The provider's tokens per token lightmem2 counts (:func:`ratio_of`; None: never measured)."""
        return None if self.measured is None else ratio_of(self.measured)

    def usage(self, provider_input: int) -> None:
        """The provider counted ``provider_input`` input tokens for the last call."""
        if self.sent > 0 and provider_input > 0:
            self.measured = (provider_input, self.sent)


def estimate(total: int, measured: tuple[int, int] | None = None, messages: bool = False) -> int:
    """The context in the host's count, for messages lightmem2 counts ``total`` tokens: the provider's
    count at the last measured call (``measured``: its input, lightmem2's count then) plus what the
    messages gained since, times the provider's tokens per token (:func:`ratio_of`, at most
    :data:`INCREMENT_RATIO`); never measured, ``total``. ``messages``: the messages alone, ``total``
    times that ratio (the provider's count of the head is no part of them)."""
    ratio = min(ratio_of(measured), INCREMENT_RATIO)
    if messages or measured is None:
        return round(total * ratio)
    provider, then = measured
    return max(0, round(provider + (total - then) * ratio))


def kept_from(
    sizes: list[int], head: int, keep_tokens: int, newest: int | None = None, most: int | None = None
) -> int:
    """Where the newest messages of at most ``keep_tokens`` tokens start (never before ``head``), and
    not after ``newest`` (the message of the newest tool output: the model has not read it yet, or
    just has, and acts on it; paged out as it arrives, it would never have been seen whole) while the
    messages from there are at most ``most`` tokens (a larger one would keep the context too near the
    threshold for any compaction to hold it off)."""
    start, total = len(sizes), 0
    for k in range(len(sizes) - 1, head - 1, -1):
        total += sizes[k]
        if total > keep_tokens:
            break
        start = k
    if newest is None or newest >= start or newest < head:
        return start
    return newest if most is None or sum(sizes[newest:]) <= most else start


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
