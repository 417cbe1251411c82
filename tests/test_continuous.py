"""Chaining recorded sessions into one continuous session, and replaying it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from lightmem_plugin.cli import main
from lightmem_plugin.errors import TraceError
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.measure.traces.continuous import chain

DATA = Path(__file__).parent / "data"
SWE = [
    DATA / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz",
    DATA / "deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz",
]


def test_each_call_sees_the_earlier_tasks_then_its_own_prompt(tmp_path: Path) -> None:
    a, b = (load_trace(p) for p in SWE)
    out = tmp_path / "chain.json.gz"
    assert main(["continuous", str(out), *map(str, SWE)]) == 0
    chained = load_trace(out)
    assert len(chained.calls) == len(a.calls) + len(b.calls)
    system = a.calls[0].prompt[0]
    # task 1: exactly its own prompts
    for got, want in zip(chained.calls[: len(a.calls)], a.calls, strict=True):
        assert got.prompt == want.prompt and got.output == want.output
    # task 2: one system prompt, all of task 1 through its last reply, then its own prompt after its system
    history = [*a.calls[-1].prompt, a.calls[-1].output]
    for got, want in zip(chained.calls[len(a.calls) :], b.calls, strict=True):
        assert got.prompt == [system, *history[1:], *want.prompt[1:]]
        assert got.output == want.output
    assert sum(1 for m in chained.calls[-1].prompt if m["role"] == "system") == 1
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert [t["first_message"] for t in doc["tasks"]] == [1, len(history)]


def test_the_same_sessions_give_the_same_bytes(tmp_path: Path) -> None:
    for name in ("one", "two"):
        main(["continuous", str(tmp_path / f"{name}.json.gz"), *map(str, SWE)])
    assert (tmp_path / "one.json.gz").read_bytes() == (tmp_path / "two.json.gz").read_bytes()


def test_a_chained_session_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "chain.json.gz"
    main(["continuous", str(out), *map(str, SWE)])
    capsys.readouterr()
    assert main(["replay", str(out), "--mode", "aggressive", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["calls"] == sum(len(load_trace(p).calls) for p in SWE) and figures["retention_lost"] == 0


def test_bad_input_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["continuous", str(tmp_path / "x.json.gz"), str(SWE[0])]) == 2
    assert "two or more sessions" in capsys.readouterr().err
    with pytest.raises(TraceError, match="no model calls"):
        chain([load_trace(DATA / "deepseek_reasoner_dev__pvlib__pvlib-python-1854.json.gz")])
