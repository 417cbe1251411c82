"""A net verdict per intervention (issue #43 item 3): a batch pays for its cache break only over enough
later calls, one at a cold start breaks nothing, and report flags one that cost more than it saved."""

from __future__ import annotations

import pytest

from lightmem_plugin.metering.prices import price_for
from lightmem_plugin.store.ledger import CallRecord
from lightmem_plugin.views import report, verdicts

MODEL = "claude-sonnet-4-5"  # $3 input, $0.30 read, $3.75 write per million
PRICE = price_for(MODEL)


def row(n: int, total: int, uncached: int, shape: str, **extra: object) -> CallRecord:
    assert PRICE is not None
    base: dict[str, object] = {
        "miss_shape": shape,
        "model": MODEL,
        "uncached_usd": uncached * PRICE.cache_write_5m / 1e6,
    }
    base.update(extra)
    return CallRecord("s", n, "aggressive", total, total, total - uncached, uncached, **base)  # type: ignore[arg-type]


def session(later: int, cold: bool = False) -> list[CallRecord]:
    """Call 1 first; call 2 appends; call 3 pages 5,000 tokens out, re-writing 20,000 after its change;
    then ``later`` calls that only append."""
    calls = [row(1, 30_000, 30_000, "0 0 first"), row(2, 31_000, 1_000, "30000 1000 -")]
    batch = {"evicted_tokens": 5_000, "break_reason": "eviction batch: 3 outputs (archived as abc)"}
    if cold:
        batch["cold_start"] = "pause 1860 300"
    calls.append(row(3, 27_000, 21_000, "6000 1000 lightmem2", **batch))
    calls += [row(4 + k, 28_000 + 1_000 * k, 1_000, f"{27_000 + 1_000 * k} 1000 -") for k in range(later)]
    return calls


def test_a_warm_batch_near_the_end_cost_more_than_it_saved_and_report_flags_it() -> None:
    assert PRICE is not None
    (v,) = verdicts.batch_verdicts(session(later=2))
    assert (v.call, v.tokens, v.break_tokens, v.free, v.later_calls) == (3, 5_000, 20_000, False, 2)
    # the break: 20,000 tokens written at $3.75/M instead of read at $0.30/M
    assert v.break_usd == pytest.approx(20_000 * (3.75 - 0.30) / 1e6)
    assert v.saved_usd == pytest.approx(2 * 5_000 * 0.30 / 1e6)
    assert v.loses
    text = report.session_text("s", session(later=2))
    assert "call 3: removed 5,000 tokens; break 20,000 tokens $0.0690" in text
    assert "** cost more than it saved **" in text


def test_the_same_batch_pays_over_enough_later_calls() -> None:
    (v,) = verdicts.batch_verdicts(session(later=60))
    assert v.saved_usd == pytest.approx(60 * 5_000 * 0.30 / 1e6)
    assert v.net_usd is not None and v.net_usd > 0 and not v.loses
    assert "cost more than it saved" not in report.session_text("s", session(later=60))


def test_a_batch_at_a_cold_start_breaks_nothing() -> None:
    (v,) = verdicts.batch_verdicts(session(later=1, cold=True))
    assert v.free and v.break_usd == 0.0 and not v.loses
    assert "free (cold start)" in report.session_text("s", session(later=1, cold=True))


def test_a_later_call_that_missed_its_prefix_saves_at_the_price_it_paid() -> None:
    calls = session(later=1)
    # the later call lost its prefix to the provider: the tokens the batch removed would have cost full price
    calls[-1] = row(4, 28_000, 28_000, "27000 1000 -")
    (v,) = verdicts.batch_verdicts(calls)
    assert v.saved_usd == pytest.approx(5_000 * 3.75 / 1e6)


def test_without_a_price_the_verdict_is_in_tokens_and_never_flagged() -> None:
    (v,) = verdicts.batch_verdicts(session(later=2), price_of=lambda model: None)
    assert v.break_tokens == 20_000 and v.saved_usd is None and v.net_usd is None and not v.loses


def test_each_pass_is_summed_over_the_calls_at_the_read_price() -> None:
    calls = [
        row(1, 10_000, 10_000, "0 0 first", saved_by_pass={"fileview": 2_000, "stabilizer": -50}),
        row(2, 10_500, 500, "10000 500 -", saved_by_pass={"fileview": 2_000, "eviction": 900}),
    ]
    passes = {v.what: v for v in verdicts.pass_verdicts(calls)}
    assert set(passes) == {"fileview", "stabilizer"}
    assert passes["fileview"].tokens == 4_000
    assert passes["fileview"].saved_usd == pytest.approx(4_000 * 0.30 / 1e6)
    assert passes["stabilizer"].tokens == -50 and passes["stabilizer"].break_usd == 0.0
