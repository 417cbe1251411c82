"""What an eviction batch's cache break costs on the provider's prompt cache: the price the cost rule weighs.

Why per provider: the rule pages out ``X`` tokens when ``0.1 * X`` over the remaining calls beats the
one-time price of re-sending what the break invalidates (DESIGN 1). That price is not the same
everywhere:

- **Prefix caches** (OpenAI, DeepSeek, vLLM: automatic, by block): the cache still holds everything
  before the break, so only the tokens after it are re-read as misses, ``1.0`` instead of ``0.1``
  each: ``0.9`` per token after the break.
- **Anthropic** (explicit ``cache_control`` breakpoints): a request finds a cached prefix only at its
  own breakpoints or the ~20 content blocks before each. Hosts put them on the system prompt and the
  last messages, so a break further back than that is found only at the system breakpoint: every
  message token is written again, billed ``1.25`` instead of read at ``0.1``: ``1.15`` per token
  after the head. Measured on the Claude Code traces (``lightmem2 replay``, Anthropic model): with
  the prefix price one batch at call 128 of a 143-call session re-wrote 54k tokens for 61k K, and
  aggressive cost 2.2% more than normal on that session.

The model follows the wire API the request came in on (:attr:`..wire.base.WireApi.cache_model`), or
``eviction.cacheModel`` when the user knows better (an Anthropic model behind an OpenAI-compatible
router).

At a call whose cache is cold anyway (a pause past the TTL, :mod:`.cold_cache`) the whole prompt is
written again whatever the batch does, so the break's price there is zero (:meth:`BreakCost.at_cold`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

CacheModel = Literal["prefix", "anthropic"]


@dataclass(frozen=True)
class BreakCost:
    """The one-time price of a break: ``per_token`` K for each token it invalidates, counted from the
    break (``from_head`` False) or from the end of the request's head (system messages) on; ``cold``:
    priced at a cold call, where it is free."""

    name: CacheModel
    per_token: float
    from_head: bool
    cold: bool = False

    def at_cold(self) -> BreakCost:
        """The same cache at a call that finds it cold: nothing extra to write, so nothing to pay."""
        return replace(self, per_token=0.0, cold=True)

    def tokens(self, sizes: list[int], head: int, at: int) -> int:
        """Tokens a break at message ``at`` invalidates (``sizes``: tokens per message, as sent)."""
        return sum(sizes[head if self.from_head else at :])


PREFIX = BreakCost("prefix", 0.9, False)
ANTHROPIC = BreakCost("anthropic", 1.15, True)
BREAK_COSTS: dict[CacheModel, BreakCost] = {c.name: c for c in (PREFIX, ANTHROPIC)}


def break_cost(setting: str, wire_model: CacheModel | None, cold: bool = False) -> BreakCost:
    """The price in force: ``eviction.cacheModel`` when set, else the request's wire API's (prefix when
    the request came through the Python API, which does not say); zero at a ``cold`` call."""
    found = BREAK_COSTS[setting] if setting != "auto" else BREAK_COSTS[wire_model or "prefix"]  # type: ignore[index]
    return found.at_cold() if cold else found
