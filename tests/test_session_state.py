"""Session state survives restarts and LRU drops: the same bytes as a process that never stopped.

The fixture is a real recorded session (bundled) in aggressive mode with an eviction config under
which batches fire at calls 23 and 26; each test first checks that the feature it relies on really triggers.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.config import Config
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.store.registry import Registry
from lightmem_plugin.store.session_state import StateStore

TRACE = Path(__file__).parent / "data" / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz"
EVICTING = {"mode": "aggressive", "eviction": {"expectedRemainingCalls": 500, "keepRecentTurns": 2}}


def _config(**extra: Any) -> Config:
    return Config.model_validate({**EVICTING, **extra})


def _plugin(root: Path, cfg: Config) -> LightMem:
    return LightMem(config=cfg, registry=Registry(root / "artifacts"), states=StateStore(root / "s.sqlite3"))


def _run(root: Path, restarts: set[int], cfg: Config | None = None) -> tuple[list[str], list[int]]:
    """Every transformed request (canonical JSON) and the calls where a batch fired."""
    trace = load_trace(TRACE)
    cfg = cfg or _config()
    lm = _plugin(root, cfg)
    session = lm.session(trace.id)
    out, batches = [], []
    for i, call in enumerate(trace.calls):
        if i in restarts:
            lm = _plugin(root, cfg)
            session = lm.session(trace.id)
        out.append(json.dumps(session.before_model_call(call.prompt), sort_keys=True))
        if session._evicted_now:
            batches.append(i)
    return out, batches


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[int]]:
    return _run(tmp_path_factory.mktemp("base"), set())


def test_fixture_evicts(uninterrupted: tuple[list[str], list[int]]) -> None:
    requests, batches = uninterrupted
    assert batches == [23, 26]  # outputs of finished work, then an executed script's arguments
    assert "[lightmem2: output archived as " in requests[-1]
    assert "chars of this executed call archived as" in requests[-1]
    assert "as shown in the output of tool call " in requests[-1]  # a repeat marker names its source


@pytest.mark.parametrize("at", [5, 22, 23, 24, 30, 37])
def test_restart_sends_the_same_bytes(
    tmp_path: Path, uninterrupted: tuple[list[str], list[int]], at: int
) -> None:
    requests, batches = _run(tmp_path, {at})
    assert batches == uninterrupted[1]
    diff = [i for i, (a, b) in enumerate(zip(requests, uninterrupted[0], strict=True)) if a != b]
    assert diff == []


def test_many_restarts(tmp_path: Path, uninterrupted: tuple[list[str], list[int]]) -> None:
    requests, _ = _run(tmp_path, set(range(1, 38, 3)))
    assert requests == uninterrupted[0]


def test_without_a_store_a_restart_changes_the_prompt(
    tmp_path: Path, uninterrupted: tuple[list[str], list[int]]
) -> None:
    """The bug this module fixes, shown on the same fixture: no store, no re-applied evictions."""
    trace = load_trace(TRACE)
    cfg = _config()
    lm = LightMem(config=cfg, registry=Registry(tmp_path / "a"))
    session = lm.session(trace.id)
    differ = 0
    for i, call in enumerate(trace.calls):
        if i == 25:
            lm = LightMem(config=cfg, registry=Registry(tmp_path / "a"))
            session = lm.session(trace.id)
        differ += json.dumps(session.before_model_call(call.prompt), sort_keys=True) != uninterrupted[0][i]
    assert differ > 0


def test_session_dropped_from_memory_comes_back_equal(
    tmp_path: Path, uninterrupted: tuple[list[str], list[int]]
) -> None:
    trace = load_trace(TRACE)
    lm = _plugin(tmp_path, _config())
    lm.max_sessions = 1
    requests = []
    for i, call in enumerate(trace.calls):
        session = lm.session(trace.id)
        requests.append(json.dumps(session.before_model_call(call.prompt), sort_keys=True))
        lm.session(f"other-{i}").before_model_call([{"role": "user", "content": f"hello {i}"}])
        assert trace.id not in lm.sessions  # really dropped
    assert requests == uninterrupted[0]


def test_mode_switch_after_restart_keeps_old_reductions(tmp_path: Path) -> None:
    """Old outputs keep the form they were given; only new content would follow the new mode."""
    trace = load_trace(TRACE)
    first, _ = _run(tmp_path, set(), _config())
    switched = _plugin(tmp_path, Config(mode="conservative"))
    out = json.dumps(switched.session(trace.id).before_model_call(trace.calls[-1].prompt), sort_keys=True)
    assert out == first[-1]
    # the control: a process that forgot the session reduces the old outputs the conservative way
    forgot = LightMem(config=Config(mode="conservative"), registry=Registry(tmp_path / "other"))
    assert (
        json.dumps(forgot.session(trace.id).before_model_call(trace.calls[-1].prompt), sort_keys=True) != out
    )


def test_damaged_state_starts_over_and_is_counted(tmp_path: Path) -> None:
    trace = load_trace(TRACE)
    _run(tmp_path, set())
    db = sqlite3.connect(tmp_path / "s.sqlite3")
    db.execute('UPDATE blobs SET value = \'{"version": 1, "headLength": "x"}\' WHERE name = \'stabilizer\'')
    db.commit()
    db.close()
    lm = _plugin(tmp_path, _config())
    session = lm.session(trace.id)
    assert session.fail.errors["state"] == 1
    assert session.memo == {}
    fresh = LightMem(config=_config(), registry=Registry(tmp_path / "fresh"))
    call = trace.calls[3]
    assert session.before_model_call(call.prompt) == fresh.session(trace.id).before_model_call(call.prompt)
    assert StateStore(tmp_path / "s.sqlite3").load(trace.id).blobs["core"]["calls"] == 1


def test_a_save_writes_only_what_is_new(tmp_path: Path) -> None:
    trace = load_trace(TRACE)
    store = StateStore(tmp_path / "s.sqlite3")
    lm = LightMem(config=_config(), registry=Registry(tmp_path / "a"), states=store)
    session = lm.session(trace.id)
    written: list[int] = []
    real = store.write

    def counting(sid: str, entries: Any, blobs: Any, expect: int | None = None) -> int:
        written.append(sum(len(v) for k, v in entries.items() if k == "memo"))
        return real(sid, entries, blobs, expect)

    store.write = counting  # type: ignore[method-assign]
    for call in trace.calls[:12]:
        session.before_model_call(call.prompt)
    tool_messages = [sum(1 for m in c.prompt if m["role"] == "tool") for c in trace.calls[:12]]
    # each call adds the memo entries of the tool outputs new in its prompt, never the old ones again
    assert written == [b - a for a, b in zip([0, *tool_messages], tool_messages, strict=False)]


def test_idle_sessions_leave_memory_and_come_back_with_the_same_bytes(
    tmp_path: Path, uninterrupted: tuple[list[str], list[int]]
) -> None:
    """An idle limit shorter than the gap between calls: every call finds its session expired and
    reloads it from the store; the requests are byte-equal to the run that kept it in memory."""
    trace = load_trace(TRACE)
    lm = _plugin(tmp_path, _config(server={"sessionIdleS": 1e-9}))
    got, objects = [], set()
    for call in trace.calls:
        lm.session("other")  # any access expires the idle ones
        assert trace.id not in lm.sessions
        session = lm.session(trace.id)
        objects.add(id(session))
        got.append(json.dumps(session.before_model_call(call.prompt), sort_keys=True))
    assert len(objects) > 1  # it really left memory and came back
    assert got == uninterrupted[0]


def test_a_prefixed_writer_keeps_its_sessions_apart(tmp_path: Path) -> None:
    """The hooks and the proxy may serve the same session id; each reads back only what it wrote."""
    path = tmp_path / "sessions.sqlite3"
    proxy, hooks = StateStore(path), StateStore(path, "hook:")
    proxy.write("s1", {"memo": [("a", "proxy", 0)]}, {"core": '{"calls":3}'})
    hooks.write("s1", {"memo": [("a", "hook", 0)]}, {"core": '{"calls":7}'})
    assert proxy.load("s1").maps["memo"] == {"a": "proxy"}
    assert hooks.load("s1").maps["memo"] == {"a": "hook"}
    assert proxy.sessions() == ["s1"] and hooks.sessions() == ["s1"]
    hooks.forget("s1")
    assert hooks.load("s1").empty and not proxy.load("s1").empty
