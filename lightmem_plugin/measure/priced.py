"""Replayed sessions in money at a named model's list price, when the recorded model has none there.

Why: a replay may put a session on another provider's cache (``replay_paths(..., provider=...)``) to
ask what it would have cost there: the swe sessions were recorded on DeepSeek, and on Anthropic's
cache their five-minute TTL makes a user's pause a cold start. Their model name is a DeepSeek one,
which has no Anthropic price, so :attr:`SessionResult.usd` is None there, rightly: the replay does
not guess. A benchmark that wants money on that cache names the model it prices at, and this module
prices the replayed token counts (reads, uncached input, writes, the recorded output) at that
model's list price, as the replay prices its own. The name is the caller's declared choice and
goes into every report that uses it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import UsageError
from ..metering.prices import money_of, price_for
from .luck import HOUR_S
from .replay import SessionResult

ANTHROPIC_STAND_IN = "claude-sonnet-4-5"
"""The Claude model a session recorded elsewhere is priced as on Anthropic's cache (list $3 input,
$15 output per million tokens): the model Claude Code runs by default on most plans."""


def usd_as(results: Iterable[SessionResult], model: str) -> float:
    """The replayed sessions' total in USD had ``model`` served them on each result's provider.

    A cache write is priced as the replay's cache kept it (:attr:`SessionResult.cache_ttl_s`): a
    one-hour write where the replayed requests asked for the hour (``stabilizer.cacheTtl`` ``long``),
    else a five-minute write (a chained swe session has no recorded one-hour writes). Raises
    :class:`UsageError` when ``model`` has no price on a result's provider.
    """
    total = 0.0
    for r in results:
        if price_for(model, provider=r.provider) is None:
            raise UsageError(
                f'no list price for model "{model}" on provider "{r.provider}"; name a model of that '
                "provider (lightmem_plugin/metering/prices.py lists them)"
            )
        writes = r.write_tokens if r.provider == "anthropic" else 0
        hourly = writes if r.cache_ttl_s == HOUR_S else 0
        usd = money_of(
            r.provider, model, r.hit_tokens, r.miss_tokens - writes, writes - hourly, hourly, r.output_tokens
        )
        assert usd is not None  # priced above
        total += usd
    return round(total, 4)
