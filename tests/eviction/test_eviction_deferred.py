"""At a call whose cache is cold, normal mode reduces again the outputs it kept whole that are no longer
needed (issue #42 item 1): a finished task's file view leaves in part, recoverable byte-exact, the
newest run of a failing command stays whole, and a warm call or conservative mode changes nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from eviction_helpers import Session, module

from lightmem_plugin.commands import report, status
from lightmem_plugin.config import Config
from lightmem_plugin.eviction.deferred import deferred_table
from lightmem_plugin.eviction.thinking import stale_ranges
from lightmem_plugin.model import Message, TextPart
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.store.registry import Registry
from lightmem_plugin.store.session_state import StateStore

VIEW = module("parser", 160)  # ~6,000 chars: kept whole on arrival (fileViewChars 24,000)
FAILING = "\n".join(
    [
        "============================= test session starts ==============================",
        "collected 40 items",
        "",
    ]
    + [f"tests/test_parser.py::test_case_{i} PASSED" for i in range(60)]
    + [
        "Traceback (most recent call last):",
        '  File "tests/test_parser.py", line 88, in test_case_61',
        "    assert parse('x') == 2",
        "AssertionError: assert 1 == 2",
        "FAILED tests/test_parser.py::test_case_61 - AssertionError: assert 1 == 2",
        "======================== 1 failed, 60 passed in 0.31s =========================",
    ]
)


def _history() -> tuple[Session, int, int]:
    """Task 1 viewed a module and ran a failing suite once; task 2 did seven small steps since.
    Returns the session and the message indices of the view's and the suite's outputs."""
    s = Session("Fix the parser in parser.py")
    view = s.call("cat parser.py", VIEW) + 1
    suite = s.call("python -m pytest tests/test_parser.py", FAILING, rc=1) + 1
    s.say("The parser is fixed, one case still fails as expected.")
    s.say("Now add a docstring to every function of utils.py", role="user")
    for k in range(7):
        s.call(f"sed -n '{k * 10 + 1},{k * 10 + 10}p' utils.py", f"def util_{k}(x):\n    return x")
    return s, view, suite


def _plugin(tmp_path: Path, mode: str) -> LightMem:
    cfg = Config.model_validate({"mode": mode})
    return LightMem(
        config=cfg,
        registry=Registry(tmp_path / "reg"),
        states=StateStore(tmp_path / "states.sqlite3"),
        ledger=Ledger(tmp_path / "ledger.sqlite3"),
    )


def _calls(lm: LightMem, history: list[dict[str, Any]], times: list[float]) -> list[list[dict[str, Any]]]:
    """The history sent at each of ``times`` (one more assistant step between calls); what the model
    received each time."""
    s = lm.session("s")
    sent = []
    msgs = list(history)
    for k, at in enumerate(times):
        sent.append(s.before_model_call(msgs, api="anthropic", model="claude-sonnet-4-5", now=at))
        msgs = [
            *msgs,
            {"role": "assistant", "content": f"Step {k} done."},
            {"role": "user", "content": "go on"},
        ]
    return sent


def test_a_cold_call_reduces_a_finished_task_s_view_recoverably_and_keeps_the_failing_run(
    tmp_path: Path,
) -> None:
    s, view, suite = _history()
    lm = _plugin(tmp_path, "normal")
    warm, cold, after = _calls(lm, s.messages, [0.0, 60.0 + 1800.0, 1920.0])
    # the warm call sent the view whole, as it arrived
    assert VIEW in warm[view]["content"]
    # the call after a 30-minute pause (past Anthropic's 5 minutes) sends it reduced, behind a stub
    reduced = cold[view]["content"]
    assert VIEW not in reduced and len(reduced) < len(warm[view]["content"]) // 3
    keys = stub_keys(reduced)
    assert keys and lm.registry.get(keys[0]).decode() in warm[view]["content"]
    assert "def parser_0(x):" in reduced  # its head stays in view
    # the newest run of the suite has error lines: it stays whole
    assert cold[suite]["content"] == warm[suite]["content"]
    # everything else is as it was, and the next (warm) call extends the cold call's prompt
    same = [m for i, m in enumerate(cold[: len(warm)]) if i != view]
    assert same == [m for i, m in enumerate(warm) if i != view]
    assert after[: len(cold)] == cold
    assert lm.ledger is not None
    rows = lm.ledger.calls("s")
    assert "1 output kept whole reduced again at a cold start" in (rows[1].break_reason or "")
    assert rows[1].cold_start == "pause 1860 300" and rows[2].break_reason is None
    # the ledger's cache model expires the host's cache at the pause too: the free break costs nothing
    # against vanilla, which writes its whole prompt again there (before: normal 19% over vanilla)
    totals = lm.ledger.totals("s")
    assert totals.k < totals.k_baseline
    # report names the batch and what the call that made it cost
    assert re.search(
        r"call 2 at .*reduced again at a cold start.* \(this call \$0\.\d{4}\)", report.run(lm.ledger, "s")
    )


def test_a_warm_session_and_conservative_mode_change_nothing(tmp_path: Path) -> None:
    s, view, _ = _history()
    warm = _calls(_plugin(tmp_path / "n", "normal"), s.messages, [0.0, 60.0, 120.0])
    assert all(VIEW in sent[view]["content"] for sent in warm)
    cons = _calls(_plugin(tmp_path / "c", "conservative"), s.messages, [0.0, 1860.0])
    assert VIEW in cons[1][view]["content"]


def test_a_restarted_process_sends_the_same_reduced_bytes(tmp_path: Path) -> None:
    s, view, _ = _history()
    first = _calls(_plugin(tmp_path, "normal"), s.messages, [0.0, 1860.0])
    again = _plugin(tmp_path, "normal").session("s")  # a new process, the same store
    resent = again.before_model_call(s.messages, api="anthropic", now=1900.0)
    assert resent[view]["content"] == first[1][view]["content"] != first[0][view]["content"]


def test_the_deferred_table_cuts_the_whole_view_allowance_and_the_trigger() -> None:
    table = Config.model_validate({"mode": "normal"}).mode_table()
    tight = deferred_table(table)
    assert tight.fileViewChars == table.deferredViewChars == 300
    assert tight.triggerChars == 300 and tight.capChars == 300
    assert tight.headChars + tight.tailChars < tight.capChars


def _status(lm: LightMem) -> str:
    assert lm.ledger is not None
    return status.run(lm.ledger, lm.registry, lm.config, "s")


def test_status_says_in_one_line_each_what_each_mode_did(tmp_path: Path) -> None:
    s, _, _ = _history()
    lines = {}
    for mode in ("conservative", "normal", "aggressive"):
        lm = _plugin(tmp_path / mode, mode)
        _calls(lm, s.messages, [0.0, 1860.0, 1920.0])
        lines[mode] = _status(lm)
    assert "the past: never changed (conservative); 1 cold start (free breaks)" in lines["conservative"]
    normal = lines["normal"]
    assert "at free breaks: 1 cold start (free breaks); 1 batch reduced old outputs again" in normal
    assert "paged out:" not in normal
    # aggressive pages the finished task out at the cold start (its break free there)
    assert "paged out: 1 batch (" in lines["aggressive"]
    assert "1 at a cold start); compactions before the host's limit: 0" in lines["aggressive"]
    assert all("on arrival: new tool output reduced" in text for text in lines.values())


def test_status_does_not_count_a_cold_start_s_reduction_as_reduced_on_arrival(tmp_path: Path) -> None:
    """Every output of the history arrives whole (the view under fileViewChars, the suite under the
    trigger and error lines kept): nothing is reduced on arrival. The view reduced again at the cold
    call counts under its pass's row on that call and every later one; before the fix the on-arrival
    line summed those rows (2 x the batch, found by the Claude Code cold-start e2e: 3,897 tokens "on
    arrival" for a 1,299-token batch at call 11 of 12)."""
    s, _, _ = _history()
    lm = _plugin(tmp_path, "normal")
    _calls(lm, s.messages, [0.0, 1860.0, 1920.0])
    assert lm.ledger is not None
    rows = lm.ledger.calls("s")
    batch = rows[1].evicted_tokens
    assert batch > 0 and rows[2].saved_by_pass.get("fileview") == batch  # the rows do count it
    text = _status(lm)
    assert "on arrival: new tool output reduced, 0 tokens saved" in text, text
    assert f"1 batch reduced old outputs again, {batch:,} tokens" in text, text
    data = json.loads(status.run(lm.ledger, lm.registry, lm.config, "s", as_json=True))
    assert data["modeWork"]["savedOnArrival"] == 0
    assert data["modeWork"]["reducedAgainTokens"] == batch


def test_status_counts_what_arrival_reduced_once_per_call_the_output_is_sent(tmp_path: Path) -> None:
    """A listing over fileViewChars is reduced on arrival: the on-arrival line is its saving summed
    over the calls that send it, as the ledger's rows say, with no cold start in between."""
    s = Session("List the build outputs")
    listing = "\n".join(f"-rw-r--r-- 1 u g {i * 37} Jan 1 build/obj_{i}.o" for i in range(900))
    assert len(listing) > 24_000
    s.call("ls -la build/", listing)
    lm = _plugin(tmp_path, "normal")
    _calls(lm, s.messages, [0.0, 10.0, 20.0])
    assert lm.ledger is not None
    rows = lm.ledger.calls("s")
    per_call = [
        sum(v for k, v in r.saved_by_pass.items() if k not in ("call ids", "stabilizer")) for r in rows
    ]
    assert per_call[0] > 0 and not any(r.evicted_tokens for r in rows)
    assert f"on arrival: new tool output reduced, {sum(per_call):,} tokens saved" in _status(lm)


def test_a_cold_start_s_reduction_names_the_answers_whose_thinking_it_invalidated(tmp_path: Path) -> None:
    """The change starts at the view's message and the cold call held ``n`` messages: the answers in
    between were produced over the whole view. The range survives a restart and is the same on every
    later call; the thinking of a compaction's leftovers joins it, merged."""
    s, view, _ = _history()
    lm = _plugin(tmp_path, "normal")
    _calls(lm, s.messages, [0.0, 1860.0, 1920.0])
    state = lm.session("s").evictor.state
    held = len(s.messages) + 2  # the second call's history
    assert state.past_changes == [(view, held)]
    assert stale_ranges(state, binds=True) == [(view, held)]
    assert stale_ranges(state, binds=False) == []
    restored = _plugin(tmp_path, "normal").session("s").evictor.state
    assert restored.past_changes == state.past_changes
    state.thinking_before = view + 1  # a compaction kept whole from just after the view
    assert stale_ranges(state, binds=True) == [(0, held)]
    assert stale_ranges(state, binds=False) == [(0, view + 1)]


def test_the_prompt_the_host_tells_closes_the_running_task_at_the_cold_start(tmp_path: Path) -> None:
    """OpenClaw hands ``assemble()`` the history without the turn's own prompt: at the cold start after
    a pause, the running task looks unfinished and its view stays whole. Told the prompt that follows
    (a new goal), the task is finished at that very call and its view is reduced again there, at the
    free break; told a continuation ("go on"), it stays whole. The prompt itself is never sent."""
    s = Session("Fix the parser in parser.py")
    view = s.call("cat parser.py", VIEW) + 1
    for k in range(7):
        s.call(f"sed -n '{k + 1}p' parser.py", f"def parser_{k}(x):")
    s.say("The parser is fixed.")

    def cold(prompt: str | None, name: str) -> list[dict[str, Any]]:
        session = _plugin(tmp_path / name, "normal").session("s")
        session.before_model_call(s.messages, api="anthropic", now=0.0)
        session.evictor.upcoming = None if prompt is None else Message("user", [TextPart(prompt)])
        return session.before_model_call(s.messages, api="anthropic", now=1860.0)

    untold, cont, told = cold(None, "u"), cold("go on", "c"), cold("Now add a docstring to utils.py", "t")
    assert VIEW in untold[view]["content"] and VIEW in cont[view]["content"]
    assert VIEW not in told[view]["content"] and stub_keys(told[view]["content"])
    assert len(told) == len(untold) == len(s.messages)  # what the host sends after it is its own
