"""Money beside K (#41 item 6): the price table, the ``prices`` override, and USD on a call's row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from lightmem_plugin.config import Config
from lightmem_plugin.errors import UsageError
from lightmem_plugin.metering import prices
from lightmem_plugin.metering.accounting import billed, real_usage, with_real_usage
from lightmem_plugin.metering.prices import LIST_PRICES, Price, hint, money_of, price_for
from lightmem_plugin.store.ledger import _SCHEMA_VERSION, _V2_COLUMNS, CallRecord, Ledger, summarize


@pytest.mark.parametrize(
    ("model", "prefix"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4"),
        ("claude-sonnet-4-6", "claude-sonnet-4"),
        ("claude-sonnet-4@20250514", "claude-sonnet-4"),  # Vertex spells the date after @
        ("claude-opus-4-6", "claude-opus-4-6"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-20250514", "claude-opus-4-20250514"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4"),
        ("Claude-Haiku-4-5", "claude-haiku-4"),  # names compare lower-cased
        ("gpt-5", "gpt-5"),
        ("gpt-5-2025-08-07", "gpt-5"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),  # the longest prefix wins
        ("gpt-5-codex", "gpt-5-codex"),
        ("gpt-4.1-mini", "gpt-4.1-mini"),
        ("gpt-4.1", "gpt-4.1"),
        ("deepseek-chat", "deepseek-chat"),
        ("deepseek-reasoner", "deepseek-reasoner"),
    ],
)
def test_a_model_is_priced_by_its_longest_matching_prefix(model: str, prefix: str) -> None:
    assert price_for(model) is LIST_PRICES[prefix]


@pytest.mark.parametrize(
    "model",
    [
        "gpt-5.5",  # its own price: "gpt-5" does not stretch to it
        "claude-opus-4-9",  # a minor version the table does not know: no guess from its neighbours
        "claude-opus-5",
        "gpt-50",
        "llama-3.3-70b",
        "",
        None,
    ],
)
def test_a_model_the_table_does_not_know_has_no_price(model: str | None) -> None:
    assert price_for(model) is None
    assert money_of(None, model, 1000, 1000, output=10) is None


def test_the_list_prices_the_issue_names() -> None:
    want = {
        "claude-opus-4-6": (5.0, 0.50, 6.25, 10.0, 25.0),
        "claude-sonnet-4-5": (3.0, 0.30, 3.75, 6.0, 15.0),
        "claude-haiku-4-5": (1.0, 0.10, 1.25, 2.0, 5.0),
        "gpt-5": (1.25, 0.125, 1.25, 1.25, 10.0),
        "gpt-5-mini": (0.25, 0.025, 0.25, 0.25, 2.0),
        "deepseek-chat": (0.28, 0.028, 0.28, 0.28, 0.42),
    }
    for model, (inp, read, w5, w1, out) in want.items():
        p = price_for(model)
        assert p is not None, model
        got = (p.input, p.cache_read, p.cache_write_5m, p.cache_write_1h, p.output)
        assert got == pytest.approx((inp, read, w5, w1, out)), model


def test_the_config_overrides_the_table_and_adds_models() -> None:
    cfg = Config.model_validate(
        {
            "prices": {
                "claude-sonnet-4-5": {"input": 2.0, "cacheRead": 0.2, "cacheWrite5m": 2.5, "output": 10.0},
                "Acme-Coder": {"input": 1.0, "cacheRead": 0.5, "output": 4.0},
            }
        }
    )
    mine = price_for("claude-sonnet-4-5-20250929", cfg.prices)
    assert mine == Price("config", 2.0, 0.2, 2.5, 2.5, 10.0)  # 1-hour writes default to 5-minute ones
    assert price_for("claude-sonnet-4-6", cfg.prices) is LIST_PRICES["claude-sonnet-4"]  # others: the table
    acme = price_for("acme-coder-7b", cfg.prices)
    assert acme == Price("config", 1.0, 0.5, 1.0, 1.0, 4.0)  # writes default to the input price
    assert money_of(None, "acme-coder-7b", 100, 10, 5, 0, 1, cfg.prices) == pytest.approx(
        (100 * 0.5 + 10 * 1.0 + 5 * 1.0 + 1 * 4.0) / 1e6
    )
    assert cfg.model_dump(by_alias=True)["prices"]["claude-sonnet-4-5"]["cacheWrite5m"] == 2.5


def test_a_bad_prices_entry_is_refused_naming_the_key() -> None:
    from lightmem_plugin.config import parse_config
    from lightmem_plugin.errors import ConfigError

    with pytest.raises(ConfigError, match=r"prices\.gpt-5\.input = -1 is invalid"):
        parse_config({"prices": {"gpt-5": {"input": -1, "cacheRead": 0, "output": 1}}}, Path("c.json"))
    with pytest.raises(ConfigError, match=r"prices\.gpt-5\.cacheWrite = 1 is not a config key"):
        parse_config(
            {"prices": {"gpt-5": {"input": 1, "cacheRead": 0, "output": 1, "cacheWrite": 1}}}, Path("c.json")
        )


def test_no_price_means_no_money_and_a_hint_naming_the_config_key() -> None:
    line = hint("acme-coder-7b")
    assert line.startswith("money: - ")
    assert 'set prices."acme-coder-7b" in config.json' in line and "USD per million tokens" in line
    assert "named no model" in hint("")
    assert "before lightmem2 kept money" in hint(None)


def test_money_of_is_what_the_replay_prices_with() -> None:
    # Anthropic: 10k read, 1k uncached, 2k written for 5 minutes, 3k for one hour, 500 out
    got = money_of("anthropic", "claude-opus-4-6", 10_000, 1_000, 2_000, 3_000, 500)
    assert got == pytest.approx((10_000 * 0.5 + 1_000 * 5 + 2_000 * 6.25 + 3_000 * 10 + 500 * 25) / 1e6)
    # DeepSeek: a hit is 0.1x a miss, so the input side is K at the miss price
    assert money_of("deepseek", "deepseek-chat", 9_000, 1_000) == pytest.approx(
        (0.1 * 9_000 + 1_000) * 0.28 / 1e6
    )
    assert money_of("openai", "claude-opus-4-6", 1, 1) is None  # not that provider's model
    assert money_of("vllm", "deepseek-chat", 1, 1) is None  # self-hosted: no list price
    assert money_of("token", "deepseek-chat", 9_000, 1_000) == money_of(None, "deepseek-chat", 9_000, 1_000)
    with pytest.raises(
        UsageError, match=r'unknown provider "anthorpic".*anthropic, openai, deepseek, vllm, token'
    ):
        money_of("anthorpic", "claude-opus-4-6", 1, 1)
    assert prices.PRICED_AS_OF == "2026-12-06"


def test_an_anthropic_call_is_billed_with_its_5_minute_and_1_hour_writes() -> None:
    usage = {
        "input_tokens": 120,
        "cache_read_input_tokens": 40_000,
        "cache_creation_input_tokens": 3_000,
        "cache_creation": {"ephemeral_5m_input_tokens": 1_000, "ephemeral_1h_input_tokens": 2_000},
        "output_tokens": 700,
    }
    figures = real_usage("anthropic", usage)
    assert (figures.cache_write_tokens, figures.cache_write_1h_tokens) == (3_000, 2_000)
    rec = CallRecord("s", 1, "normal", 43_000, 50_000, 40_000, 3_000, model="claude-sonnet-4-5")
    price = price_for(rec.model)
    got = with_real_usage(rec, "anthropic", figures, price)
    assert (got.output_tokens, got.real_cache_write_1h, got.real_cache_creation) == (700, 2_000, 3_000)
    want = (40_000 * 0.30 + 120 * 3.0 + 1_000 * 3.75 + 2_000 * 6.0 + 700 * 15.0) / 1e6
    assert got.cost_usd == pytest.approx(want)
    assert with_real_usage(rec, "anthropic", figures, None).cost_usd is None  # no price: no money
    no_split = real_usage("anthropic", {k: v for k, v in usage.items() if k != "cache_creation"})
    assert with_real_usage(rec, "anthropic", no_split, price).cost_usd == pytest.approx(
        (40_000 * 0.30 + 120 * 3.0 + 3_000 * 3.75 + 700 * 15.0) / 1e6  # writes unsplit: 5-minute ones
    )


def test_without_the_providers_figures_the_simulated_cost_stays() -> None:
    rec = CallRecord("s", 1, "normal", 100, 100, 0, 100, cost_usd=0.25, saved_usd=0.5)
    assert billed(rec, LIST_PRICES["gpt-5"]) == rec
    assert rec.cost_without_usd == 0.75


def test_a_session_sums_its_money_and_counts_the_calls_without() -> None:
    calls = [
        CallRecord("s", 1, "normal", 10, 10, 0, 10),  # before money: model None
        CallRecord("s", 2, "normal", 10, 10, 0, 10, model="gpt-5", cost_usd=0.25, saved_usd=0.25,
                   real_input_tokens=10, real_cached_tokens=0),
        CallRecord("s", 3, "normal", 10, 10, 0, 10, model="gpt-5", cost_usd=0.5, saved_usd=0.0),
        CallRecord("s", 4, "normal", 10, 10, 0, 10, model="acme"),  # no price
    ]  # fmt: skip
    t = summarize("s", calls)
    assert (t.cost_usd, t.saved_usd, t.cost_without_usd) == (0.75, 0.25, 1.0)
    assert (t.priced_calls, t.priced_real_calls, t.unpriced_calls, t.unpriced_model) == (2, 1, 2, "acme")
    assert t.saved_usd_pct == pytest.approx(25.0)
    none = summarize("s", calls[:1])
    assert none.cost_usd is None and none.saved_usd_pct is None and none.unpriced_model is None


def _v2_ledger(path: Path) -> None:
    """A ledger file as lightmem2 wrote it before money (schema version 2), with two rows."""
    from lightmem_plugin.store.ledger import _CREATE
    from lightmem_plugin.store.sqlite_store import sql_statements

    db = sqlite3.connect(path)
    for statement in sql_statements(_CREATE):
        db.execute(statement)
    db.execute("PRAGMA user_version=2")
    values = {c: 0 for c in _V2_COLUMNS} | {"mode": "normal", "saved_by_pass": "{}", "errors": "{}"}
    values |= {"break_message": None, "break_offset": None, "break_reason": None, "last_error": None}
    for i in (1, 2):
        values |= {"session_id": "old", "writer": "w", "call_index": i, "k": 10.0 * i}
        db.execute(
            f"INSERT INTO calls ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
            list(values.values()),
        )
    db.commit()
    db.close()


def test_a_version_2_ledger_keeps_its_rows_with_no_money(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    _v2_ledger(path)
    with Ledger(path) as ledger:
        old = ledger.calls("old")
        assert [(r.call_index, r.k) for r in old] == [(1, 10.0), (2, 20.0)]
        assert all(
            (r.model, r.output_tokens, r.real_cache_write_1h, r.cost_usd, r.saved_usd) == (None,) * 5
            for r in old
        )
        assert ledger.totals("old").cost_usd is None
        new = CallRecord("old", 3, "normal", 5, 9, 0, 5, writer="w", model="gpt-5", output_tokens=3,
                         cost_usd=0.125, saved_usd=0.0625)  # fmt: skip
        ledger.record_call(new)
        assert ledger.calls("old")[-1] == new
        t = ledger.totals("old")
        assert (t.cost_usd, t.saved_usd, t.priced_calls, t.unpriced_calls) == (0.125, 0.0625, 1, 2)
    version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
    assert version == _SCHEMA_VERSION == 5  # money (3), cold starts (4), the shapes of misses (5)
    with Ledger(path) as again:  # opened again: nothing migrates twice
        assert len(again.calls("old")) == 3


def test_a_routed_model_name_is_priced_as_the_model_after_its_last_slash() -> None:
    """The bundled demo session names ``deepseek/deepseek-chat`` (LiteLLM's spelling): priced as
    ``deepseek-chat``; a whole-name entry of the config still wins."""
    assert price_for("deepseek/deepseek-chat") == price_for("deepseek-chat") is not None
    assert price_for("openrouter/anthropic/claude-sonnet-4-5") == price_for("claude-sonnet-4-5")
    assert price_for("nosuch/model") is None


def test_the_python_api_prices_a_call_as_the_model_its_host_names(tmp_path: Path) -> None:
    """``before_model_call(model=...)``: the row is priced as that model (the proxy reads it from the
    request body; the Python API has no body, so the host says it); without it, no money."""
    from lightmem_plugin.config import Config
    from lightmem_plugin.pipeline import LightMem
    from lightmem_plugin.store.ledger import Ledger
    from lightmem_plugin.store.registry import Registry

    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        lm = LightMem(config=Config(), registry=Registry(tmp_path / "reg"), ledger=ledger)
        named, unnamed = lm.session("named"), lm.session("unnamed")
        messages = [{"role": "user", "content": "hello " * 400}]
        named.before_model_call(messages, model="claude-sonnet-4-5")
        named.after_model_call({"role": "assistant", "content": "hi"})
        unnamed.before_model_call(messages)
        unnamed.after_model_call({"role": "assistant", "content": "hi"})
        lm.settle()
        (row,) = ledger.calls("named")
        (bare,) = ledger.calls("unnamed")
    assert row.model == "claude-sonnet-4-5" and row.cost_usd is not None and row.cost_usd > 0
    assert bare.model == "" and bare.cost_usd is None
