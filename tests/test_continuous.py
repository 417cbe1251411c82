"""Chaining recorded sessions into one continuous session, and replaying it."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest

from lightmem_plugin.cli import main
from lightmem_plugin.errors import TraceError
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.measure.traces.continuous import Pauses, chain

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


def test_the_pause_model_puts_times_in_the_chain_and_a_replay_expires_on_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41: chained swe sessions had no times, so no cache ever expired on them. With the
    declared model the file carries each call's time; replayed on Anthropic's five-minute cache the
    30-minute pause before task 2 is one cold start, and with pauses off there is none."""
    a = load_trace(SWE[0])
    cold = {}
    for minutes in (30, 0):
        out = tmp_path / f"chain-{minutes}.json.gz"
        assert (
            main(
                [
                    "continuous",
                    str(out),
                    *map(str, SWE),
                    "--pause-minutes",
                    str(minutes),
                    "--call-seconds",
                    "7",
                ]
            )
            == 0
        )
        chained = load_trace(out)
        times = [c.at for c in chained.calls if c.at is not None]
        assert len(times) == len(chained.calls)
        gaps = [y - x for x, y in itertools.pairwise(times)]
        gap = gaps.pop(len(a.calls) - 1)  # the step from task 1's last call to task 2's first
        assert gap == (minutes * 60 if minutes else 7) and set(gaps) == {7}
        capsys.readouterr()
        assert main(["replay", str(out), "--provider", "anthropic", "--json"]) == 0
        cold[minutes] = json.loads(capsys.readouterr().out)["cold_starts"]
    assert cold == {30: 1, 0: 0}


@pytest.mark.parametrize(
    ("at", "match"),
    [
        ("noon", "calls\\[1\\].at is 'noon'"),
        (-5, "calls\\[1\\].at is -5"),
        (True, "calls\\[1\\].at is True"),
        (50.0, "calls\\[1\\].at 50.0 is before the previous call's 100.0"),
    ],
)
def test_a_bad_call_time_names_the_call_and_the_value(tmp_path: Path, at: object, match: str) -> None:
    doc = chain([load_trace(p) for p in SWE], pauses=Pauses())
    doc["calls"][0]["at"] = 100.0
    doc["calls"][1]["at"] = at
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(TraceError, match=match):
        load_trace(path)


def test_without_a_pause_model_the_chain_has_no_times_and_bad_options_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = chain([load_trace(p) for p in SWE])
    assert "pauses" not in doc and all("at" not in c for c in doc["calls"])
    assert main(["continuous", str(tmp_path / "x.json.gz"), *map(str, SWE), "--pause-minutes", "-1"]) == 2
    assert "task_pause_minutes is -1.0" in capsys.readouterr().err
