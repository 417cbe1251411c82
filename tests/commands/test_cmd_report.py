from __future__ import annotations

import json
from pathlib import Path

import pytest
from crossproc import SEEDS, outputs

from lightmem_plugin.commands import report
from lightmem_plugin.errors import UsageError
from lightmem_plugin.store.ledger import Ledger


def test_table_has_one_row_per_call(ledger: Ledger) -> None:
    text = report.run(ledger, session_id="cc-7f3a2b")
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("call mode"))
    rows = lines[header + 1 : header + 28]
    assert [int(r.split()[0]) for r in rows] == list(range(1, 28))
    assert all(r.split()[1] == "aggressive" for r in rows)
    # call 10: an eviction batch of 1,500 tokens broke the prefix at message 7
    row10 = rows[9].split()
    assert row10[-2:] == ["1,500", "m7:0"]
    assert "*" not in text  # Anthropic reported usage on every call
    # K from the provider's own figures, next to the simulated K (not a real hit rate beside a simulated K)
    calls = ledger.calls("cc-7f3a2b")
    real_k = sum(
        0.1 * (c.real_cache_read or 0)
        + ((c.real_input_tokens or 0) - (c.real_cache_read or 0) - (c.real_cache_creation or 0))
        + 1.25 * (c.real_cache_creation or 0)
        for c in calls
    )
    assert (
        f"K by the provider's own figures: {round(real_k):,} ({len(calls)} of {len(calls)} calls reported)"
        in text
    )


def test_cache_killers_name_where_and_why(ledger: Ledger) -> None:
    text = report.run(ledger, session_id="cc-7f3a2b")
    assert "cache killers (3):" in text
    assert "  call 10 at message 7, char 0: eviction batch" in text
    assert "  call 23 at message 31, char 512: pass html changed message 31" in text
    assert "evictions: 2 batches, 3,600 tokens (calls 10, 19)" in text
    swe = report.run(ledger, session_id="swe-astropy-12907")
    assert "  call 12 at message 0, char 184: placeholder TIMESTAMP changed" in swe
    assert "pass errors: html x1" in swe


def test_top_reductions_are_sorted_by_tokens(ledger: Ledger) -> None:
    text = report.run(ledger, session_id="swe-astropy-12907")
    start = text.splitlines().index("top reductions (tokens not sent, summed over calls):")
    block = []
    for line in text.splitlines()[start + 1 :]:
        if not line.startswith("  "):
            break
        block.append(line.split())
    values = [int(v.replace(",", "")) for _, v in block]
    assert values == sorted(values, reverse=True) and len(values) == 4
    assert (
        dict((n, int(v.replace(",", ""))) for n, v in block)
        == ledger.totals("swe-astropy-12907").saved_by_pass
    )


def test_simulated_hit_rates_are_marked(ledger: Ledger) -> None:
    text = report.run(ledger)  # last session: OpenClaw, no provider usage
    assert text.startswith("session openclaw-main · mode conservative · 14 calls")
    assert "* simulated: the provider reported no cache usage" in text
    assert "cache killers: none" in text and "evictions: none" in text
    assert "provider's own figures" not in text  # nothing reported: no real K line


def test_all_sessions(ledger: Ledger) -> None:
    text = report.run(ledger, all_sessions=True)
    starts = [line.split()[1] for line in text.splitlines() if line.startswith("session ")]
    assert starts == ["swe-astropy-12907", "cc-7f3a2b", "openclaw-main"]


def test_json(ledger: Ledger) -> None:
    out = report.run(ledger, session_id="cc-7f3a2b", as_json=True)
    data = json.loads(out)
    assert out == json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False)
    (session,) = data["sessions"]
    assert session["summary"]["session"] == "cc-7f3a2b" and len(session["calls"]) == 27
    assert session["cacheKillers"][2] == {
        "call": 23,
        "message": 31,
        "char": 512,
        "reason": "pass html changed message 31",
        "usd": None,  # the fixture's rows name no priced model
    }
    assert session["evictions"] == [{"call": 10, "tokens": 1500}, {"call": 19, "tokens": 2100}]
    assert session["calls"][9]["prefixBreakAt"] == [7, 0]
    tops = [t["tokens"] for t in session["topReductions"]]
    assert tops == sorted(tops, reverse=True)
    every = json.loads(report.run(ledger, all_sessions=True, as_json=True))
    assert [s["summary"]["session"] for s in every["sessions"]] == ledger.sessions()


REPORT_CODE = """
import sys, tempfile
from pathlib import Path
from ledger_rows import fill, realistic_sessions
from lightmem_plugin.commands import report
from lightmem_plugin.store.ledger import Ledger
with tempfile.TemporaryDirectory() as d, Ledger(Path(d) / "ledger.sqlite3") as led:
    fill(led, realistic_sessions())
    text = report.run(led, all_sessions=True) + "\\n---\\n" + report.run(led, all_sessions=True, as_json=True)
sys.stdout.buffer.write(text.encode())
"""


def test_same_ledger_same_bytes_across_processes(ledger: Ledger) -> None:
    got = outputs(REPORT_CODE, paths=(Path(__file__).parent,))
    assert len(got) == len(SEEDS) and len(set(got)) == 1, "report depends on the hash seed"
    text, as_json = got[0].decode().split("\n---\n")
    # and the same bytes as this process (another hash seed) writes for the same rows
    assert text == report.run(ledger, all_sessions=True)
    assert as_json == report.run(ledger, all_sessions=True, as_json=True)
    assert text.startswith("session swe-astropy-12907 · mode ")
    assert "  call 10 at message 7, char 0: eviction batch" in text
    assert (
        "   10 aggressive       3,285    10,536     3,285     9.1     3,758      2,296    1,500  m7:0"
        in text.splitlines()
    )
    assert [s["summary"]["session"] for s in json.loads(as_json)["sessions"]] == [
        "swe-astropy-12907",
        "cc-7f3a2b",
        "openclaw-main",
    ]


def test_empty_ledger(empty_ledger: Ledger) -> None:
    assert report.run(empty_ledger).startswith("no sessions recorded yet")
    assert json.loads(report.run(empty_ledger, all_sessions=True, as_json=True)) == {"sessions": []}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"session_id": "swe-astropy"}, 'unknown session "swe-astropy"; known sessions: swe-astropy-12907'),
        ({"session_id": "cc-7f3a2b", "all_sessions": True}, "exclude each other"),
    ],
)
def test_bad_arguments(ledger: Ledger, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message) as err:
        report.run(ledger, **kwargs)  # type: ignore[arg-type]
    assert err.value.exit_code == 2 and "\n" not in str(err.value)


@pytest.mark.parametrize("argv", [["report", "--all"], ["search", "anything"]])
def test_a_typo_in_the_config_never_stops_a_read_only_command(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``mode: turbo`` in config.json: the command runs on the config in force (the defaults here) and
    stderr names the rejected value, as status does; before, both exited 2 on the config."""
    from lightmem_plugin.cli import main as cli_main
    from lightmem_plugin.config import config_path

    config_path().write_text(json.dumps({"mode": "turbo"}))
    code = cli_main(argv)
    err = capsys.readouterr().err
    assert code == 0
    assert "turbo" in err and "in force: defaults" in err


def test_money_beside_k_in_text_and_json(tmp_path: Path) -> None:
    from ledger_rows import fill, make_session, priced

    from lightmem_plugin.store.ledger import CallRecord

    calls = priced(make_session("swe-money", "normal", 8, "deepseek"), "deepseek-chat", output=120)
    calls.append(CallRecord("swe-money", 9, "normal", 10, 10, 0, 10, model="acme-coder-7b"))  # no price
    with Ledger(tmp_path / "money.sqlite3") as ledger:
        fill(ledger, [calls])
        t = ledger.totals("swe-money")
        text = report.run(ledger)
        lines = text.splitlines()
        assert lines[1].startswith("K ") and lines[2].startswith("K by the provider's own figures")
        assert t.cost_usd is not None and t.cost_without_usd is not None and t.saved_usd is not None
        assert lines[3] == (
            f"money: ${t.cost_usd:,.4f} vs ${t.cost_without_usd:,.4f} without lightmem2 "
            f"(saved ${t.saved_usd:,.4f}, {t.saved_usd_pct:.1f}%); output included; "
            "the provider's figures; 1 of 9 calls without a price"
        )
        assert 'money: - (no price for model "acme-coder-7b"; set prices."acme-coder-7b"' in text
        (session,) = json.loads(report.run(ledger, as_json=True))["sessions"]
        summary, rows = session["summary"], session["calls"]
        assert summary["costUsd"] == round(sum(c.cost_usd or 0 for c in calls), 6)
        assert summary["pricedCalls"] == 8 and summary["outputTokens"] == 8 * 120
        assert summary["priceHint"].startswith('money: - (no price for model "acme-coder-7b"')
        assert rows[0]["model"] == "deepseek-chat" and rows[0]["outputTokens"] == 120
        assert rows[0]["costUsd"] == round(calls[0].cost_usd or 0, 6) and rows[0]["costUsd"] > 0
        assert rows[-1]["costUsd"] is None and rows[-1]["savedUsd"] is None
        assert rows[0]["k"] == round(calls[0].k, 1)  # every earlier key as it was
