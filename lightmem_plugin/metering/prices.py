"""Money beside K: what a call costs in USD, from the providers' list prices or the user's own.

Why money at all: K (DESIGN 1) compares policies in one unit, but a user pays dollars, and dollars
weigh what K leaves out: output tokens, a cache write's premium (Anthropic bills 1.25x for 5 minutes,
2x for 1 hour), a cached read that is not 0.1x (gpt-4.1 reads at 0.25x). So every call is also priced
in USD, as the provider bills it, beside K (never instead of it).

The table below holds **list prices in USD per million tokens, as of 2026-12-06**, checked against
the providers' pricing pages: Anthropic (platform.claude.com/docs/en/about-claude/pricing: every Claude
model's input, 5-minute and 1-hour cache writes, cache hits, output), OpenAI (openai.com/api/pricing:
input, cached input, output; a cache write is billed as plain input) and DeepSeek
(api-docs.deepseek.com/quick_start/pricing: cache hit, cache miss, output of ``deepseek-chat`` and
``deepseek-reasoner``, both DeepSeek-V3.2 since 2025-09). They are list prices: batch discounts,
regional or priority tiers, long-context surcharges and negotiated rates are not in them. A user
overrides or adds a model with the ``prices`` config key (:class:`~lightmem_plugin.config.ModelPrice`);
nothing here goes to the network.

Matching: a model name (lower-cased) matches a prefix when it is the prefix, or continues after it
with ``-``, ``@``, ``:`` or ``[`` (``claude-sonnet-4`` matches ``claude-sonnet-4-5-20250929``;
``gpt-5`` matches ``gpt-5-2025-08-07`` but not ``gpt-5.5``, a model with its own price). The longest
matching prefix wins, the config's entries before the table's. A model nothing matches has no money
figure (None, shown as "-" with :func:`hint`), never a guess: that is also why the table names Opus 4.x
minor versions one by one (4 and 4.1 cost three times 4.5) and has no bare ``claude-opus-4``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..config import ModelPrice
from ..errors import UsageError

PRICED_AS_OF = "2026-12-06"
"""When the list prices below were last checked against the providers' pages."""

PER_TOKENS = 1_000_000
"""Prices are per million tokens."""


@dataclass(frozen=True)
class Price:
    """One model's prices in USD per million tokens; a cache write on a provider that bills none apart
    (OpenAI, DeepSeek) costs ``input``."""

    provider: str
    input: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float
    output: float


def _anthropic(input: float, output: float) -> Price:
    """Anthropic's prices follow one rule: reads 0.1x, 5-minute writes 1.25x, 1-hour writes 2x input."""
    return Price("anthropic", input, input / 10, input * 1.25, input * 2, output)


def _openai(input: float, cached: float, output: float) -> Price:
    return Price("openai", input, cached, input, input, output)


def _deepseek(miss: float, hit: float, output: float) -> Price:
    return Price("deepseek", miss, hit, miss, miss, output)


_OPUS_45 = _anthropic(5.0, 25.0)
_OPUS_4 = _anthropic(15.0, 75.0)
_GPT_5 = _openai(1.25, 0.125, 10.0)
_GPT_5_MINI = _openai(0.25, 0.025, 2.0)

LIST_PRICES: dict[str, Price] = {
    # Anthropic (Opus 4 and 4.1 at the old tier; 4.5 on at $5 / $25)
    "claude-opus-4-8": _OPUS_45,
    "claude-opus-4-7": _OPUS_45,
    "claude-opus-4-6": _OPUS_45,
    "claude-opus-4-5": _OPUS_45,
    "claude-opus-4-1": _OPUS_4,
    "claude-opus-4-0": _OPUS_4,
    "claude-opus-4-20250514": _OPUS_4,
    "claude-sonnet-4": _anthropic(3.0, 15.0),
    "claude-3-7-sonnet": _anthropic(3.0, 15.0),
    "claude-haiku-4": _anthropic(1.0, 5.0),
    "claude-3-5-haiku": _anthropic(0.8, 4.0),
    "claude-3-haiku": Price("anthropic", 0.25, 0.03, 0.30, 0.50, 1.25),
    # OpenAI (no charge for a cache write: it is billed as input)
    "gpt-5": _GPT_5,
    "gpt-5-codex": _GPT_5,
    "gpt-5-chat-latest": _GPT_5,
    "gpt-5-mini": _GPT_5_MINI,
    "gpt-5-codex-mini": _GPT_5_MINI,
    "gpt-5-nano": _openai(0.05, 0.005, 0.40),
    "gpt-5-pro": _openai(15.0, 15.0, 120.0),
    "gpt-5.1": _GPT_5,
    "gpt-5.1-codex": _GPT_5,
    "gpt-5.1-codex-max": _GPT_5,
    "gpt-5.1-codex-mini": _GPT_5_MINI,
    "gpt-5.2": _openai(1.75, 0.175, 14.0),
    "gpt-4.1": _openai(2.0, 0.50, 8.0),
    "gpt-4.1-mini": _openai(0.40, 0.10, 1.60),
    "gpt-4.1-nano": _openai(0.10, 0.025, 0.40),
    "gpt-4o": _openai(2.50, 1.25, 10.0),
    "gpt-4o-mini": _openai(0.15, 0.075, 0.60),
    "o3": _openai(2.0, 0.50, 8.0),
    "o4-mini": _openai(1.10, 0.275, 4.40),
    # DeepSeek (V3.2 behind both names: a hit is 0.1x a miss)
    "deepseek-chat": _deepseek(0.28, 0.028, 0.42),
    "deepseek-reasoner": _deepseek(0.28, 0.028, 0.42),
}
"""Built-in list prices by model name prefix (see the module docstring for the sources and date)."""

PROVIDERS = ("anthropic", "openai", "deepseek")
"""Providers with list prices here."""
SELF_HOSTED = ("vllm",)
"""Providers a replay may name that have no list price (a model you serve yourself): never priced."""
ANY_PROVIDER = ("token",)
"""Cache models a replay may name that are no provider (``token``: idealised caching by the token):
the model name alone decides the price."""

CONFIG_KEY = "prices"


def matches(prefix: str, model: str) -> bool:
    """True when ``model`` is ``prefix`` or continues it after a separator (both compared lower-cased)."""
    p, m = prefix.lower(), model.lower()
    return m == p or (m.startswith(p) and m[len(p)] in "-@:[")


def _longest(model: str, table: Mapping[str, Price]) -> Price | None:
    found = [prefix for prefix in table if matches(prefix, model)]
    return table[max(found, key=lambda p: (len(p), p))] if found else None


def from_config(entry: ModelPrice, provider: str = "config") -> Price:
    """A ``prices`` config entry as a :class:`Price` (unset writes: see :class:`~.config.ModelPrice`)."""
    write_5m = entry.input if entry.cacheWrite5m is None else entry.cacheWrite5m
    write_1h = write_5m if entry.cacheWrite1h is None else entry.cacheWrite1h
    return Price(provider, entry.input, entry.cacheRead, write_5m, write_1h, entry.output)


def price_for(
    model: str | None, overrides: Mapping[str, ModelPrice] | None = None, provider: str | None = None
) -> Price | None:
    """The price of ``model``: the longest matching prefix of ``overrides`` (the ``prices`` config
    key), else of the built-in table (only ``provider``'s entries when one is named); None when nothing
    matches, the model is unknown, or ``provider`` is self-hosted. A routed name (``deepseek/deepseek-chat``,
    as LiteLLM and OpenRouter spell it) is priced as the model after its last ``/`` when the whole name
    matches nothing."""
    if not model:
        return None
    found = _price_for(model, overrides, provider)
    if found is None and "/" in model.strip("/"):
        found = _price_for(model.rstrip("/").rsplit("/", 1)[1], overrides, provider)
    return found


def _price_for(model: str, overrides: Mapping[str, ModelPrice] | None, provider: str | None) -> Price | None:
    if overrides:
        mine = {prefix: from_config(entry) for prefix, entry in overrides.items()}
        found = _longest(model, mine)
        if found is not None:
            return found
    if provider is not None and provider not in ANY_PROVIDER:
        if provider in SELF_HOSTED:
            return None
        if provider not in PROVIDERS:
            known = ", ".join((*PROVIDERS, *SELF_HOSTED, *ANY_PROVIDER))
            raise UsageError(f'unknown provider "{provider}" for prices; use one of {known}')
        return _longest(model, {p: v for p, v in LIST_PRICES.items() if v.provider == provider})
    return _longest(model, LIST_PRICES)


def money(price: Price, hit: int, miss: int, write_5m: int = 0, write_1h: int = 0, output: int = 0) -> float:
    """USD of one call with disjoint token counts: ``hit`` read from the cache, ``miss`` uncached
    input (writes not included), ``write_5m`` / ``write_1h`` written to the cache, ``output``."""
    return (
        hit * price.cache_read
        + miss * price.input
        + write_5m * price.cache_write_5m
        + write_1h * price.cache_write_1h
        + output * price.output
    ) / PER_TOKENS


def money_of(
    provider: str | None,
    model: str | None,
    hit: int,
    miss: int,
    write_5m: int = 0,
    write_1h: int = 0,
    output: int = 0,
    overrides: Mapping[str, ModelPrice] | None = None,
) -> float | None:
    """USD of one call of ``model`` on ``provider`` (None or ``token``: any; the replay's ``--provider``
    values are all accepted), as :func:`money` counts it; None when
    no price is known (:func:`hint` says what to set). A pure function for the replay: the same figures
    always give the same money."""
    price = price_for(model, overrides, provider)
    return None if price is None else money(price, hit, miss, write_5m, write_1h, output)


def hint(model: str | None) -> str:
    """One line for a call without money: why, and the config key that would price it (``model``
    None: a row recorded before the ledger kept money; '': the request named no model)."""
    if model is None:
        return "money: - (calls recorded before lightmem2 kept money)"
    if not model:
        return "money: - (the request named no model, so no price applies)"
    return (
        f'money: - (no price for model "{model}"; set {CONFIG_KEY}."{model}" in config.json to '
        "{input, cacheRead, cacheWrite5m, cacheWrite1h, output} in USD per million tokens)"
    )
