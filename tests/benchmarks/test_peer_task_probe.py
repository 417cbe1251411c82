"""The task-statement probe: what share of replayed prompts still carry the first user message."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from baselines import keep_last  # noqa: E402
from peers.task_probe import TaskProbe, task_lines, task_statement  # noqa: E402

from lightmem_plugin.commands import demo  # noqa: E402
from lightmem_plugin.errors import UsageError  # noqa: E402
from lightmem_plugin.measure.replay import Vanilla, replay_paths, replay_trace, summarize  # noqa: E402
from lightmem_plugin.measure.traces import load_trace  # noqa: E402
from lightmem_plugin.measure.traces.base import Trace, TraceCall  # noqa: E402

TRACE = ROOT / "tests" / "data" / "deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz"
Msg = dict[str, Any]


class Rewrite:
    """A policy that rewrites every first user message with ``fn`` (or drops it when fn returns None)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def transform(self, index: int, prompt: list[Msg]) -> list[Msg]:
        out: list[Msg] = []
        done = False
        for m in prompt:
            if m.get("role") == "user" and not done:
                done = True
                text = self.fn(m["content"])
                if text is None:
                    continue
                m = {**m, "content": text}
            out.append(m)
        return out

    def lookup(self, key: str) -> str | None:
        return None


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        (
            [{"role": "system", "content": "sys"}, {"role": "user", "content": "  Fix the bug.\n"}],
            "Fix the bug.",
        ),
        ([{"role": "user", "content": [{"type": "text", "text": "part one"}]}], "part one"),
        ([{"role": "system", "content": "only a system prompt"}], None),
        ([{"role": "user", "content": ""}, {"role": "user", "content": "second"}], None),
    ],
)
def test_task_statement_is_the_first_user_text(prompt: list[Msg], expected: str | None) -> None:
    assert task_statement(prompt) == expected


def test_task_lines_keep_long_distinct_stripped_lines() -> None:
    task = "short\n  regression: iam.physical returns nan  \nregression: iam.physical returns nan\n\nok"
    assert task_lines(task) == ["regression: iam.physical returns nan"]


def _probe(policy: Any) -> dict[str, float | int]:
    probe = TaskProbe(lambda _trace: policy)
    replay_paths([TRACE], probe)
    return probe.figures()


def test_vanilla_and_keep_last_carry_the_task_everywhere() -> None:
    calls = len(load_trace(TRACE).calls)
    assert _probe(Vanilla()) == {
        "task_statement_prompts": calls,
        "task_statement_present": 1.0,
        "task_lines_present": 1.0,
    }
    probe = TaskProbe(keep_last(4))
    replay_paths([TRACE], probe)
    assert probe.figures()["task_statement_present"] == 1.0


def test_dropping_the_task_scores_zero() -> None:
    figures = _probe(Rewrite(lambda _text: None))
    assert figures["task_statement_present"] == 0.0
    assert figures["task_lines_present"] == 0.0


def test_one_changed_line_fails_verbatim_but_keeps_the_other_lines() -> None:
    task = load_trace(TRACE).calls[0].prompt[1]["content"]
    lines = task_lines(task)
    victim = lines[0]
    figures = _probe(Rewrite(lambda text: text.replace(victim, victim.upper() + "!")))
    assert figures["task_statement_present"] == 0.0
    assert figures["task_lines_present"] == pytest.approx((len(lines) - 1) / len(lines), abs=1e-4)


def test_named_policy_runs_through_the_probe_and_keeps_replay_figures(tmp_path: Path) -> None:
    probe = TaskProbe("vanilla", tmp_path)
    row = summarize(replay_paths([TRACE], probe))
    plain = summarize(replay_paths([TRACE], "vanilla"))
    assert row["K"] == plain["K"]
    assert row["retention_uses"] == plain["retention_uses"]
    assert probe.figures()["task_statement_present"] == 1.0


def test_a_mode_through_the_probe_still_meets_its_pauses_and_sees_the_usage(tmp_path: Path) -> None:
    """The replay hands a lightmem2 mode the provider's usage and reads its session's cold starts:
    through the probe it must do both, or every benchmark row of a mode is another policy's (the
    probe hid them: aggressive compacted too late on 8463c716, and rows said 0 cold starts)."""
    chain = demo.bundled_chain()  # three tasks, 30-minute pauses: cold starts on Anthropic's cache
    probe = TaskProbe("normal", tmp_path / "probed")
    row = summarize(replay_paths([chain], probe, provider="anthropic"))
    plain = summarize(replay_paths([chain], "normal", provider="anthropic"))
    assert row["session_cold_starts"] == plain["session_cold_starts"] > 0
    assert row["K"] == plain["K"]


def test_a_name_without_root_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="root"):
        TaskProbe("normal")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.booleans(), min_size=3, max_size=3))
def test_present_means_every_line_and_shares_stay_in_range(drop: list[bool]) -> None:
    lines = ["first line of the issue text", "second line, with a traceback", "third line: expected result"]
    task = "\n".join(lines)
    kept = "\n".join(line for line, d in zip(lines, drop, strict=True) if not d)
    prompt = [{"role": "system", "content": "s"}, {"role": "user", "content": task}]
    trace = Trace("t", "test", "deepseek", [TraceCall(prompt, {"role": "assistant", "content": "ok"}, 10, 0)])
    probe = TaskProbe(lambda _t: Rewrite(lambda _text: kept))
    replay_trace(trace, probe(trace))
    figures = probe.figures()
    assert figures["task_statement_present"] == (1.0 if not any(drop) else 0.0)
    assert figures["task_lines_present"] == pytest.approx(drop.count(False) / 3, abs=1e-4)
