from __future__ import annotations

import os
import sqlite3
import stat
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin.errors import UsageError
from lightmem_plugin.store.home import LEDGER_FILE
from lightmem_plugin.store.ledger import CallRecord, Ledger, k_cost, summarize


def rec(session: str = "s1", index: int = 1, **kw: object) -> CallRecord:
    base = CallRecord(
        session_id=session,
        call_index=index,
        mode="normal",
        input_tokens=10_000,
        baseline_tokens=14_000,
        hit_tokens=9_000,
        miss_tokens=1_000,
        k=k_cost(9_000, 1_000),
        k_baseline=k_cost(12_000, 2_000),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("hit", "miss", "write", "expected"),
    [
        (0, 12_000, 0, 12_000.0),  # first call of a session: all miss
        (9_700, 300, 0, 1_270.0),  # append-only turn, 97% hit
        (9_700, 12, 288, 1_342.0),  # Anthropic: the new tokens are written to the cache at 1.25x
        (0, 0, 0, 0.0),
    ],
)
def test_k_cost(hit: int, miss: int, write: int, expected: float) -> None:
    assert k_cost(hit, miss, write) == pytest.approx(expected)


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    full = rec(
        write_tokens=288,
        real_cache_read=9_000,
        real_cache_creation=288,
        real_input_tokens=10_300,
        saved_by_pass={"truncate": 3_100, "html": 900},
        evicted_tokens=1_500,
        prefix_break_at=(7, 0),
        break_reason="eviction batch",
        errors={"html": 1},
        last_error="PassError: lxml could not parse the document",
    )
    bare = rec("s2", 1)
    with Ledger(tmp_path / "l.sqlite3") as led:
        led.record_call(full)
        led.record_call(bare)
        assert led.calls("s1") == [full]
        assert led.calls("s2") == [bare]
        assert led.calls("nope") == []


def test_file_is_private_and_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "data" / LEDGER_FILE
    with Ledger(path) as led:
        led.record_call(rec())
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_default_lives_in_lightmem2_home(isolated_home: Path) -> None:
    with Ledger.default() as led:
        led.record_call(rec())
        assert led.path == isolated_home / LEDGER_FILE
    assert (isolated_home / LEDGER_FILE).exists()


def test_sessions_order_last_session_and_replace(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite3") as led:
        assert led.sessions() == [] and led.last_session() is None
        for session, index in [("b", 1), ("a", 1), ("b", 2), ("a", 2)]:
            led.record_call(rec(session, index))
        assert led.sessions() == ["b", "a"]
        assert led.last_session() == "a"
        led.record_call(rec("b", 2, input_tokens=11_111))  # recorded again: replaces, no duplicate
        assert [c.input_tokens for c in led.calls("b")] == [10_000, 11_111]
        assert led.last_session() == "b"
        assert [(c.session_id, c.call_index) for c in led.recent_calls(3)] == [("a", 1), ("a", 2), ("b", 2)]


def test_totals_prefer_real_usage_when_reported() -> None:
    calls = [
        rec(index=1, hit_tokens=0, miss_tokens=10_000, real_cached_tokens=0, real_input_tokens=10_007),
        rec(index=2, real_cached_tokens=9_984, real_input_tokens=10_007, errors={"json": 2}, last_error="E"),
        rec(index=3),  # the provider reported nothing for this one
    ]
    t = summarize("s1", calls)
    rate, real = t.hit_rate()
    assert real and t.real_calls == 2
    assert rate == pytest.approx(9_984 / 20_014)
    assert t.errors == {"json": 2} and t.last_error == "call 2: json x2 (E)"
    sim_rate, sim_real = summarize("s1", [rec(index=3)]).hit_rate()
    assert not sim_real and sim_rate == pytest.approx(0.9)
    assert t.k_saved == pytest.approx(t.k_baseline - t.k)
    assert t.k_saved_pct == pytest.approx(100 * (3 * 3_200 - t.k) / (3 * 3_200))


def test_totals_count_evictions_and_breaks(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite3") as led:
        led.record_call(rec(index=1, saved_by_pass={"truncate": 100}))
        led.record_call(rec(index=2, saved_by_pass={"truncate": 100, "html": 40}, evicted_tokens=900))
        led.record_call(rec(index=3, prefix_break_at=(0, 184), break_reason="placeholder TIMESTAMP changed"))
        t = led.totals("s1")
    assert (t.calls, t.evictions, t.evicted_tokens, t.prefix_breaks) == (3, 1, 900, 1)
    assert t.saved_by_pass == {"html": 40, "truncate": 200}
    assert (t.last_input_tokens, t.last_baseline_tokens) == (10_000, 14_000)


def test_resolve_lists_known_sessions(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite3") as led:
        with pytest.raises(UsageError, match="no calls recorded yet"):
            led.resolve("abc")
        assert led.resolve(None) is None
        for i in range(12):
            led.record_call(rec(f"sess-{i:02d}"))
        assert led.resolve("sess-03") == "sess-03"
        assert led.resolve(None) == "sess-11"
        with pytest.raises(UsageError) as err:
            led.resolve("sess-99")
    msg = str(err.value)
    assert "\n" not in msg and 'unknown session "sess-99"' in msg
    assert "sess-11" in msg and "sess-02" in msg and "sess-01" not in msg and "2 older" in msg


def test_two_connections_and_threads_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite3"
    with Ledger(path) as writer, Ledger(path) as reader:

        def work(t: int) -> None:
            for i in range(50):
                writer.record_call(rec(f"t{t}", i))

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert sorted(reader.sessions()) == ["t0", "t1", "t2", "t3"]
        assert all(len(reader.calls(f"t{t}")) == 50 for t in range(4))


def test_recording_is_cheap(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite3") as led:
        start = time.perf_counter()
        for i in range(500):
            led.record_call(rec(index=i, saved_by_pass={"truncate": i}))
        per_call = (time.perf_counter() - start) / 500
    assert per_call < 0.01, f"{per_call * 1000:.2f} ms per recorded call"


_counts = st.dictionaries(
    st.sampled_from(["whitespace", "dedup", "html", "json", "truncate"]), st.integers(0, 10**7)
)
_opt = st.none() | st.integers(0, 10**7)


@settings(max_examples=60, deadline=None)
@given(
    st.builds(
        CallRecord,
        session_id=st.text(min_size=1, max_size=40),
        call_index=st.integers(0, 10**6),
        mode=st.sampled_from(["conservative", "normal", "aggressive"]),
        input_tokens=st.integers(0, 10**7),
        baseline_tokens=st.integers(0, 10**7),
        hit_tokens=st.integers(0, 10**7),
        miss_tokens=st.integers(0, 10**7),
        write_tokens=st.integers(0, 10**7),
        real_cache_read=_opt,
        real_cache_creation=_opt,
        real_cached_tokens=_opt,
        real_input_tokens=_opt,
        k=st.floats(0, 1e8, allow_nan=False),
        k_baseline=st.floats(0, 1e8, allow_nan=False),
        saved_by_pass=_counts,
        evicted_tokens=st.integers(0, 10**7),
        prefix_break_at=st.none() | st.tuples(st.integers(0, 5000), st.integers(0, 10**6)),
        break_reason=st.none() | st.text(max_size=80),
        errors=_counts,
        last_error=st.none() | st.text(max_size=80),
    )
)
def test_any_record_reads_back_equal(tmp_path_factory: pytest.TempPathFactory, record: CallRecord) -> None:
    with Ledger(tmp_path_factory.mktemp("l") / "l.sqlite3") as led:
        led.record_call(record)
        assert led.calls(record.session_id) == [record]
        assert led.last_session() == record.session_id


def test_two_processes_on_one_session_keep_every_row(tmp_path: Path) -> None:
    """Two plugins (two proxies) serving one session alternately: each call keeps its own row."""
    from lightmem_plugin.config import Config
    from lightmem_plugin.pipeline import LightMem
    from lightmem_plugin.store.registry import Registry

    path = tmp_path / "ledger.sqlite3"
    procs = [
        LightMem(config=Config(mode="normal"), registry=Registry(tmp_path / f"r{n}"), ledger=Ledger(path))
        for n in range(2)
    ]
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "go"},
    ]
    for i in range(40):
        messages = [
            *messages,
            {"role": "assistant", "content": f"step {i}"},
            {"role": "user", "content": "ok"},
        ]
        procs[i % 2].session("shared").before_model_call(messages)
    rows = Ledger(path).calls("shared")
    assert len(rows) == 40
    assert len({r.writer for r in rows}) == 2 and all(r.writer for r in rows)


def test_a_version_1_ledger_is_migrated_with_its_rows(tmp_path: Path) -> None:
    import sqlite3

    from lightmem_plugin.store.ledger import _V1_COLUMNS

    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    cols = [c for c in _V1_COLUMNS]
    db.executescript(
        "CREATE TABLE calls (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
        + ", ".join(cols)
        + ", UNIQUE (session_id, call_index)); PRAGMA user_version=1;"
    )
    values = {c: 0 for c in cols} | {
        "session_id": "old",
        "mode": "normal",
        "saved_by_pass": "{}",
        "errors": "{}",
    }
    for i in (1, 2):
        values["call_index"] = i
        db.execute(
            f"INSERT INTO calls ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
            [values[c] for c in cols],
        )
    db.commit()
    db.close()
    ledger = Ledger(path)
    assert [r.call_index for r in ledger.calls("old")] == [1, 2]
    assert all(r.writer == "" for r in ledger.calls("old"))


def test_without_lightmem2_is_in_the_providers_units_when_it_counted_the_call() -> None:
    # our estimate: 10,000 sent, 14,000 without us; the provider counted 12,500 (system prompt and tools
    # included): without us it would have counted those 12,500 plus the 4,000 we removed
    counted = rec(index=1, real_input_tokens=12_500, real_cached_tokens=0)
    assert counted.real_baseline_tokens == 16_500
    assert rec(index=1).real_baseline_tokens is None  # nothing reported: no provider-unit figure
    t = summarize("s1", [rec(index=1), counted])
    assert (t.last_input_tokens, t.last_baseline_tokens, t.context_counted_by) == (12_500, 16_500, "provider")
    from lightmem_plugin.views.format import call_dict

    assert call_dict(counted)["realBaselineTokens"] == 16_500
    assert call_dict(rec(index=1))["realBaselineTokens"] is None
