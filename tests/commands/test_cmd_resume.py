from __future__ import annotations

from pathlib import Path

import pytest

from lightmem_plugin.cli import main
from lightmem_plugin.commands import resume
from lightmem_plugin.config import data_dir
from lightmem_plugin.errors import UsageError
from lightmem_plugin.eviction.record_store import RecordStore
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.pipeline import LightMem

TRACE = (
    Path(__file__).resolve().parents[1] / "data" / "deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz"
)


def run_session(session_id: str) -> LightMem:
    lm = LightMem.from_config()
    s = lm.session(session_id)
    for call in load_trace(TRACE).calls:
        s.before_model_call(call.prompt)
    return lm


def test_resume_prints_the_latest_record_and_earlier_turns() -> None:
    run_session("pv-1707")
    store = RecordStore(data_dir() / "records")
    latest = resume.run(store)
    assert latest.startswith("[lightmem2 session record: pv-1707 at turn ")
    assert "Goal" in latest
    early = resume.run(store, at_turn=12)
    turn = int(early.split(" at turn ")[1].split("]")[0])
    assert turn <= 12
    assert len(resume.run(store, level="critical")) <= len(resume.run(store, level="full"))


def test_resume_from_a_trace_file_needs_no_prior_session() -> None:
    text = resume.run(RecordStore(data_dir() / "records"), trace=str(TRACE))
    assert "Goal" in text


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"level": "huge"}, "allowed: critical"),
        ({"session_id": "nope"}, "unknown session"),
        ({}, "no session record"),
        ({"at_turn": -5, "trace": str(TRACE)}, "0 or more; got -5"),
    ],
)
def test_bad_arguments_are_one_line_usage_errors(kwargs: dict[str, object], needle: str) -> None:
    store = RecordStore(data_dir() / "records")
    if "session_id" in kwargs:
        run_session("other")
    with pytest.raises(UsageError, match=needle):
        resume.run(store, **kwargs)  # type: ignore[arg-type]


def test_cli_exit_code_2_on_unknown_level(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resume", "--level", "huge"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice" in err
