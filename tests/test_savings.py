"""What ``report``'s top reductions name: the pass that changed each tool output, read off its shown
text, and the rest of what a call did not send (call ids, eviction, the stabilizer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin import pipeline
from lightmem_plugin.commands.demo import bundled_trace
from lightmem_plugin.config import Config
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.metering.savings import saver, split_saving
from lightmem_plugin.pipeline import session_chain
from lightmem_plugin.prefix.call_ids import short_id
from lightmem_plugin.reduction import reduce as reduce_module
from lightmem_plugin.reduction.base import stub
from lightmem_plugin.reduction.headtail import PROTECTED_WHAT
from lightmem_plugin.reduction.kinds import ToolCall
from lightmem_plugin.reduction.linedup import WHAT as REPEATED
from lightmem_plugin.reduction.passes import PASSES
from lightmem_plugin.reduction.work import unchanged
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.store.registry import Registry

KEY = "0123456789ab"
UNIQUE = [p for p in PASSES if sum(q.what == p.what for q in PASSES) == 1]


@pytest.mark.parametrize("spec", UNIQUE, ids=[p.name for p in UNIQUE])
def test_a_pass_is_named_by_its_own_stub_label(spec: Any) -> None:
    shown = f"head line\n{stub(KEY, 5_000, (2, 80), spec.what)}\ntail line"
    assert saver(shown) == spec.name
    # also in the shell form, and when repeat markers changed the output too
    marker = "[lightmem2 repeat: lines 1:9 of this output, as shown in the output of tool call abc]"
    assert saver(f"{marker}\n{stub(KEY, 5_000, (2, 80), spec.what, shell=True)}\nx") == spec.name


@pytest.mark.parametrize(
    ("shown", "name"),
    [
        (f"head\n{stub(KEY, 9_000, (3, 200))}\ntail", "truncate"),
        (f"head\nValueError: x\n{stub(KEY, 9_000, None, PROTECTED_WHAT)}\ntail", "truncate"),
        (f"tidied line\nanother\n{stub(KEY, 9_000, (1, 2))}", "whitespace"),
        (
            f"[lightmem2 repeat: lines 1:30 of this output, as shown in an earlier output]\nnew\n{stub(KEY, 900, None, REPEATED)}",
            "dedup",
        ),
        (
            "[lightmem2: identical to the output of tool call c7 (302 chars), archived as k; recover ...]",
            "dedup",
        ),
        (
            "[lightmem2: output archived as k, no longer current (same output again); recover with lightmem2_recover(key)]",
            "eviction",
        ),
        (  # as a session state saved before the stub said why
            "[lightmem2: output of finished work archived as k; recover with lightmem2_recover(key)]",
            "eviction",
        ),
        ("<WORKDIR>/src/app.py", "stabilizer"),
    ],
)
def test_generic_stubs_markers_and_eviction(shown: str, name: str) -> None:
    assert saver(shown) == name


def test_the_rest_of_a_call_goes_to_eviction_once_anything_was_paged_out() -> None:
    outputs = [("fileview", 300), ("call ids", 40), ("fileview", 20)]
    assert split_saving(outputs, 400, paged_out=False) == {"call ids": 40, "fileview": 320, "stabilizer": 40}
    assert split_saving(outputs, 400, paged_out=True) == {"call ids": 40, "eviction": 40, "fileview": 320}
    # our session block can cost more than the passes save early on: the row is negative, the sum exact
    assert split_saving([], -25, paged_out=False) == {"stabilizer": -25}
    assert split_saving([("json", 10)], 10, paged_out=False) == {"json": 10}


def test_every_changed_output_of_a_real_session_is_named_by_the_pass_that_chose_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real session through the pipeline, with each select pass's choice recorded as it happens:
    the name read back from each output's shown text is that pass; the ledger's rows of each call
    add up to what the call did not send."""
    chosen: dict[str, str] = {}  # host call id -> the select pass whose cut its output shows
    current: list[str] = []
    picked: list[str] = []
    run, reduce_output, reduce_text = (
        reduce_module._run,
        session_chain.reduce_output,
        session_chain.reduce_text,
    )

    def recording(spec: Any, *args: Any) -> Any:
        out = run(spec, *args)
        if spec.stage == "select" and out is not None and out != unchanged(args[0]):
            picked.append(spec.name)  # it cut something (a whole file view cuts nothing)
        return out

    def reducing_text(text: str, ctx: Any) -> str:
        picked.clear()
        out = reduce_text(text, ctx)
        if out != text and picked:  # the cut was kept (not dropped as saving too little)
            chosen[current[-1]] = picked[-1]
        return out

    def reducing(call_id: str, *args: Any) -> str:
        current.append(call_id)
        return reduce_output(call_id, *args)

    monkeypatch.setattr(reduce_module, "_run", recording)
    monkeypatch.setattr(session_chain, "reduce_text", reducing_text)  # what the chain reduces with
    monkeypatch.setattr(session_chain, "reduce_output", reducing)
    trace = load_trace(bundled_trace())  # 130 calls: file views, tracebacks, repeats, script prints
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    # views up to 4,000 chars stay whole (24,000 by default): the session's long views get cut
    config = Config.model_validate({"mode": "normal", "reduction": {"normal": {"fileViewChars": 4000}}})
    lm = pipeline.LightMem(config=config, registry=Registry(tmp_path / "reg"), ledger=ledger)
    s = lm.session("savings")
    for call in trace.calls:
        sent = s.before_model_call(call.prompt)
        s.after_model_call(call.output)
    shown = {m["tool_call_id"]: m["content"] for m in sent if m.get("role") == "tool"}
    checked: list[str] = []
    tidied: list[str] = []  # the names of outputs no select pass cut: repeats or the clean stage
    for m in trace.calls[-1].prompt:
        cid = m.get("tool_call_id")
        out = shown.get(short_id(cid)) if cid else None
        if out is not None and cid not in chosen and out != m["content"] and "identical to" not in out:
            tidied.append(saver(out))
            assert tidied[-1] == ("dedup" if "[lightmem2 repeat: " in out else "whitespace"), out
        if out is None or cid not in chosen or out == m["content"] or "identical to" in out:
            continue  # unchanged, no select pass chose its lines, or a repeat of an earlier output
        assert saver(out) == chosen[cid], [ln for ln in out.split("\n") if "[lightmem2" in ln]
        checked.append(chosen[cid])
    assert len(checked) >= 2, checked  # the session has outputs a select pass cut (its long views)
    assert "whitespace" in tidied, tidied  # and outputs only the clean stage changed
    rows = ledger.calls("savings")
    assert len(rows) == len(trace.calls)
    for row in rows:
        assert sum(row.saved_by_pass.values()) == row.baseline_tokens - row.input_tokens
    totals = ledger.totals("savings").saved_by_pass
    assert set(checked) <= set(totals) and totals["call ids"] > 0
    assert abs(totals.get("stabilizer", 0)) < 0.01 * sum(totals.values())  # all but noise is named


def _outputs() -> dict[str, tuple[str, str]]:
    """An output each select or clean pass cuts, with the command that produced it."""
    py = "".join(
        f"def f_{i}(x):\n    '''Helper {i}.'''\n    value = compute(x, {i})\n    return value * {i}\n\n"
        for i in range(700)
    )
    grep = "".join(f"src/mod_{i // 40}.py:{i}:    total = compute_total(items, {i})\n" for i in range(900))
    diff = "diff --git a/src/a.py b/src/a.py\n--- a/src/a.py\n+++ b/src/a.py\n" + "".join(
        f"@@ -{i * 9},6 +{i * 9},6 @@ def f_{i}(x):\n     '''Helper.'''\n-    v = old({i})\n+    v = new({i})\n"
        "     return v\n \n \n"
        for i in range(500)
    )
    doc = json.dumps(
        {"items": [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(120)]}, indent=2
    )
    build = "".join(
        f"Collecting package-{i}==1.{i}.0\n  Downloading package-{i}-1.{i}.0.tar.gz (12 kB)\n"
        for i in range(80)
    )
    build += "Successfully installed " + " ".join(f"package-{i}-1.{i}.0" for i in range(80)) + "\n"
    frames = "".join(
        f'  File "/srv/app/mod_{i}.py", line {i + 10}, in step_{i}\n    step_{i + 1}(state)\n'
        for i in range(60)
    )
    noise = "".join(f"progress {i}: processing batch {i} of the nightly job\n" for i in range(60))
    tb = noise + "Traceback (most recent call last):\n" + frames + "KeyError: 'missing'\n" + noise
    plain = "".join(
        f"step {i}: value={i * 7} state=ok (a line of plain program output)\n" for i in range(200)
    )
    page = (
        "<!DOCTYPE html><html><head><title>T</title><style>" + "p{margin:0}" * 300 + "</style></head><body>"
    )
    page += (
        "".join(f"<div class='row'><p>Paragraph {i} of the page.</p></div>" for i in range(80))
        + "</body></html>"
    )
    return {
        "testrun": ("python -m pytest tests", PYTEST),
        "fileview": ("cat src/big.py", py),
        "search": ("grep -rn compute_total src", grep),
        "diff": ("git diff", diff),
        "json": ("curl -s http://127.0.0.1:8000/items", doc),
        "log": ("pip install -r requirements.txt", build),
        "traceback": ("python -m app.run_job", tb),
        "truncate": ("./simulate --steps 200", plain),
        "html": ("curl -s http://127.0.0.1:8000/page", page),
    }


PYTEST = (
    "============================= test session starts ==============================\n"
    + "".join(
        f"tests/test_a.py::test_{i} PASSED                                  [ {i}%]\n" for i in range(80)
    )
    + "=================================== FAILURES ===================================\n"
    + "    def test_broken():\n>       assert f(1) == 2\nE       assert 3 == 2\n\ntests/test_a.py:12: AssertionError\n"
    + "FAILED tests/test_a.py::test_broken - assert 3 == 2\n"
    + "========================= 1 failed, 80 passed in 0.42s =========================\n"
)


@pytest.mark.parametrize("expected", sorted(_outputs()))
def test_each_pass_is_named_by_what_its_output_shows(
    expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pass cuts an output of its kind in a real session (the pass that cut is recorded as it
    runs: the fixture must trigger it), and the name read back from the shown text is that pass."""
    cutters: list[str] = []
    run = reduce_module._run

    def recording(spec: Any, *args: Any) -> Any:
        out = run(spec, *args)
        if spec.stage == "clean" and out is not None:
            cutters.append(spec.name)
        if spec.stage == "select" and out is not None and not all(isinstance(p, str) for p in out):
            cutters.append(spec.name)
        return out

    monkeypatch.setattr(reduce_module, "_run", recording)
    command, text = _outputs()[expected]
    lm = pipeline.LightMem(config=Config(mode="normal"), registry=Registry(tmp_path / "reg"))
    shown = lm.session("kinds").ingest_tool_result(
        "c1", text, ToolCall("bash", json.dumps({"command": command}))
    )
    assert shown != text and expected in cutters, (expected, cutters)
    assert saver(shown) == expected, [ln for ln in shown.split("\n") if "[lightmem2" in ln]
