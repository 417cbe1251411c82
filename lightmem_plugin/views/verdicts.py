"""A net verdict per intervention: what each lightmem2 batch and each reduction pass removed, the cache
break it caused (or that it was free), and the money it saved or lost so far (``report``).

Why: "tokens saved" says nothing of the bill. A batch that pages out 5,000 tokens re-writes everything
after its first change (at the write price) to save the cached read of those 5,000 tokens on each later
call (a tenth of the input price on Anthropic): it pays only after enough calls, and one made a few
calls before the session ended never did. A reduction on arrival breaks nothing. So for each:

- **break**: the uncached tokens its call spent on its change (the ``lightmem2 change`` cause of
  :mod:`.miss_report`), priced at what the call paid per uncached token less the read price they would
  have cost had nothing changed; zero at a cold start, where the cache was gone anyway ("free");
- **saved so far**: the tokens it removed, on every later call, at the price that call would have paid
  for them: the read price on a warm call, the call's uncached price where its prefix was missed
  (an expiry, a provider drop);
- **net** = saved - break; ``report`` flags any batch whose net is below zero.

Reduction passes are summed per pass over the session: the tokens each call did not send because of the
pass (``saved_by_pass``), at the read price: a lower bound (the first call that would have carried an
output paid full price for it). Money needs a price for the model (the built-in list, or the
``prices`` config key passed in); without one the verdict is in tokens only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..metering.misses import DROP, EXPIRY, OURS, Cause
from ..metering.prices import PER_TOKENS, Price, price_for
from ..store.ledger import CallRecord
from . import miss_report

PriceOf = Callable[[str | None], Price | None]


@dataclass(frozen=True, slots=True)
class Verdict:
    """One intervention's account so far. ``what`` names it (a batch's description, a pass's name),
    ``call`` the call it was made at (None for a pass), ``tokens`` what it removed (per call for a
    batch; summed over calls for a pass), ``break_tokens`` the uncached tokens its change cost,
    ``free`` True when its call's cache was cold anyway; money None without a price."""

    kind: str
    what: str
    call: int | None
    tokens: int
    break_tokens: int
    free: bool
    break_usd: float | None
    saved_usd: float | None
    later_calls: int

    @property
    def net_usd(self) -> float | None:
        if self.saved_usd is None or self.break_usd is None:
            return None
        return self.saved_usd - self.break_usd

    @property
    def loses(self) -> bool:
        """True when it has cost more than it saved so far."""
        net = self.net_usd
        return net is not None and net < 0

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "what": self.what,
            "call": self.call,
            "tokensRemoved": self.tokens,
            "breakTokens": self.break_tokens,
            "free": self.free,
            "breakUsd": self.break_usd,
            "savedUsd": self.saved_usd,
            "netUsd": self.net_usd,
            "laterCalls": self.later_calls,
            "costMoreThanSaved": self.loses,
        }


def _scale(rec: CallRecord) -> float:
    """The provider's tokens per token lightmem2 counted, for this call (1 when it reported none)."""
    if rec.real_input_tokens and rec.input_tokens:
        return rec.real_input_tokens / rec.input_tokens
    return 1.0


def _uncached_rate(rec: CallRecord, causes: list[Cause]) -> float | None:
    """What the call paid per uncached token (its writes and misses blended), None without money."""
    tokens = sum(c.tokens for c in causes)
    return None if rec.uncached_usd is None or not tokens else rec.uncached_usd / tokens


def _read_rate(price: Price | None) -> float | None:
    return None if price is None else price.cache_read / PER_TOKENS


def batch_verdicts(
    calls: Sequence[CallRecord],
    price_of: PriceOf = price_for,
    causes: Mapping[int, list[Cause]] | None = None,
) -> list[Verdict]:
    """One verdict per call at which lightmem2 changed the past (a batch, a reduction at a cold start,
    a compaction), in call order; ``causes``: each call's miss causes when the caller has them."""
    if causes is None:
        causes = {c.call_index: miss_report.call_causes(c) or [] for c in calls}
    out = []
    for n, rec in enumerate(calls):
        if not rec.evicted_tokens:
            continue
        price = price_of(rec.model)
        read = _read_rate(price)
        mine = sum(c.tokens for c in causes[rec.call_index] if c.cause == OURS)
        free = bool(rec.cold_start and rec.cold_start.startswith("pause"))
        rate = _uncached_rate(rec, causes[rec.call_index])
        if free or not mine:
            break_usd: float | None = 0.0
        else:
            break_usd = None if rate is None or read is None else mine * max(0.0, rate - read)
        saved: float | None = 0.0
        later = calls[n + 1 :]
        for k in later:
            k_price = price_of(k.model)
            k_read = _read_rate(k_price)
            missed = any(c.cause in (EXPIRY, DROP) for c in causes[k.call_index])
            per = _uncached_rate(k, causes[k.call_index]) if missed else k_read
            if per is None or saved is None:
                saved = None
                continue
            saved += rec.evicted_tokens * _scale(k) * per
        what = (rec.break_reason or "a batch").removeprefix("eviction batch: ")
        out.append(
            Verdict(
                "batch", what, rec.call_index, rec.evicted_tokens, mine, free, break_usd, saved, len(later)
            )
        )
    return out


def pass_verdicts(calls: Sequence[CallRecord], price_of: PriceOf = price_for) -> list[Verdict]:
    """One verdict per reduction pass, summed over the session (a pass changes only what arrives: no
    break), largest saving first; a pass that cost tokens (the stabilizer's session block) shows them
    negative."""
    tokens: dict[str, int] = {}
    usd: dict[str, float | None] = {}
    for rec in calls:
        read = _read_rate(price_of(rec.model))
        for name, n in rec.saved_by_pass.items():
            if name == "eviction" or not n:  # a batch's saving is its own verdict
                continue
            tokens[name] = tokens.get(name, 0) + n
            before = usd.get(name, 0.0)
            usd[name] = None if before is None or read is None else before + n * _scale(rec) * read
    return sorted(
        (Verdict("pass", name, None, n, 0, True, 0.0, usd[name], len(calls)) for name, n in tokens.items()),
        key=lambda v: (-v.tokens, v.what),
    )


def lines(calls: Sequence[CallRecord], price_of: PriceOf = price_for) -> list[str]:
    """``report``'s lines: each batch's net so far, flagged when it cost more than it saved, then each
    pass's saving."""
    batches = batch_verdicts(calls, price_of)
    passes = pass_verdicts(calls, price_of)
    if not batches and not passes:
        return ["interventions: none"]

    def usd(v: float | None) -> str:
        return "-" if v is None else f"${v:.4f}"

    out = ["interventions, net so far (saved on later calls less the cache break it caused):"]
    for v in batches:
        brk = "free (cold start)" if v.free else f"break {v.break_tokens:,} tokens {usd(v.break_usd)}"
        flag = "  ** cost more than it saved **" if v.loses else ""
        out.append(
            f"  call {v.call}: removed {v.tokens:,} tokens; {brk}; saved {usd(v.saved_usd)} over "
            f"{v.later_calls} later calls; net {usd(v.net_usd)}{flag}: {v.what}"
        )
    for v in passes:
        out.append(
            f"  pass {v.what}: {v.tokens:,} tokens not sent over the calls, no break; saved {usd(v.saved_usd)}"
        )
    return out
