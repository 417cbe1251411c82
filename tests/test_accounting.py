from __future__ import annotations

from pathlib import Path

import pytest

from lightmem_plugin.accounting import detect_api, real_usage
from lightmem_plugin.config import Config
from lightmem_plugin.ledger import Ledger
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.registry import Registry


@pytest.mark.parametrize(
    ("usage", "api", "total", "cached"),
    [
        (
            {"input_tokens": 10, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 90},
            "anthropic",
            1000,
            900,
        ),
        ({"prompt_tokens": 1000, "prompt_tokens_details": {"cached_tokens": 768}}, "chat", 1000, 768),
        ({"input_tokens": 500, "input_tokens_details": {"cached_tokens": 256}}, "responses", 500, 256),
    ],
)
def test_usage_of_each_api_is_normalised(usage: dict[str, object], api: str, total: int, cached: int) -> None:
    assert detect_api(usage) == api
    figures = real_usage(api, usage)
    assert (figures.input_tokens, figures.cached_tokens) == (total, cached)


def test_ledger_rows_show_savings_real_usage_and_head_breaks(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    lm = LightMem(config=Config(mode="normal"), registry=Registry(tmp_path / "reg"), ledger=ledger)
    s = lm.session("acct")
    log = "\n".join(f"tests/test_x.py::test_{i} PASSED" for i in range(300))
    msgs: list[dict[str, object]] = [
        {"role": "system", "content": "agent"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": log},
    ]
    s.before_model_call(msgs)
    s.after_model_call(
        {"role": "assistant", "content": "ok"},
        usage={"prompt_tokens": 700, "prompt_tokens_details": {"cached_tokens": 512}},
    )
    s.before_model_call(
        [{"role": "system", "content": "agent v2"}, *msgs[1:], {"role": "user", "content": "more"}]
    )
    rows = ledger.calls("acct")
    assert len(rows) == 2
    assert rows[0].input_tokens < rows[0].baseline_tokens
    assert (rows[0].real_input_tokens, rows[0].real_cached_tokens) == (700, 512)
    assert rows[1].prefix_break_at is not None and rows[1].prefix_break_at[0] == 0
    assert rows[1].break_reason is not None and "head" in rows[1].break_reason
