"""Concurrency: sessions in parallel threads, and parallel proxy requests, share one registry and ledger.

What "no lost updates" means here: every call of every session has its ledger row (call indexes 1..n
with none overwritten), every stub names an artifact that recovers the exact original, and each
session's output is byte-identical to running that session alone (per-session state is isolated).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from rel_convo import calls, tool_output
from rel_stack import ledger_stack

from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys
from lightmem_plugin.store.ledger import Ledger

SESSIONS = 8
TURNS = 6


def _config(home: Path) -> Config:
    cfg = Config()
    cfg.registry.dir = str(home / "artifacts")
    return cfg


def _run_parallel(jobs: list[Callable[[], None]]) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(jobs))

    def wrap(job: Callable[[], None]) -> None:
        try:
            barrier.wait()
            job()
        except BaseException as err:  # collected and asserted on by the caller
            errors.append(err)

    threads = [threading.Thread(target=wrap, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return errors


def _alone(session: str, home: Path) -> list[list[dict[str, Any]]]:
    """What a session's calls give when it runs by itself in a fresh plugin."""
    lm = LightMem(_config(home))
    s = lm.session(session)
    return [s.before_model_call(msgs) for msgs in calls(session, TURNS)]


def _check_ledger(ledger: Ledger, sids: list[str]) -> None:
    """Every call of every session has its row, none overwritten, none with a pass error."""
    for sid in sids:
        rows = ledger.calls(sid)
        assert [r.call_index for r in rows] == list(range(1, TURNS + 1)), sid
        assert all(not r.errors for r in rows), [r.last_error for r in rows]


@pytest.mark.slow
def test_sessions_in_threads_share_registry_and_ledger(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    lm = LightMem(_config(tmp_path), ledger=ledger)
    sids = [f"t{i}" for i in range(SESSIONS)]
    results: dict[str, list[list[dict[str, Any]]]] = {}

    def job(sid: str) -> Callable[[], None]:
        def run() -> None:
            s = lm.session(sid)
            results[sid] = [s.before_model_call(msgs) for msgs in calls(sid, TURNS)]

        return run

    assert _run_parallel([job(sid) for sid in sids]) == []
    _check_ledger(ledger, sids)
    keys = 0
    for i, sid in enumerate(sids):
        assert results[sid] == _alone(sid, tmp_path / f"alone{i}"), sid
        for t, msg in enumerate(m for m in results[sid][-1] if m["role"] == "tool"):
            found = stub_keys(msg["content"])
            assert found, "a 7 KB build log must have been reduced"
            assert {lm.registry.recover(k) for k in found} == {tool_output(sid, t)}
            keys += len(found)
    assert keys >= SESSIONS * TURNS
    ledger.close()


def test_two_plugins_on_one_home_lose_no_rows(tmp_path: Path) -> None:
    """Two plugin instances (a hook process and the proxy) write the same ledger and registry."""
    plugins = [LightMem(_config(tmp_path), ledger=Ledger(tmp_path / "ledger.sqlite3")) for _ in range(2)]
    sids = [f"p{i}" for i in range(SESSIONS)]

    def job(lm: LightMem, sid: str) -> Callable[[], None]:
        def run() -> None:
            for msgs in calls(sid, TURNS):
                lm.session(sid).before_model_call(msgs)

        return run

    errors = _run_parallel([job(plugins[i % 2], sid) for i, sid in enumerate(sids)])
    assert errors == []
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        _check_ledger(ledger, sids)
    for lm in plugins:
        assert lm.ledger is not None
        lm.ledger.close()


@pytest.mark.slow
def test_parallel_proxy_requests_share_one_ledger(tmp_path: Path) -> None:
    sids = [f"px{i}" for i in range(SESSIONS)]
    with ledger_stack(tmp_path) as st:
        bodies: dict[str, list[int]] = {sid: [] for sid in sids}

        def job(sid: str) -> Callable[[], None]:
            def run() -> None:
                with httpx.Client(timeout=60) as client:
                    for msgs in calls(sid, TURNS):
                        r = client.post(
                            st.chat_url(),
                            json={"model": "m", "messages": msgs},
                            headers={"authorization": "Bearer sk-test", "x-lightmem2-session": sid},
                        )
                        bodies[sid].append(r.status_code)

            return run

        assert _run_parallel([job(sid) for sid in sids]) == []
        assert all(codes == [200] * TURNS for codes in bodies.values()), bodies
        _check_ledger(st.ledger, sids)
        sent = [r.body["messages"] for r in st.fake.received]
    for i, sid in enumerate(sids):
        mine = [m for m in sent if sid in m[0]["content"]]
        assert mine == _alone(sid, tmp_path / f"alone{i}"), sid


def test_opening_one_session_from_many_threads_gives_one_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from lightmem_plugin.pipeline import session as session_module  # where a Session makes its stabilizer

    class SlowStabilizer(session_module.Stabilizer):  # type: ignore[misc]
        """Session setup that takes a few ms (a config reload, a cold import): the race window."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            time.sleep(0.005)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(session_module, "Stabilizer", SlowStabilizer)
    lm = LightMem(_config(tmp_path))
    got: list[object] = []

    def grab() -> None:
        got.append(lm.session("race"))

    assert _run_parallel([grab] * 16) == []
    assert all(s is got[0] for s in got), f"{len({id(s) for s in got})} different sessions for one id"


def test_restarted_plugin_keeps_the_session_rows_of_the_previous_process(tmp_path: Path) -> None:
    """A restarted proxy continues a session's call numbering instead of overwriting its rows."""
    conv = calls("restart", 5)
    first = LightMem(_config(tmp_path), ledger=Ledger(tmp_path / "ledger.sqlite3"))
    for msgs in conv[:3]:
        first.session("restart").before_model_call(msgs)
    second = LightMem(_config(tmp_path), ledger=Ledger(tmp_path / "ledger.sqlite3"))
    for msgs in conv[3:]:
        second.session("restart").before_model_call(msgs)
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        rows = ledger.calls("restart")
    assert [r.call_index for r in rows] == [1, 2, 3, 4, 5]
    assert rows[0].input_tokens < rows[-1].input_tokens
