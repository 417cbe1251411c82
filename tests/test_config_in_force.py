"""A running session follows its config: an edit of config.json reaches the next call (#40 item 3).

Measured before: editing ``eviction.batchTurns`` mid-session, the next call's ``session.cfg`` said 9 while
the evictor that acts still used 3 (the evictor, stabilizer and dedup index kept the config the session
was created with). :data:`~lightmem_plugin.pipeline.CONFIG_IN_FORCE` says when each section applies; the
per-call sections are checked here key by key, the others must at least be classified.
"""

from __future__ import annotations

import json
import os
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from lightmem_plugin.config import Config, _key_paths, config_path
from lightmem_plugin.pipeline import CONFIG_IN_FORCE, LightMem, Session
from lightmem_plugin.store.registry import Registry

EACH_CALL = ("eviction", "stabilizer", "reduction", "estimator")


def _candidates(model: BaseModel, key: str) -> list[Any]:
    value = getattr(model, key)
    annotation = type(model).model_fields[key].annotation
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1, value * 2]
    if isinstance(value, float):
        return [value * 1.5, value / 2, value + 0.5]
    if isinstance(value, list):
        return [value[:-1], [*value, value[0]] if value else ["x"]]
    args = [a for a in typing.get_args(annotation) if isinstance(a, str | type(None))]
    literals = [a for arg in typing.get_args(annotation) for a in (typing.get_args(arg) or [arg])]
    return [a for a in [*args, *literals, "x", None] if a != value and not isinstance(a, type)]


def _changed(section: BaseModel) -> tuple[dict[str, Any], list[str]]:
    """Every key of ``section`` set to another valid value (checked one by one); the keys with none."""
    changed: dict[str, Any] = {}
    stuck: list[str] = []
    for key in type(section).model_fields:
        if isinstance(getattr(section, key), BaseModel):
            continue
        for candidate in _candidates(section, key):
            try:
                type(section).model_validate({**section.model_dump(), **changed, key: candidate})
            except ValidationError:
                continue
            changed[key] = candidate
            break
        else:
            stuck.append(key)
    return changed, stuck


def _write(config: dict[str, Any]) -> None:
    path = config_path()
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(json.dumps(config))
    stamp = max(path.stat().st_mtime_ns, before) + 1_000_000_000
    os.utime(path, ns=(stamp, stamp))  # a new mtime even within the file system's clock tick


def _call(session: Session, n: int) -> None:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "agent"}, {"role": "user", "content": "go"}]
    for i in range(n):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        msgs += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"out {i}\n" * 30},
        ]
    session.before_model_call(msgs)


def test_every_config_key_is_classified_by_when_it_applies() -> None:
    sections = {p.split(".")[0] for p in _key_paths(Config)}
    assert sections == set(CONFIG_IN_FORCE), sections ^ set(CONFIG_IN_FORCE)


@pytest.mark.parametrize("section", EACH_CALL)
def test_every_key_of_a_per_call_section_reaches_the_next_call(tmp_path: Path, section: str) -> None:
    _write({"mode": "aggressive"})
    lm = LightMem(registry=Registry(tmp_path / "reg"))
    session = lm.session("s")
    _call(session, 1)
    base = getattr(Config(mode="aggressive"), section)
    changed, stuck = _changed(base)
    assert not stuck, f"{section}: no other valid value found for {stuck}"
    assert changed
    _write({"mode": "aggressive", section: {**base.model_dump(), **changed}})
    _call(session, 2)
    want = getattr(Config.model_validate({"mode": "aggressive", section: changed}), section)
    held = {
        "eviction": session.evictor.config,
        "stabilizer": session.stabilizer.config,
        "reduction": session.cfg.reduction,
        "estimator": session.evictor._estimator_config,
    }[section]
    for key in changed:
        assert getattr(held, key) == getattr(want, key), f"{section}.{key} did not reach the next call"
    if section == "reduction":
        assert session.repeats.outputs.max_repeats == want.dedupMaxRepeats


def test_batch_turns_edited_mid_session_is_what_the_evictor_acts_on(tmp_path: Path) -> None:
    """The issue's case: 3 -> 9 in the file; the next call's evictor waits 9 calls between batches."""
    _write({"mode": "aggressive", "eviction": {"batchTurns": 3}})
    lm = LightMem(registry=Registry(tmp_path / "reg"))
    session = lm.session("s")
    _call(session, 1)
    assert session.evictor.config.batchTurns == 3
    _write({"mode": "aggressive", "eviction": {"batchTurns": 9}})
    _call(session, 2)
    assert session.cfg.eviction.batchTurns == 9 and session.evictor.config.batchTurns == 9
