"""Pricing a replay at a named model's list price (the swe chains on Anthropic's cache)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lightmem_plugin.errors import UsageError
from lightmem_plugin.measure.priced import ANTHROPIC_STAND_IN, usd_as
from lightmem_plugin.measure.replay import replay_paths

TRACE = Path(__file__).parent / "data" / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz"


def test_a_deepseek_session_on_anthropics_cache_is_priced_as_the_named_claude_model() -> None:
    (result,) = replay_paths([TRACE], "vanilla", provider="anthropic")
    assert result.usd is None  # the replay does not guess a price for a DeepSeek model there
    # Sonnet 4.x list: $3 input, $0.30 read, $3.75 five-minute write, $15 output per million tokens
    uncached = result.miss_tokens - result.write_tokens
    want = (
        result.hit_tokens * 0.3 + uncached * 3 + result.write_tokens * 3.75 + result.output_tokens * 15
    ) / 1e6
    assert result.write_tokens > 0 and usd_as([result], ANTHROPIC_STAND_IN) == round(want, 4)
    # on the model's own provider it agrees with the replay's own money
    (own,) = replay_paths([TRACE], "vanilla")
    assert own.usd is not None and usd_as([own], "deepseek-chat") == round(own.usd, 4)


def test_a_model_without_a_price_on_that_provider_is_refused_by_name() -> None:
    (result,) = replay_paths([TRACE], "vanilla")
    with pytest.raises(
        UsageError, match='no list price for model "claude-sonnet-4-5" on provider "deepseek"'
    ):
        usd_as([dataclasses.replace(result)], ANTHROPIC_STAND_IN)
