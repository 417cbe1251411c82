"""What a recorded session's provider did that no cache model foresees, so every policy meets it too.

Why: replaying through a cache that never forgets put simulated vanilla K 17-30% below what the
provider billed on every long Claude Code session. Reading the recorded ``usage`` shows three causes a
replay can take from the recording itself:

- **Expiry.** A prefix lives a few minutes after its last use (Anthropic: five minutes, or an hour
  where the host asks; the recorded ``cache_creation`` split says which). After a longer pause the
  whole context is written again. The cache model applies the TTL to the calls' recorded times
  (:func:`ttl_of`); a session without times never expires.
- **Short reads.** With no pause and nothing changed, a call read less than the previous call had
  left cached (in 258c7280, 2.5 minutes after the previous call, only the 21,460-token head; 89,928
  tokens written again). Every replayed policy reads at most as much at the same call
  (:attr:`Luck.caps`); what the provider held stays for the calls after, as the recordings show.
  What a call left cached is its reads and writes where the recording says (Anthropic), else its
  prompt and, where the provider caches answers (:func:`answers_cached`), its answer: DeepSeek read
  at least 1,024 tokens short of that on 157 of the 4,598 swe calls. Capping those and caching the
  answers took the swe totals from 1.034x the bill to 0.995x (either alone: 0.970x, 1.069x).
- **Warm heads.** A session's first call already read its head, cached by an earlier session
  (:attr:`Luck.warm`).

What is not luck is left to the policy: a prompt that changed (a host's compaction rewrites the
history), or a pause the TTL explains.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..eviction.cold_cache import DEFAULT_TTL_S as DEFAULT_TTL_S  # re-exported
from ..eviction.cold_cache import HOUR_S as HOUR_S  # re-exported
from ..eviction.cold_cache import MIN_DROP
from .traces.base import Trace, appends_to

MIN_SHORT_READ = MIN_DROP
"""Tokens a read must fall short by to count as the provider's luck: less is where the provider's
cache positions (blocks, breakpoints) fall, not a loss (the recorded short reads fell 8,000 to 90,000 tokens short)."""

WRITE_FACTOR = {300.0: 1.25, HOUR_S: 2.0}
"""What a cache write costs in uncached-input units, by how long it is kept (Anthropic bills a
five-minute write at 1.25x the input price and a one-hour write at 2x)."""


@dataclass(frozen=True)
class Luck:
    """The provider's part of a recorded session, for its replay.

    ``ttl``: seconds a cached prefix lives (None: forever); ``write_factor``: what a write costs;
    ``warm``: tokens of the first prompt already cached; ``caps``: call index -> the most the provider
    read from its cache at that call.
    """

    ttl: float | None = None
    write_factor: float = 1.25
    warm: int = 0
    caps: dict[int, int] = field(default_factory=dict)
    recorded_write_factor: float = 1.25
    """What a write cost in the recording (its bill), whatever TTL the replay's policy asks."""


def ttl_of(trace: Trace, provider: str) -> float | None:
    """How long ``provider`` keeps this session's cached prefixes: an hour where the recorded writes
    were one-hour writes (Claude Code asks for it on some plans), else the provider's default; None for
    a session without recorded times (nothing can expire in it)."""
    if not trace.calls or any(c.at is None for c in trace.calls):
        return None
    if provider == "anthropic" and any(c.cache_write_1h_tokens for c in trace.calls):
        return HOUR_S
    return DEFAULT_TTL_S.get(provider)


def chosen_ttl(trace: Trace, provider: str, asked: float | None) -> float | None:
    """How long ``provider`` keeps this session's prefixes when the replayed policy's requests ask for
    ``asked`` seconds (``stabilizer.cacheTtl``; None: as recorded, :func:`ttl_of`). A session without
    recorded times still never expires: no pause is known."""
    recorded = ttl_of(trace, provider)
    return recorded if asked is None or recorded is None else asked


def write_factor(ttl: float | None) -> float:
    """What a write costs under ``ttl`` (:data:`WRITE_FACTOR`; a TTL without a price of its own, or
    none, at the five-minute price)."""
    return WRITE_FACTOR.get(ttl or 300.0, 1.25)


def recorded_luck(trace: Trace, provider: str, asked: float | None = None) -> Luck:
    """The luck of ``trace`` for a replay on ``provider``: none unless the replay runs on the provider
    that recorded it (another provider's cache would have had its own). ``asked``: the TTL the
    replayed policy's requests ask for (:func:`chosen_ttl`); the cache model keeps prefixes that long
    and bills writes at its price, while what the recording shows is read with the recorded TTL (a
    pause that expired the recorded prefix is the TTL's doing, never luck to carry over)."""
    recorded = ttl_of(trace, provider)
    ttl = chosen_ttl(trace, provider, asked)
    factor, billed = write_factor(ttl), write_factor(recorded)
    if provider != trace.provider or not trace.calls:
        return Luck(ttl, factor, recorded_write_factor=billed)
    caps: dict[int, int] = {}
    answers = answers_cached(trace)
    for i in range(1, len(trace.calls)):
        before, now = trace.calls[i - 1], trace.calls[i]
        paused = (
            recorded is not None
            and now.at is not None
            and before.at is not None
            and now.at - before.at > recorded
        )
        if before.cache_creation_input_tokens is not None:
            left = (
                before.cache_read_input_tokens or 0
            ) + before.cache_creation_input_tokens  # cached after it
        else:  # a provider that caches every request whole: the prompt, and the answer where it does
            left = before.prompt_tokens + ((before.completion_tokens or 0) if answers else 0)
        short = left - now.cached_tokens >= MIN_SHORT_READ
        if paused or not short or not appends_to(before.prompt, now.prompt):
            continue
        caps[i] = now.cached_tokens
    return Luck(ttl, factor, trace.calls[0].cached_tokens, caps, billed)


def answers_cached(trace: Trace) -> bool | None:
    """True when the recorded provider read past the previous prompt on most calls: it cached the
    answer too (deepseek-chat on the swe sessions; deepseek-reasoner, which generates its thinking
    first, never). Not luck: how the provider treats this model, which the replay follows whatever
    its clock. None for a recording without usage (a chained session) or with one call."""
    pairs = [(a, b) for a, b in zip(trace.calls, trace.calls[1:], strict=False) if a.prompt_tokens]
    if not pairs:
        return None
    return 2 * sum(b.cached_tokens > a.prompt_tokens for a, b in pairs) > len(pairs)
