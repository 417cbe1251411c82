"""Task chunks and the registry: DESIGN 5 validation rules, atomic updates, versioning, persistence."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from lightmem_plugin.errors import EstimatorError
from lightmem_plugin.eviction.lifecycle import TaskRegistry, TaskUpdate, TaskUpdateBatch


def up(tid: str, lifecycle: str, **kw: object) -> TaskUpdate:
    return TaskUpdate.model_validate({"taskId": tid, "lifecycle": lifecycle, **kw}, strict=False)


def seeded() -> TaskRegistry:
    """t1 completed (turns 2-9), t2 active (10-15)."""
    reg = TaskRegistry()
    result = reg.apply(
        [
            up("t1", "completed", objective="inspect parser", turns=(2, 9), evidence=["read superseded"]),
            up("t2", "active", objective="edit parser", turns=(10, 15)),
        ]
    )
    assert result.rejected == ()
    return reg


@pytest.mark.parametrize(
    ("update", "reason_part"),
    [
        (up("t9", "active", turns=(20, 25)), "needs objective and turns"),
        (up("t9", "active", objective="x"), "needs objective and turns"),
        (up("t9", "completed", objective="x", turns=(20, 25)), "completed needs evidence"),
        (up("t9", "active", objective="x", turns=(25, 20)), "need 0 <= first <= last"),
        (up("t9", "active", objective="x", turns=(-1, 20)), "need 0 <= first <= last"),
        (up("t9", "active", objective="x", turns=(14, 20)), "overlap task t2"),
        (up("t2", "active", turns=(8, 15)), "overlap task t1"),
        (up("t2", "evictable", evidence=["done"], evictable_reason="r"), "active -> evictable"),
        (
            up("t9", "evictable", objective="x", turns=(20, 25), evidence=["e"], evictable_reason="r"),
            "new -> evictable",
        ),
        (up("t1", "evictable", evictable_reason="r", open_questions=["is X used?"]), "no open questions"),
        (up("t1", "evictable"), "needs an evictableReason"),
    ],
)
def test_invalid_updates_are_rejected_with_a_reason(update: TaskUpdate, reason_part: str) -> None:
    reg = seeded()
    before = reg.to_dict()
    result = reg.apply([update])
    assert [r.reason for r in result.rejected] and reason_part in result.rejected[0].reason
    assert reg.to_dict()["chunks"] == before["chunks"], "a rejected update must not change anything"
    assert reg.version == before["version"] and not result.changed
    assert reg.rejected[-1].reason == result.rejected[0].reason


def test_rejections_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    reg = seeded()
    with caplog.at_level(logging.DEBUG, logger="lightmem_plugin.eviction.lifecycle"):
        reg.apply([up("t2", "completed")])
    assert "t2" in caplog.text and "completed needs evidence" in caplog.text


def test_update_is_validated_whole_before_applying() -> None:
    """An update with a valid lifecycle change but an overlapping range changes nothing at all."""
    reg = seeded()
    result = reg.apply([up("t2", "completed", evidence=["tests pass"], turns=(5, 15))])
    assert result.rejected and reg.get("t2") is not None
    chunk = reg.get("t2")
    assert (
        chunk is not None and chunk.lifecycle == "active" and chunk.evidence == () and chunk.turns == (10, 15)
    )


def test_completed_then_evictable_needs_two_batches() -> None:
    reg = seeded()
    result = reg.apply(
        [up("t2", "completed", evidence=["tests pass"]), up("t2", "evictable", evictable_reason="done")]
    )
    assert [r.update.lifecycle for r in result.rejected] == ["evictable"]
    assert reg.get("t2").lifecycle == "completed"  # type: ignore[union-attr]
    result = reg.apply([up("t2", "evictable", evictable_reason="outputs superseded")])
    assert result.rejected == () and reg.get("t2").lifecycle == "evictable"  # type: ignore[union-attr]


def test_version_bumps_once_per_changing_batch_and_evidence_merges() -> None:
    reg = seeded()
    assert reg.version == 1
    reg.apply([up("t1", "completed", evidence=["read superseded", "tests pass"])])
    assert reg.version == 2 and reg.get("t1").evidence == ("read superseded", "tests pass")  # type: ignore[union-attr]
    reg.apply([up("t1", "completed", evidence=["tests pass"])])  # nothing new
    assert reg.version == 2
    reg.apply([])
    assert reg.version == 2


def test_open_questions_replace_and_clear() -> None:
    reg = seeded()
    reg.apply([up("t1", "completed", open_questions=["q1", "q2"])])
    assert reg.get("t1").open_questions == ("q1", "q2")  # type: ignore[union-attr]
    reg.apply([up("t1", "completed", open_questions=[])])
    assert reg.get("t1").open_questions == ()  # type: ignore[union-attr]


def test_max_turn_bounds_ranges() -> None:
    reg = TaskRegistry()
    result = reg.apply([up("t1", "active", objective="x", turns=(2, 40))], max_turn=30)
    assert result.rejected and "past the last message 30" in result.rejected[0].reason


def test_lookup_helpers() -> None:
    reg = seeded()
    assert [c.id for c in reg.chunks] == ["t1", "t2"]
    assert reg.chunk_at(12).id == "t2" and reg.chunk_at(1) is None  # type: ignore[union-attr]
    assert reg.covered_until() == 15 and reg.covered_until(exclude_prefix="t") == -1
    assert reg.check(up("t2", "completed")) is not None and reg.check(up("t2", "blocked")) is None


@pytest.mark.parametrize(
    "payload",
    [
        '{"taskUpdates": [{"taskId": "t1", "lifecycle": "done"}]}',
        '{"taskUpdates": [{"taskId": "t1", "lifecycle": "active", "turns": [1, "2"]}]}',
        '{"taskUpdates": [{"taskId": "t1", "lifecycle": "active", "extra": 1}]}',
        '{"taskUpdates": [{"taskId": "bad id!", "lifecycle": "active"}]}',
        '{"taskUpdates": [{"taskId": "t1", "lifecycle": "active", "turns": [1, 2, 3]}]}',
        '{"updates": []}',
    ],
)
def test_wire_format_is_strict(payload: str) -> None:
    with pytest.raises(ValidationError):
        TaskUpdateBatch.model_validate_json(payload)


def test_wire_format_accepts_camel_case() -> None:
    batch = TaskUpdateBatch.model_validate_json(
        '{"taskUpdates": [{"taskId": "t1", "lifecycle": "completed", "objective": "o", "turns": [3, 7],'
        ' "evidence": ["e"], "openQuestions": [], "evictableReason": "r"}]}'
    )
    assert batch.task_updates[0].turns == (3, 7) and batch.task_updates[0].open_questions == ()


def test_round_trip_through_json() -> None:
    reg = seeded()
    reg.apply([up("t2", "active", turns=(8, 15))])  # a rejection is persisted too
    data = json.loads(json.dumps(reg.to_dict()))
    back = TaskRegistry.from_dict(data)
    assert back.to_dict() == reg.to_dict()
    assert back.rejected[0].reason == reg.rejected[0].reason


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(version=-1),
        lambda d: d["chunks"][0].update(lifecycle="gone"),
        lambda d: d["chunks"][1].update(turns=[3, 12]),
        lambda d: d["chunks"].append(dict(d["chunks"][0])),
        lambda d: d.update(extra=True),
    ],
)
def test_corrupt_state_raises_estimator_error(mutate: object) -> None:
    data = json.loads(json.dumps(seeded().to_dict()))
    mutate(data)  # type: ignore[operator]
    with pytest.raises(EstimatorError, match="discard the saved state"):
        TaskRegistry.from_dict(data)


_lifecycles = st.sampled_from(["active", "blocked", "completed", "evictable"])
_updates = st.builds(
    lambda tid, lc, obj, a, n, ev, oq, reason: up(
        f"t{tid}",
        lc,
        **({"objective": "o"} if obj else {}),
        **({"turns": (a, a + n)} if a is not None else {}),
        **({"evidence": ev} if ev is not None else {}),
        **({"open_questions": oq} if oq is not None else {}),
        **({"evictable_reason": "r"} if reason else {}),
    ),
    st.integers(1, 4),
    _lifecycles,
    st.booleans(),
    st.one_of(st.none(), st.integers(0, 40)),
    st.integers(0, 8),
    st.one_of(st.none(), st.lists(st.sampled_from(["e1", "e2"]), max_size=2)),
    st.one_of(st.none(), st.lists(st.sampled_from(["q1"]), max_size=1)),
    st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_updates, max_size=5), max_size=6))
def test_invariants_hold_under_any_batches(batches: list[list[TaskUpdate]]) -> None:
    reg = TaskRegistry()
    previous: dict[str, str] = {}
    for batch in batches:
        result = reg.apply(batch)
        chunks = reg.chunks
        for i, c in enumerate(chunks):
            assert c.turns[0] <= c.turns[1]
            assert all(c.turns[1] < o.turns[0] or o.turns[1] < c.turns[0] for o in chunks[i + 1 :])
            if c.lifecycle in ("completed", "evictable"):
                assert c.evidence
            if c.lifecycle == "evictable":
                assert not c.open_questions and c.evictable_reason
                assert previous.get(c.id) in ("completed", "evictable"), "evictable only after completed"
        assert len(result.applied) + len(result.rejected) <= len(batch)
        previous = {c.id: c.lifecycle for c in chunks}
        assert TaskRegistry.from_dict(json.loads(json.dumps(reg.to_dict()))).to_dict() == reg.to_dict()
