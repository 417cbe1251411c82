"""Finished tasks leave the context: goal boundaries, one archived summary per task, nothing lost."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from eviction_helpers import call, result, text

from lightmem_plugin.config import Config
from lightmem_plugin.eviction.collapse import short_goal
from lightmem_plugin.eviction.goals import finished_tasks, goal_tasks, is_goal
from lightmem_plugin.eviction.heuristic import HeuristicEstimator
from lightmem_plugin.eviction.horizon import remaining_in_session, remaining_in_task
from lightmem_plugin.measure.replay import LightMemPolicy
from lightmem_plugin.measure.retention import RetentionTracker
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.measure.traces.continuous import chain
from lightmem_plugin.model import Message, TextPart, ToolResultPart
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys
from lightmem_plugin.store.registry import Registry
from lightmem_plugin.store.search_index import SearchIndex
from lightmem_plugin.store.session_state import StateStore
from lightmem_plugin.views.search import recover_call
from lightmem_plugin.wire.anthropic import codec as anthropic

DATA = Path(__file__).resolve().parents[1] / "data"
SWE = [
    DATA / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz",
    DATA / "deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz",
]


# -- goals -----------------------------------------------------------------------------------------
def test_a_goal_is_a_user_message_of_the_users_own_words() -> None:
    assert is_goal(text("user", "Fix the failing test"))
    assert not is_goal(text("user", "<system-reminder>\nfiles changed\n</system-reminder>"))
    assert not is_goal(Message("user", [ToolResultPart("c1", [TextPart("ok")])]))
    assert not is_goal(text("assistant", "done"))


def test_each_goal_owns_the_work_up_to_the_next_goal() -> None:
    msgs = [
        text("system", "sys"),
        text("user", "task one"),
        call("c1", "ls"),
        result("c1", "a.py"),
        text("assistant", "Done with one."),
        text("user", "<system-reminder>context</system-reminder>"),  # context before goal 2 stays
        text("user", "task two"),
        call("c2", "cat a.py"),
        result("c2", "print(1)"),
    ]
    tasks = goal_tasks(msgs)
    assert [(t.goal, t.first, t.last) for t in tasks] == [(1, 2, 4), (6, 7, 8)]
    assert [t.number for t in finished_tasks(msgs)] == [1]  # the last goal is still running


def test_an_answer_to_the_agents_question_continues_its_task() -> None:
    msgs = [
        text("user", "Find the bug"),
        call("c1", "grep -rn bug ."),
        result("c1", "a.py:3: bug"),
        text("assistant", "The bug is in a.py line 3. Shall I fix it?"),
        text("user", "yes please"),
        call("c2", "sed -i s/bug/fix/ a.py"),
        result("c2", ""),
        text("assistant", "Fixed."),
        text("user", "Now update the changelog"),
    ]
    tasks = goal_tasks(msgs)
    assert [(t.goal, t.first, t.last) for t in tasks] == [(0, 1, 7), (8, 9, 8)]


def test_a_developer_message_ends_the_work_a_system_note_inside_it_does_not() -> None:
    msgs = [
        text("user", "one"),
        call("c1", "ls"),
        result("c1", "x"),
        text("developer", "new rules"),
        call("c2", "ls"),
        result("c2", "y"),
        text("user", "two"),
    ]
    assert (goal_tasks(msgs)[0].first, goal_tasks(msgs)[0].last) == (1, 2)
    msgs[3] = text("system", "The user hasn't heard from you in a while")
    assert (goal_tasks(msgs)[0].first, goal_tasks(msgs)[0].last) == (1, 5)


# -- horizon ---------------------------------------------------------------------------------------
def test_the_horizon_comes_from_the_sessions_own_tasks() -> None:
    # before any task finished: the prior, then half the task's age once it ran longer
    assert remaining_in_task(5, [], 20) == 15
    assert remaining_in_task(60, [], 20) == 30
    # after: the median finished task, less what the current one already ran
    assert remaining_in_task(10, [100, 140, 120], 20) == 110
    assert remaining_in_session(0, [100], 20) >= remaining_in_task(0, [100], 20) >= 1


# -- the whole path on a real continuous session ---------------------------------------------------
def _chained(tmp_path: Path) -> Any:
    doc = chain([load_trace(p) for p in SWE], "chain-test")
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return load_trace(path), doc


def _run(tmp_path: Path, mode: str, trace: Any) -> tuple[LightMem, list[list[dict[str, Any]]]]:
    lm = LightMem(config=Config(mode=mode), registry=Registry(tmp_path / f"reg-{mode}"))  # type: ignore[arg-type]
    s = lm.session("chain")
    return lm, [s.before_model_call(c.prompt) for c in trace.calls]


def test_a_finished_task_leaves_as_one_recoverable_summary(tmp_path: Path) -> None:
    trace, doc = _chained(tmp_path)
    lm, outs = _run(tmp_path, "aggressive", trace)
    s = lm.session("chain")
    collapses = s.evictor.state.collapses
    assert [c.number for c in collapses] == [1], "task 1 must leave once task 2 runs"
    c = collapses[0]
    second = doc["tasks"][1]["first_message"]
    final = outs[-1]
    original = trace.calls[-1].prompt
    # the first goal (a long PR description) keeps its first lines and a stub whose key recovers it
    # whole; its work is one assistant message; task 2 follows unchanged
    request = str(original[1]["content"])
    assert c.goal == 1 and len(request) > 2 * Config().eviction.goalKeepChars
    head, stub = str(final[1]["content"]).rsplit("\n", 1)
    assert request.startswith(head + "\n") and len(head) <= Config().eviction.goalKeepChars
    assert stub_keys(stub) == [c.key] and final[1]["role"] == "user"
    assert final[2]["role"] == "assistant" and stub_keys(str(final[2]["content"])) == [c.key]
    assert final[3]["content"] == original[second]["content"]
    assert len(final) == len(original) - (c.last - c.first)
    # every tool output of task 1 comes back whole from the summary's key, line for line
    archived = lm.registry.recover(c.key)
    lines = stub.split('lines="')[1].split('"')[0].split(":")
    assert "\n".join(archived.split("\n")[int(lines[0]) - 1 : int(lines[1])]) == request
    for m in original[c.first : c.last + 1]:
        if m["role"] == "tool":
            assert str(m["content"]) in archived
    # no tool message is left without its call (valid for every API)
    for out in outs:
        called = {tc["id"] for m in out if m["role"] == "assistant" for tc in m.get("tool_calls") or ()}
        assert all(m["tool_call_id"] in called for m in out if m["role"] == "tool" and "tool_call_id" in m)


def test_the_summary_says_how_to_find_a_line_of_the_task_and_the_search_does(tmp_path: Path) -> None:
    """A task's archive has no index of its calls: the summary names the search, and the search finds
    a line of one of the task's outputs with the recover call that prints it from the task's archive."""
    trace, _ = _chained(tmp_path)
    lm, outs = _run(tmp_path, "aggressive", trace)
    (c,) = lm.session("chain").evictor.state.collapses
    summary = next(
        str(m["content"]) for m in outs[-1] if m["role"] == "assistant" and c.key in str(m["content"])
    )
    assert "lightmem2_search finds A:B" in summary.splitlines()[0]
    original = trace.calls[-1].prompt
    outputs = [str(m["content"]) for m in original[c.first : c.last + 1] if m["role"] == "tool"]
    needle = next(
        line for out in outputs for line in out.splitlines() if len(line) > 40 and "lightmem2" not in line
    )
    index = SearchIndex(tmp_path / "search.sqlite3")
    index.rebuild(lm.registry, "chain")
    found = index.search(f'"{needle.strip()}"', session="chain", limit=200)
    hits = [h for h in found if h.key.startswith(c.key)]  # the stub names a claimed prefix of the key
    assert hits, needle
    a, b = recover_call(hits[0]).split("--lines ")[1].split(":")
    assert lm.registry.recover(c.key, f"{a}:{b}").rstrip("\n") == needle


def test_a_short_request_stays_whole(tmp_path: Path) -> None:
    """Only a request long enough to pay leaves with its task; with goalKeepChars 0 none does."""
    trace, _ = _chained(tmp_path)
    cfg = Config(mode="aggressive")
    cfg = cfg.model_copy(update={"eviction": cfg.eviction.model_copy(update={"goalKeepChars": 0})})
    s = LightMem(config=cfg, registry=Registry(tmp_path / "reg0")).session("s")
    outs = [s.before_model_call(c.prompt) for c in trace.calls]
    assert s.evictor.state.collapses and all(c.goal == -1 for c in s.evictor.state.collapses)
    assert outs[-1][1] == trace.calls[-1].prompt[1]
    assert short_goal("a\n" * 300, 1, "k" * 32, 600) is None  # 600 chars: not worth a stub
    assert short_goal("x" * 5000, 1, "k" * 32, 600).startswith("x" * 600 + "[lightmem2: ")  # type: ignore[union-attr]


def test_the_prefix_changes_only_at_batches_and_aggressive_costs_less(tmp_path: Path) -> None:
    trace, _ = _chained(tmp_path)
    lm, outs = _run(tmp_path, "aggressive", trace)
    s = lm.session("chain")
    batch_calls = [b.call_index for b in s.evictor.state.batches]
    breaks = [
        i + 1
        for i in range(1, len(outs))
        if outs[i][: len(outs[i - 1]) - 1] != outs[i - 1][: len(outs[i - 1]) - 1]
    ]
    assert breaks == batch_calls and batch_calls
    sent = sum(len(json.dumps(o)) for o in outs)
    _, plain = _run(tmp_path, "normal", trace)
    assert sent < 0.8 * sum(len(json.dumps(o)) for o in plain)


def test_repeats_never_point_into_a_task_that_left(tmp_path: Path) -> None:
    trace, _ = _chained(tmp_path)
    _, outs = _run(tmp_path, "aggressive", trace)
    for out in outs:
        ids = {tc["id"] for m in out if m["role"] == "assistant" for tc in m.get("tool_calls") or ()}
        for m in out:
            body = str(m.get("content") or "")
            if "identical to the output of tool call " in body:
                ref = body.split("identical to the output of tool call ", 1)[1].split(" ", 1)[0]
                assert ref in ids


def test_retention_counts_uses_of_the_agents_own_words_and_judges_them(tmp_path: Path) -> None:
    trace, doc = _chained(tmp_path)
    lm, outs = _run(tmp_path, "aggressive", trace)
    first = trace.calls[-1].prompt[: doc["tasks"][1]["first_message"]]
    said = next(str(m["content"]) for m in first if m["role"] == "assistant" and len(str(m["content"])) > 60)
    quoting = {"role": "assistant", "content": f"As I wrote in the first task: {said}"}

    def judge(prompts: list[list[dict[str, Any]]], lookup: Any) -> Any:
        tracker = RetentionTracker(lookup)
        for i, (c, out) in enumerate(zip(trace.calls, prompts, strict=True)):
            tracker.add_call(c.prompt, out, quoting if i == len(prompts) - 1 else c.output)
        return tracker.result()

    plain = judge([c.prompt for c in trace.calls], lambda k: None)
    r = judge(outs, lm.registry.recover)
    # the quote of task 1's words: kept as the host sends it, recoverable once task 1 left, never lost
    assert plain.said_recoverable == 0 and plain.said_lost == 0
    assert r.said_recoverable >= 1 and r.said_lost == 0
    assert r.said_kept + r.said_recoverable + r.said_lost == r.said_uses == plain.said_uses
    assert r.task_uses and r.task_kept_fraction >= 0.9


def test_a_restarted_process_continues_with_the_same_bytes(tmp_path: Path) -> None:
    trace, _ = _chained(tmp_path)
    cfg = Config(mode="aggressive")

    def plugin() -> LightMem:
        return LightMem(config=cfg, registry=Registry(tmp_path / "reg"), states=StateStore(tmp_path / "s.db"))

    straight = LightMem(config=cfg, registry=Registry(tmp_path / "reg")).session("s")
    want = [straight.before_model_call(c.prompt) for c in trace.calls]
    assert straight.evictor.state.collapses
    got: list[list[dict[str, Any]]] = []
    lm = plugin()
    for i, c in enumerate(trace.calls):
        if i and i % 40 == 0:
            lm = plugin()  # a new process: the session comes back from the store
        got.append(lm.session("s").before_model_call(c.prompt))
    assert got == want


def _anthropic_bodies() -> list[dict[str, Any]]:
    """A Messages API session as Claude Code sends it: two goals, tool_use / tool_result pairs."""

    def listing(k: int) -> str:
        return "\n".join(
            f"src/m{k}/mod_{i}.py: def handler_{i}(request): return respond({i * k})" for i in range(150)
        )

    messages: list[dict[str, Any]] = []
    bodies = []

    def send() -> None:
        bodies.append({"model": "m", "max_tokens": 100, "system": "You code.", "messages": list(messages)})

    for goal, n in (("Find every handler", 12), ("Now rename handler_3", 15)):
        messages.append({"role": "user", "content": [{"type": "text", "text": goal}]})
        send()
        for i in range(n):
            tid = f"toolu_{goal[:3]}{i}"
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": tid,
                            "name": "Bash",
                            "input": {"command": f"grep -rn handler src/ # {i}"},
                        }
                    ],
                }
            )
            body = listing(i) if goal.startswith("Find") else f"{i} lines"
            messages.append(
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": body}]}
            )
            send()
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Done: {goal}."}]})
    return bodies


def test_the_collapsed_request_is_valid_on_the_messages_api(tmp_path: Path) -> None:
    cfg = Config.model_validate({"mode": "aggressive", "stabilizer": {"shortCallIds": False}})  # verbatim ids
    lm = LightMem(config=cfg, registry=Registry(tmp_path / "reg"))
    s = lm.session("wire")
    bodies = _anthropic_bodies()
    sent = [anthropic.encode_request(s.process(anthropic.decode_request(b))) for b in bodies]
    assert s.evictor.state.collapses, "task 1 must leave during task 2"
    last, original = sent[-1], bodies[-1]
    assert len(last["messages"]) < len(original["messages"])
    roles = [m["role"] for m in last["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles))  # user and assistant alternate
    called: set[str] = set()
    for m in last["messages"]:  # every tool result answers a call made before it
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b.get("type") == "tool_use":
                called.add(b["id"])
            elif b.get("type") == "tool_result":
                assert b["tool_use_id"] in called
    assert last["messages"][0] == original["messages"][0]  # the first goal, verbatim
    assert last["messages"][2:] == original["messages"][-len(last["messages"]) + 2 :]  # task 2, verbatim
    keys = stub_keys(json.dumps(last["messages"][1]))
    assert keys and "def handler_149" in lm.registry.recover(keys[0])


def test_report_names_the_batch_that_collapsed_a_task(tmp_path: Path) -> None:
    from lightmem_plugin.store.ledger import Ledger
    from lightmem_plugin.views.report import session_text

    ledger = Ledger(tmp_path / "ledger.sqlite3")
    lm = LightMem(config=Config(mode="aggressive"), registry=Registry(tmp_path / "reg"), ledger=ledger)
    s = lm.session("rep")
    for b in _anthropic_bodies():
        s.process(anthropic.decode_request(b))
    (collapse,) = s.evictor.state.collapses
    text = session_text("rep", ledger.calls("rep"))
    assert f"call {collapse.call_index} at " in text
    assert f"eviction batch: task 1 finished (archived as {collapse.key})" in text
    assert "evictions: 1 batches" in text


def test_a_recover_made_in_a_task_that_left_is_charged_until_then(tmp_path: Path) -> None:
    """K charged: what the agent recovered inside task 1 leaves with task 1 (replay's left_at)."""
    trace, _ = _chained(tmp_path)
    policy = LightMemPolicy(trace, "aggressive", tmp_path / "p")
    for i, c in enumerate(trace.calls):
        policy.transform(i, c.prompt)
    state = policy.session.evictor.state
    (collapse,) = state.collapses
    in_task_1 = state.goal_calls[1] - 3  # 1-based call of goal 2, minus two calls, as 0-based
    assert policy.left_at(in_task_1) == collapse.call_index - 1 > in_task_1
    assert policy.left_at(len(trace.calls) - 1) is None  # the last task never left


def _estimated(goal: str, span: list[Message]) -> HeuristicEstimator:
    """The heuristic estimator after the user's ``goal`` and the calls of ``span``."""
    estimator = HeuristicEstimator()
    estimator.sync([text("user", goal), *span])
    return estimator


def test_a_summary_says_what_ran_after_the_last_reply() -> None:
    """The agent said "Let me remove them." and the Edit then ran: a summary that ended on that reply
    told the model the removal was still to do (a Claude Code trace)."""
    from lightmem_plugin.eviction.collapse import summary
    from lightmem_plugin.model import ToolCallPart

    edit = ToolCallPart(
        "e1", "Edit", json.dumps({"file_path": "lib/app.ex", "old_string": "x", "new_string": ""})
    )
    span = [
        call("c1", "rg helpers lib"),
        result("c1", "lib/app.ex:3: defp helper_a"),
        Message("assistant", [TextPart("The duplicate helpers are unused. Let me remove them."), edit]),
        result("e1", "The file lib/app.ex has been updated."),
    ]
    estimator = _estimated("Drop the unused helpers", span)
    events = estimator.log.events  # the calls as the evictor passes them, labelled by the estimator
    text_ = summary(1, "k" * 12, span, events, ())
    assert "Last reply:\nThe duplicate helpers are unused. Let me remove them." in text_
    assert "Then it made 1 more tool call: Edit lib/app.ex" in text_
    # a task that ended talking says nothing more
    assert "Then it made" not in summary(1, "k" * 12, [*span, text("assistant", "Removed.")], events, ())


def _answered(*calls: tuple[str, str]) -> list[Message]:
    """One bash call and its result per (command, output), in order."""
    return [m for n, (cmd, out) in enumerate(calls, 1) for m in (call(f"c{n}", cmd), result(f"c{n}", out))]


def test_a_command_that_passed_on_its_last_run_did_not_end_failing() -> None:
    """The suite failed as ``pytest tests/ -x 2>&1 | tail -50`` and passed as ``... | tail -20``: one
    command seen through two tails. The summary of a continuous chain still said it ended failing."""
    from lightmem_plugin.eviction.session_record import task_facts

    failed = (
        "<returncode>0</returncode>\n<output>\nFAILED tests/test_u.py::test_a - KeyError\n1 failed\n</output>"
    )
    passed = "<returncode>0</returncode>\n<output>\n12 passed in 0.31s\n</output>"
    broken = "<returncode>1</returncode>\n<output>\nE   ModuleNotFoundError: No module named 'x'\n</output>"
    span = _answered(
        ("cd /testbed && python -m pytest tests/ -x 2>&1 | tail -50", failed),
        ("python -m pytest tests/test_v.py 2>&1", broken),
        ("cd /testbed && python -m pytest tests/ -x 2>&1 | tail -n 20", passed),
    )
    estimator = _estimated("Fix the suite", span)
    facts = task_facts(estimator.log.events, ())
    assert facts.failing == (
        ("python -m pytest tests/test_v.py 2>&1", "E   ModuleNotFoundError: No module named 'x'"),
    )
    assert (facts.tests, facts.last_test_failed) == (3, None)


def test_a_run_superseded_by_a_later_one_under_its_label_did_not_end_failing() -> None:
    """The agent's inline test script failed on its settings (dummy database) and its next version
    (sqlite) passed: two commands, one label. The summary said the last test passed and, below,
    ``Ended failing`` under that same label. A failure under another label still ends failing."""
    from lightmem_plugin.eviction.collapse import summary
    from lightmem_plugin.eviction.session_record import task_facts

    def script(engine: str) -> str:
        return (
            f'cd /testbed && python -c "\nimport django\nfrom django.conf import settings\n'
            f"settings.configure(DATABASES={{'default': {{'ENGINE': '{engine}'}}}})\ndjango.setup()\n"
            "import unittest\nsuite = unittest.TestLoader().loadTestsFromTestCase(ShellCommandTestCase)\n"
            'unittest.TextTestRunner(verbosity=2).run(suite)\n"'
        )

    broken = (
        "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
        '  File "<string>", line 5, in <module>\n'
        "ModuleNotFoundError: No module named 'sqlparse'\n</output>"
    )
    ran = "<returncode>0</returncode>\n<output>\nRan 15 tests in 0.002s\n\nOK\n</output>"
    other = "<returncode>1</returncode>\n<output>\nError: bad option --x\n</output>"
    span = _answered(
        ("python check.py --x", other),
        (script("django.db.backends.dummy"), broken),
        (script("django.db.backends.sqlite3"), ran),
    )
    estimator = _estimated("Fix the shell command", span)
    events = estimator.log.events
    assert events[1].command != events[2].command and events[1].label == events[2].label
    assert events[1].failed and not events[2].failed
    facts = task_facts(events, ())
    assert facts.failing == (("python check.py --x", "Error: bad option --x"),)
    shown = summary(1, "k" * 12, span, events, ()).splitlines()
    assert [line for line in shown if line.startswith("Ended failing")] == [
        "Ended failing: `python check.py --x` -> Error: bad option --x"
    ]
    # the crashed version ran no test (no runner's summary): one test run, and it passed
    assert any(
        line.startswith("Tests run 1x; last `python -c") and line.endswith(" passed") for line in shown
    )


def test_a_removed_file_is_deleted_not_modified_and_a_removed_scratch_file_is_not_listed() -> None:
    """`rm old_module.py` was listed under "Files modified" and a scratch script the agent wrote and
    removed under "Files created": the next task could look for files that are not there."""
    from lightmem_plugin.eviction.collapse import summary
    from lightmem_plugin.eviction.session_record import task_facts

    ok = "<returncode>0</returncode>\n<output>\n</output>"
    span = _answered(
        ("cat > /testbed/scratch.py << 'EOF'\nprint(1)\nEOF", ok),
        ("sed -i 's/a/b/' /testbed/src/app.py", ok),
        ("rm /testbed/scratch.py /testbed/src/old_module.py", ok),
        ("cat > /testbed/notes.md << 'EOF'\nkept\nEOF", ok),
    )
    estimator = _estimated("Drop the old module", span)
    created = frozenset(estimator.live.created)
    facts = task_facts(estimator.log.events, created)
    assert (facts.modified, facts.created, facts.deleted) == (
        ("/testbed/src/app.py",),
        ("/testbed/notes.md",),
        ("/testbed/src/old_module.py",),
    )
    shown = summary(1, "k" * 12, span, estimator.log.events, created)
    assert "Files deleted: /testbed/src/old_module.py" in shown and "scratch.py" not in shown


def test_a_summary_says_how_the_tests_that_ran_ended() -> None:
    """A continuous chain's summary said ``Tests run 1x; last `python -m pytest ...` failed: No module
    named pytest`` of a task whose suite then passed through a script, and said a failing last test
    twice (on its Tests line and again as ``Ended failing``)."""
    from lightmem_plugin.eviction.collapse import summary

    missing = (
        "<returncode>0</returncode>\n<output>\n/opt/miniconda3/bin/python: No module named pytest\n</output>"
    )
    ran = "<returncode>0</returncode>\n<output>\nRan 15 tests in 0.001s\n\nOK\n</output>"
    span = _answered(
        ("cd /testbed && python -m pytest tests/queries/test_q.py -v 2>&1 | tail -50", missing),
        ("cd /testbed && python run_q_tests.py 2>&1 | tail -50", ran),
    )
    estimator = _estimated("Fix Q", span)
    shown = summary(1, "k" * 12, span, estimator.log.events, ()).splitlines()
    assert "Tests run 1x; last `python run_q_tests.py 2>&1 | tail -50` passed" in shown
    assert "Ended failing: `python -m pytest tests/queries/test_q.py -v 2>&1 | tail -50` -> " in "\n".join(
        shown
    )

    failing = (
        "<returncode>1</returncode>\n<output>\nFAILED t.py::test_a - KeyError\n1 failed in 0.1s\n</output>"
    )
    span = _answered(("python -m pytest t.py", failing))
    estimator = _estimated("Fix t", span)
    shown = summary(1, "k" * 12, span, estimator.log.events, ()).splitlines()
    assert "Tests run 1x; last `python -m pytest t.py` failed: FAILED t.py::test_a - KeyError" in shown
    assert not [line for line in shown if line.startswith("Ended failing")]


def test_a_file_a_script_wrote_new_is_created_and_one_it_rewrote_is_modified() -> None:
    """A continuous chain's summary listed ``testapp/models.py`` and ``model_checks.py.fixed``, new files
    the agent's Python scripts wrote, under "Files modified" beside the one module it changed."""
    from lightmem_plugin.eviction.session_record import task_facts

    ok = "<returncode>0</returncode>\n<output>\n</output>"
    writer = (
        "cat > make_app.py << 'EOF'\nwith open('/testbed/testapp/models.py', 'w') as f:\n    f.write('x')\n"
        "src = '/testbed/pkg/checks.py'\nwith open(src) as f:\n    s = f.read()\nwith open(src, 'w') as f:\n"
        "    f.write(s.replace('a', 'b'))\nEOF\npython make_app.py"
    )
    span = _answered((writer, ok))
    estimator = _estimated("Fix the check", span)
    facts = task_facts(estimator.log.events, frozenset(estimator.live.created))
    assert facts.modified == ("/testbed/pkg/checks.py",)
    assert set(facts.created) == {"make_app.py", "/testbed/testapp/models.py"}
