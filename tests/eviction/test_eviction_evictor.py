from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from lightmem_plugin.config import Config
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys
from lightmem_plugin.store.registry import Registry

DATA = Path(__file__).resolve().parents[1] / "data"
TRACE = DATA / "deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz"
PYDICOM = DATA / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz"


def eager(tmp_path: Path) -> LightMem:
    """Aggressive mode with a cost rule that expects a long session, so batches do fire."""
    cfg = Config.model_validate(
        {
            "mode": "aggressive",
            "eviction": {"expectedRemainingCalls": 500, "keepRecentTurns": 2},
            "stabilizer": {"shortCallIds": False},  # the tests find the sent messages by the host's ids
        }
    )
    return LightMem(config=cfg, registry=Registry(tmp_path / "reg"))


def bash(i: int, command: str) -> dict[str, object]:
    args = json.dumps({"command": command})
    return {
        "role": "assistant",
        "content": f"step {i}",
        "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": args}}],
    }


def session_messages(turns: int) -> list[dict[str, object]]:
    msgs: list[dict[str, object]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug in pkg/mod.py"},
    ]
    for i in range(turns):
        if i % 3 == 0:  # a module read, then edited: the read is stale (each module once, so no later
            # read is sent as a reference to it, which would keep it in view)
            body = "\n".join(f"def f{i}_{k}(x):\n    return x + {k}" for k in range(120))
            msgs += [
                bash(i, f"cat pkg/mod{i}.py"),
                {"role": "tool", "tool_call_id": f"c{i}", "content": body},
            ]
        elif i % 3 == 1:
            cmd = f"sed -i 's/return x + {i}/return x - {i}/' pkg/mod{i - 1}.py"
            msgs += [
                bash(i, cmd),
                {"role": "tool", "tool_call_id": f"c{i}", "content": "<returncode>0</returncode>"},
            ]
        else:
            out = "\n".join(f"tests/test_mod.py::test_{k} PASSED" for k in range(60)) + "\n60 passed"
            msgs += [
                bash(i, "python -m pytest tests -q"),
                {"role": "tool", "tool_call_id": f"c{i}", "content": out},
            ]
    return msgs


def test_stale_reads_are_paged_out_recoverably_and_reapplied_identically(tmp_path: Path) -> None:
    lm = eager(tmp_path)
    s = lm.session("ev")
    full = session_messages(24)
    outs = []
    for t in range(6, len(full) + 1, 2):
        outs.append(s.before_model_call(full[:t]))
    assert s.evictor.state.batches, "no eviction batch fired"
    first = s.evictor.state.batches[0]
    evicted_id = first.call_ids[0]
    final = outs[-1]
    stubbed = next(m for m in final if m.get("tool_call_id") == evicted_id)
    original = next(m for m in full if m.get("tool_call_id") == evicted_id)
    keys = stub_keys(str(stubbed["content"]))
    assert keys and str(original["content"]) in lm.registry.recover(keys[0])
    # the stub says why the read left (the file was edited later), not that work finished: the task runs on
    assert "finished" not in str(stubbed["content"]), stubbed["content"]
    assert "no longer current (read of pkg/mod0.py superseded by edit)" in str(stubbed["content"])
    # the same evicted output reads the same on every later call (I2)
    later = [next(m for m in o if m.get("tool_call_id") == evicted_id) for o in outs[-3:]]
    assert all(m["content"] == stubbed["content"] for m in later)


def test_an_inline_script_that_ran_a_suite_is_paged_out_as_a_script_that_ran(tmp_path: Path) -> None:
    """A ``python -c`` whose prints hold unittest's summary is a test run now (the session record says
    how its tests went); its long code, already run, still leaves with a batch like any inline script."""
    code = "import unittest\n" + "\n".join(
        f"def check_{k}():\n    assert {k} + 1 == {k + 1}" for k in range(60)
    )
    script = f'python -c "{code}\nunittest.main(exit=False)"'
    lm = eager(tmp_path)
    s = lm.session("ev")
    head = session_messages(0)
    ran = [
        bash(99, script),
        {"role": "tool", "tool_call_id": "c99", "content": "Ran 60 tests in 0.01s\n\nOK"},
    ]
    full = [*head, *ran, *session_messages(24)[len(head) :]]
    for t in range(len(head) + 2, len(full) + 1, 2):
        s.before_model_call(full[:t])
    assert [e.kind for e in s.evictor.estimator.log.events if e.call_chars > 1000] == ["test"]
    paged = [cid for b in s.evictor.state.batches for cid in b.call_ids]
    assert "args:c99" in paged


@pytest.mark.parametrize(
    ("trace", "eviction", "n_batches"),
    [
        # one batch on the pvlib session with the eager rule; on the longer pydicom session a 5-call
        # rhythm and a zero saving ratio make two batches fire, so the spacing between them is checked
        (TRACE, {"expectedRemainingCalls": 500, "keepRecentTurns": 2}, 1),
        (
            PYDICOM,
            {"expectedRemainingCalls": 500, "keepRecentTurns": 2, "batchTurns": 5, "minSavingRatio": 0},
            2,
        ),
    ],
    ids=["pvlib-1707", "pydicom-901"],
)
def test_batches_respect_batch_turns_and_prefix_breaks_only_at_batches(
    tmp_path: Path, trace: Path, eviction: dict[str, object], n_batches: int
) -> None:
    cfg = Config.model_validate(
        {"mode": "aggressive", "eviction": eviction, "stabilizer": {"shortCallIds": False}}
    )
    lm = LightMem(config=cfg, registry=Registry(tmp_path / "reg"))
    s = lm.session("real")
    calls = load_trace(trace).calls
    prev: list[dict[str, object]] | None = None
    breaks: list[int] = []
    evicted: dict[int, int] = {}
    for i, call in enumerate(calls, 1):
        out = s.before_model_call(call.prompt)
        if s.evictor.last_evicted_tokens:
            evicted[i] = s.evictor.last_evicted_tokens
        if prev is not None and out[: len(prev) - 1] != prev[: len(prev) - 1]:
            breaks.append(i)
        prev = out
    batches = s.evictor.state.batches
    batch_calls = [b.call_index for b in batches]
    assert len(batches) == n_batches, f"expected {n_batches} eviction batches, got {batch_calls}"
    assert evicted == {b.call_index: b.tokens_saved for b in batches} and all(evicted.values())
    assert breaks == batch_calls  # every batch breaks the prefix, and nothing else does
    turns = lm.config.eviction.batchTurns
    assert all(c % turns == 0 for c in batch_calls)  # a batch is only considered every batchTurns calls
    assert all(b - a >= turns for a, b in itertools.pairwise(batch_calls))
    assert prev is not None
    final = {m.get("tool_call_id"): m for m in prev}
    args = {tc["id"]: tc["function"]["arguments"] for m in prev for tc in m.get("tool_calls") or ()}
    for batch in batches:  # each evicted output or argument is a stub in the last request, recoverable
        for cid in batch.call_ids:
            if cid.startswith("args:"):
                keys = stub_keys(json.loads(args[cid[5:]])["command"])
            else:
                keys = stub_keys(str(final[cid]["content"]))
            assert keys and keys[0] == batch.key


def test_no_eviction_outside_aggressive_mode(tmp_path: Path) -> None:
    lm = LightMem(config=Config(mode="normal"), registry=Registry(tmp_path / "r"))
    s = lm.session("n")
    full = session_messages(24)
    for t in range(6, len(full) + 1, 2):
        s.before_model_call(full[:t])
    assert not s.evictor.state.batches


def test_llm_estimator_is_used_when_configured_and_falls_back_when_unreachable(tmp_path: Path) -> None:
    cfg = Config.model_validate(
        {
            "mode": "aggressive",
            "eviction": {"expectedRemainingCalls": 500, "keepRecentTurns": 2},
            "estimator": {
                "kind": "llm",
                "proxyBaseUrl": "http://127.0.0.1:9/v1",
                "model": "m",
                "timeoutS": 0.5,
                "retries": 0,
            },
        }
    )
    lm = LightMem(config=cfg, registry=Registry(tmp_path / "reg"))
    s = lm.session("llm")
    full = session_messages(24)
    for t in range(6, len(full) + 1, 2):
        s.before_model_call(full[:t])
    from lightmem_plugin.eviction.llm_estimator import LLMEstimator

    assert isinstance(s.evictor.proposer, LLMEstimator)
    assert sum(s.evictor.proposer.fallbacks.values()) >= 1
    assert s.evictor.state.batches, "the heuristic fallback still drives eviction"


def test_a_batch_with_a_carriage_return_names_no_line_ranges(tmp_path: Path) -> None:
    """The registry numbers an archive's lines with str.splitlines, which also breaks at ``\\r``: a
    batch counting lines by ``\\n`` named ranges that recovered other lines (a progress bar's ``\\r``
    in one output shifted every later output's range). Such a batch's stubs name the key alone."""
    lm = eager(tmp_path)
    s = lm.session("ev")
    full = session_messages(24)
    full[3] = {**full[3], "content": "fetch 10%\rfetch 100%\n" + str(full[3]["content"])}
    outs = [s.before_model_call(full[:t]) for t in range(6, len(full) + 1, 2)]
    assert s.evictor.state.batches, "no eviction batch fired"
    evicted = s.evictor.state.batches[0].call_ids
    assert "c0" in evicted  # the output with the carriage return left in the first batch
    for cid in evicted:
        stubbed = next(m for m in outs[-1] if m.get("tool_call_id") == cid)
        assert "lines=" not in str(stubbed["content"]), stubbed["content"]
        original = next(m for m in full if m.get("tool_call_id") == cid)
        assert str(original["content"]) in lm.registry.recover(stub_keys(str(stubbed["content"]))[0])
    # without the carriage return the same batch names each output's lines
    lm2 = eager(tmp_path / "plain")
    s2 = lm2.session("ev")
    plain = [s2.before_model_call(session_messages(24)[:t]) for t in range(6, 25, 2)]
    first = next(m for m in plain[-1] if m.get("tool_call_id") == s2.evictor.state.batches[0].call_ids[0])
    assert 'lines="' in str(first["content"])
