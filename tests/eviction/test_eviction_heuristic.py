"""The heuristic estimator: segmentation, lifecycle from signals, determinism, incrementality, speed."""

from __future__ import annotations

import time
from typing import Any

import pytest
from eviction_helpers import ASTROID, DJANGO, load_trace, retry_session

from lightmem_plugin.eviction.entries import of_chat, turn_text
from lightmem_plugin.eviction.heuristic import HeuristicEstimator
from lightmem_plugin.eviction.lifecycle import TaskRegistry, TaskUpdate
from lightmem_plugin.model import Message


def run_batches(messages: list[Message], every: int = 3, **kw: Any) -> tuple[TaskRegistry, list[Any]]:
    """Estimate and apply every ``every`` assistant turns, like the pipeline does."""
    est, reg = HeuristicEstimator(**kw), TaskRegistry()
    history = []
    turns = [i + 1 for i, m in enumerate(messages) if m.role == "tool"]
    for n in [*turns[::every], len(messages)]:
        result = reg.apply(est.estimate(messages[:n], reg), max_turn=n - 1)
        assert result.rejected == (), [r.reason for r in result.rejected]
        history.append((n, reg.chunks))
    return reg, history


def test_hand_written_session_lifecycle() -> None:
    s, at = retry_session()
    est, reg = HeuristicEstimator(), TaskRegistry()
    states = {}
    for n in range(3, len(s.messages) + 1):
        reg.apply(est.estimate(s.turns[:n], reg), max_turn=n - 1)
        states[n] = {c.id: c.lifecycle for c in reg.chunks}
    # h1 (the first goal's work) closes when the second goal arrives, then becomes evictable a batch later
    assert states[at["goal2"]] == {"h1": "active"}
    assert states[at["goal2"] + 1] == {"h1": "completed"}
    assert states[at["goal2"] + 2] == {"h1": "evictable"}
    assert states[at["goal2"] + 3] == {"h1": "evictable", "h2": "active"}
    h1, h2 = reg.chunks
    assert h1.turns == (at["ls"], at["goal2"] - 1) and h2.turns == (at["cat_cli"], len(s.messages) - 1)
    assert h1.objective == "edit client.py; create client_retry.py; run tests"
    assert f"user set a new goal at turn {at['goal2']}" in h1.evidence
    assert h1.evictable_reason and not h1.open_questions
    assert h2.lifecycle == "active" and any("failed: ImportError" in q for q in h2.open_questions)


def test_phase_change_closes_a_chunk() -> None:
    """Investigating again after editing and testing starts a new chunk within one goal."""
    s, at = retry_session()
    messages = s.messages[: at["goal2"]]
    extra = len(messages)
    messages += [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "x",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "cat setup.py"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "x",
            "content": "<returncode>0</returncode>\n<output>\nsetup()\n</output>",
        },
    ]
    est = HeuristicEstimator()
    updates = est.estimate(of_chat(messages), TaskRegistry())
    assert [(u.task_id, u.turns) for u in updates] == [
        ("h1", (at["ls"], extra - 1)),
        ("h2", (extra, extra + 1)),
    ]
    assert updates[0].lifecycle == "completed" and updates[1].lifecycle == "active"


def dump(updates: list[TaskUpdate]) -> list[dict[str, Any]]:
    return [u.model_dump() for u in updates]


def test_deterministic_across_instances() -> None:
    messages = of_chat(load_trace(ASTROID)["messages"])
    runs = []
    for _ in range(2):
        est, reg, out = HeuristicEstimator(), TaskRegistry(), []
        for n in range(10, len(messages) + 1, 6):
            updates = est.estimate(messages[:n], reg)
            reg.apply(updates, max_turn=n - 1)
            out.append(dump(updates))
        runs.append((out, reg.to_dict()))
    assert runs[0] == runs[1]


def test_incremental_and_cold_agree_on_chunks() -> None:
    messages = of_chat(load_trace(ASTROID)["messages"])
    reg, _ = run_batches(messages)
    cold = TaskRegistry()
    cold.apply(HeuristicEstimator().estimate(messages, cold), max_turn=len(messages) - 1)
    assert [(c.id, c.turns, c.objective) for c in reg.chunks] == [
        (c.id, c.turns, c.objective) for c in cold.chunks
    ]


@pytest.mark.parametrize("path", [ASTROID, DJANGO], ids=["astroid", "django"])
def test_real_traces_progress_without_rejections(path: Any) -> None:
    messages = of_chat(load_trace(path)["messages"])
    reg, history = run_batches(messages)
    chunks = reg.chunks
    assert len(chunks) >= 5
    assert chunks[-1].lifecycle == "active", "the current task is never evictable"
    assert sum(c.lifecycle == "evictable" for c in chunks) >= 2
    for c in chunks:
        assert c.turns[0] > 1, "the system prompt and the first user goal belong to no chunk"
    # once a chunk is completed its range never moves again
    frozen: dict[str, tuple[int, int]] = {}
    for _, snapshot in history:
        for c in snapshot:
            if c.id in frozen:
                assert c.turns == frozen[c.id]
            elif c.lifecycle in ("completed", "evictable"):
                frozen[c.id] = c.turns


def test_probe_policy_orders_evictable_share() -> None:
    messages = of_chat(load_trace(ASTROID)["messages"])

    def evictable_chars(probes: str) -> int:
        reg, _ = run_batches(messages, probes=probes)
        return sum(
            len(turn_text(messages[i]))
            for c in reg.chunks
            if c.lifecycle == "evictable"
            for i in range(c.turns[0], c.turns[1] + 1)
        )

    none, runs, reads = evictable_chars("none"), evictable_chars("runs"), evictable_chars("reads")
    assert none < runs <= reads


def test_leaves_ranges_covered_by_another_estimator_alone() -> None:
    messages = of_chat(load_trace(ASTROID)["messages"][:100])
    reg = TaskRegistry()
    foreign = TaskUpdate(task_id="t1", lifecycle="active", objective="llm chunk", turns=(2, 30))
    assert reg.apply([foreign]).rejected == ()
    updates = HeuristicEstimator().estimate(messages, reg)
    assert updates and all(u.turns is not None and u.turns[0] > 30 for u in updates)
    assert reg.apply(updates, max_turn=99).rejected == ()


def test_steady_state_speed_on_a_200_message_session() -> None:
    messages = of_chat(load_trace(DJANGO)["messages"])
    assert len(messages) >= 200
    best: dict[int, float] = {}
    for _ in range(3):
        est, reg = HeuristicEstimator(), TaskRegistry()
        for n in range(20, len(messages) + 1, 6):
            start = time.perf_counter()
            reg.apply(est.estimate(messages[:n], reg), max_turn=n - 1)
            elapsed = time.perf_counter() - start
            best[n] = min(best.get(n, elapsed), elapsed)
    late = sorted(v for n, v in best.items() if n >= 150)
    assert late[len(late) // 2] < 0.005, f"median {late[len(late) // 2] * 1e3:.2f} ms"
