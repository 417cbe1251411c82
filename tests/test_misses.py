"""Each uncached token of a call gets one cause, and the causes add up (issue #43 item 2)."""

from __future__ import annotations

import pytest

from lightmem_plugin.metering.misses import (
    DROP,
    EXPIRY,
    FIRST,
    GRANULE,
    HOST,
    HOST_COMPACTION,
    NEW,
    OURS,
    Shape,
    Totals,
    attribute,
)


def named(causes: list) -> dict[str, int]:
    return {c.cause: c.tokens for c in causes}


def test_a_warm_call_that_only_appended_misses_only_what_is_new() -> None:
    assert named(attribute(Shape(10_000, 9_000, 1_000), 1_000)) == {NEW: 1_000}


def test_a_miss_past_what_is_new_with_nothing_changed_is_the_provider_s_drop() -> None:
    causes = attribute(Shape(10_000, 9_000, 1_000), 6_000)
    # the prefix's last block (128 tokens) may be unread for the cache's block size: counted as new
    assert named(causes) == {NEW: 1_000 + GRANULE, DROP: 5_000 - GRANULE}
    assert named(attribute(Shape(10_000, 9_000, 1_000), 1_100)) == {NEW: 1_100}


def test_an_expiry_names_its_idle_gap() -> None:
    (new, expiry) = attribute(Shape(10_000, 9_000, 1_000, expired="idle 1,860 s, past the 300 s TTL"), 10_000)
    assert (new.cause, new.tokens) == (NEW, 1_000)
    assert (expiry.cause, expiry.tokens, expiry.detail) == (EXPIRY, 9_000, "idle 1,860 s, past the 300 s TTL")


@pytest.mark.parametrize(
    ("who", "cause"), [("lightmem2", OURS), ("host", HOST), ("host compaction", HOST_COMPACTION)]
)
def test_a_change_names_who_made_it_and_costs_what_follows_it(who: str, cause: str) -> None:
    # 6,000 tokens before the change were read; 3,000 after it were re-written, 1,000 are new
    causes = attribute(Shape(10_000, 6_000, 1_000, who, "batch 3"), 4_000)
    assert named(causes) == {NEW: 1_000, cause: 3_000}
    # the read stopped at an earlier breakpoint: the change cost those tokens too, one entry
    causes = attribute(Shape(10_000, 6_000, 1_000, who, "batch 3"), 4_500)
    assert named(causes) == {NEW: 1_000, cause: 3_500}
    assert [c.detail for c in causes if c.cause == cause] == ["batch 3"]


def test_the_first_call_is_its_own_cause_and_money_splits_by_tokens() -> None:
    causes = attribute(Shape(8_000, 0, 0, first=True), 8_000, usd=0.08)
    assert named(causes) == {FIRST: 8_000}
    assert causes[0].usd == pytest.approx(0.08)


def test_the_provider_s_count_scales_the_shape_and_every_token_is_named() -> None:
    # lightmem2 counted 10,000 tokens, the provider 11,000 and 3,300 uncached; money 0.0330
    causes = attribute(Shape(10_000, 7_000, 1_000, "host", "message 4"), 3_301, total=11_000, usd=0.03301)
    assert named(causes) == {NEW: 1_100, HOST: 2_201}
    assert sum(c.tokens for c in causes) == 3_301
    assert sum(c.usd or 0 for c in causes) == pytest.approx(0.03301)
    # a count past the request (the provider's tokenizer) still sums: the rest is the prefix's cause
    assert sum(c.tokens for c in attribute(Shape(100, 90, 10), 150)) == 150
    assert attribute(Shape(100, 90, 10), 0) == []


def test_totals_sum_per_cause_and_keep_the_order_of_causes() -> None:
    calls = [
        attribute(Shape(8_000, 0, 0, first=True), 8_000, usd=0.08),
        attribute(Shape(10_000, 9_000, 1_000), 1_000, usd=0.01),
        attribute(Shape(10_000, 9_000, 1_000, expired="idle"), 10_000, usd=0.1),
    ]
    t = Totals.of(calls).as_dict()
    assert t["uncachedTokens"] == 19_000
    assert t["uncachedUsd"] == pytest.approx(0.19)
    assert [(c["cause"], c["tokens"]) for c in t["causes"]] == [(FIRST, 8_000), (EXPIRY, 9_000), (NEW, 2_000)]
