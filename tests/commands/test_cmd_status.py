from __future__ import annotations

import json
from pathlib import Path

import pytest

from lightmem_plugin.commands import status
from lightmem_plugin.config import Config
from lightmem_plugin.errors import UsageError
from lightmem_plugin.reduction import passes
from lightmem_plugin.store.ledger import CallRecord, Ledger
from lightmem_plugin.store.registry import Registry


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    reg = Registry(tmp_path / "artifacts")
    reg.put(b"x" * 3000)
    reg.put(b"Traceback (most recent call last):\n" * 40)
    return reg


def test_defaults_to_the_last_session(ledger: Ledger, registry: Registry) -> None:
    text = status.run(ledger, registry, Config())
    lines = text.splitlines()
    assert len(lines) <= 12 and max(len(line) for line in lines) <= 110
    assert (
        lines[0]
        == f"lightmem2 mode: normal (stabilizer on, {len(passes.NAMES)} reduction passes, eviction off, "
        "cache TTL as the host asks)"
    )
    assert lines[1] == "session: openclaw-main (14 calls)"
    assert "hit rate:" in text and "(simulated)" in text  # OpenClaw session reported no usage
    assert "archived originals: 2 (" in text
    assert lines[-1] == "last error: none"


def test_named_session_shows_real_figures_and_last_error(ledger: Ledger, registry: Registry) -> None:
    text = status.run(ledger, registry, Config(mode="aggressive"), session_id="swe-astropy-12907")
    t = ledger.totals("swe-astropy-12907")
    rate, real = t.hit_rate()
    assert real
    assert "eviction on" in text.splitlines()[0]
    assert f"hit rate: {100 * rate:.1f}% (real, 36 of 36 calls reported)" in text
    last = ledger.calls("swe-astropy-12907")[-1]
    assert last.real_input_tokens and t.last_input_tokens == last.real_input_tokens  # what the provider saw
    assert t.last_baseline_tokens == last.real_input_tokens + last.baseline_tokens - last.input_tokens
    assert (
        f"context now: {t.last_input_tokens:,} tokens (the provider's count); "
        f"without lightmem2: {t.last_baseline_tokens:,} (" in text
    )
    assert f"K so far: {round(t.k):,} vs {round(t.k_baseline):,} vanilla" in text
    assert f"{t.k_saved_pct:.1f}%)" in text and t.k_saved_pct > 0
    assert "prefix breaks: 1" in text
    assert "last error: call 20: html x1 (PassError: lxml could not parse the document)" in text


def test_json(ledger: Ledger, registry: Registry) -> None:
    out = status.run(ledger, registry, Config(), session_id="cc-7f3a2b", as_json=True)
    data = json.loads(out)
    assert out == json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False)
    assert data["mode"] == "normal" and data["modules"]["eviction"] is False
    assert data["modules"]["passes"] == list(Config().mode_table().passes)
    assert data["artifacts"] == 2 and data["registryBytes"] == registry.size_bytes()
    session = data["session"]
    assert session["session"] == "cc-7f3a2b" and session["calls"] == 27
    assert session["hitRateSource"] == "real" and session["evictions"] == 2 and session["prefixBreaks"] == 3
    assert session["contextTokens"] < session["contextTokensWithout"]


def test_empty_ledger(empty_ledger: Ledger, tmp_path: Path) -> None:
    reg = Registry(tmp_path / "none")
    text = status.run(empty_ledger, reg, Config(mode="conservative"))
    assert "session: none recorded yet" in text and "archived originals: 0 (0 B)" in text
    assert f"{len(passes.LOSSLESS)} reduction passes" in text
    assert json.loads(status.run(empty_ledger, reg, Config(), as_json=True))["session"] is None


def test_unknown_session_lists_known_ones(ledger: Ledger, registry: Registry) -> None:
    with pytest.raises(UsageError) as err:
        status.run(ledger, registry, Config(), session_id="cc-7f3a2")
    assert err.value.exit_code == 2
    assert "swe-astropy-12907, cc-7f3a2b, openclaw-main" in str(err.value)


def test_docstring_is_help() -> None:
    assert status.__doc__ and status.__doc__.startswith("status [--session ID | --all] [--json]:")


@pytest.mark.parametrize("chat", [False, True])
def test_status_says_the_config_file_is_invalid_and_which_config_is_in_force(
    isolated_home: Path, chat: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    from lightmem_plugin.cli import main as cli_main
    from lightmem_plugin.commands.mode import set_mode
    from lightmem_plugin.commands.table import run_line
    from lightmem_plugin.config import config_path

    set_mode("aggressive")
    if chat:
        text, code = run_line("/lightmem2 status")
    else:
        code = cli_main(["status"])
        text = capsys.readouterr().out
    before = text
    assert code == 0 and "mode: aggressive" in before
    path = config_path()
    path.write_text(json.dumps({"mode": "turbo"}, indent=2) + "\n")
    if chat:
        text, code = run_line("/lightmem2 status")
    else:
        code = cli_main(["status"])
        text = capsys.readouterr().out
    assert code == 0
    assert "lightmem2 mode: aggressive" in text  # the last good config, not the defaults
    bad = next(line for line in text.splitlines() if line.startswith("config file invalid:"))
    assert str(path) in bad and "mode" in bad and '"turbo"' in bad and "fix the value" in bad
    assert "config in force: last good" in text


def test_status_json_reports_the_config_state(isolated_home: Path) -> None:
    from lightmem_plugin.config import config_path

    config_path().write_text(json.dumps({"reduction": {"normal": {"triggerChars": "lots"}}}))
    data = json.loads(status.run_from_config(as_json=True))
    assert data["mode"] == "normal"
    assert data["config"]["valid"] is False and data["config"]["inForce"] == "defaults"
    assert "reduction.normal.triggerChars" in data["config"]["error"]


def test_money_beside_k(tmp_path: Path, registry: Registry) -> None:
    """Money as billed (output included) against the same calls without lightmem2, from the ledger."""
    from ledger_rows import fill, make_session, priced

    with Ledger(tmp_path / "money.sqlite3") as ledger:
        calls = priced(make_session("cc-money", "aggressive", 12, "anthropic"), "claude-sonnet-4-5")
        fill(ledger, [calls])
        t = ledger.totals("cc-money")
        cost = sum(c.cost_usd or 0 for c in calls)
        saved = sum(c.saved_usd or 0 for c in calls)
        assert t.cost_usd == pytest.approx(cost) and cost > 0 and saved > 0
        text = status.run(ledger, registry, Config())
        line = next(line for line in text.splitlines() if line.startswith("money: "))
        assert line == (
            f"money: ${cost:,.4f} vs ${cost + saved:,.4f} without lightmem2 "
            f"(saved ${saved:,.4f}, {100 * saved / (cost + saved):.1f}%); output included; "
            "the provider's figures"
        )
        assert text.splitlines().index(line) == 5  # right under K
        data = json.loads(status.run(ledger, registry, Config(), as_json=True))["session"]
        assert data["costUsd"] == round(cost, 6) and data["savedUsd"] == round(saved, 6)
        assert data["costUsdWithout"] == round(cost + saved, 6) and data["outputTokens"] == 12 * 300
        assert (data["pricedCalls"], data["pricedRealCalls"], data["priceHint"]) == (12, 12, None)
        assert data["kSaved"] == round(t.k_saved, 1)  # K as it was, beside the money
        assert f"${cost:,.4f} (saved ${saved:,.4f})" in status.run_all(ledger)


def test_a_session_without_money_says_why_and_what_to_set(ledger: Ledger, registry: Registry) -> None:
    text = status.run(ledger, registry, Config())
    assert "money: - (calls recorded before lightmem2 kept money)" in text.splitlines()
    data = json.loads(status.run(ledger, registry, Config(), as_json=True))["session"]
    assert data["costUsd"] is None and data["pricedCalls"] == 0 and data["priceHint"].startswith("money: -")
    ledger.record_call(CallRecord("acme", 1, "normal", 10, 12, 0, 10, model="acme-coder-7b"))
    text = status.run(ledger, registry, Config())
    assert 'money: - (no price for model "acme-coder-7b"; set prices."acme-coder-7b" in config.json' in text
