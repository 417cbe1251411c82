"""The pass registry drives the config, the modes and the run order; a new pass is one module + one line."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

from lightmem_plugin import reduction
from lightmem_plugin.config import (
    ALL_PASSES,
    LOSSLESS_PASSES,
    Config,
    ModeTable,
    ReductionConfig,
    parse_config,
)
from lightmem_plugin.errors import ConfigError
from lightmem_plugin.reduction import passes
from lightmem_plugin.reduction.base import PassContext
from lightmem_plugin.reduction.reduce import reduce_text
from lightmem_plugin.reduction.spec import STAGES, PassSpec
from lightmem_plugin.reduction.work import Piece, Work


def test_every_pass_module_is_registered_once() -> None:
    declared = []
    for info in pkgutil.iter_modules(reduction.__path__):
        module = importlib.import_module(f"lightmem_plugin.reduction.{info.name}")
        if isinstance(getattr(module, "PASS", None), PassSpec):
            declared.append(module.PASS)
    assert sorted(p.name for p in declared) == sorted(passes.NAMES)
    assert len(set(passes.NAMES)) == len(passes.NAMES)
    assert all(p.stage in STAGES for p in passes.PASSES)


def test_config_names_and_modes_come_from_the_registry() -> None:
    assert ALL_PASSES == passes.NAMES
    assert set(LOSSLESS_PASSES) == {p.name for p in passes.PASSES if p.lossless}
    assert Config(mode="conservative").mode_table().passes == list(passes.LOSSLESS)
    assert Config(mode="normal").mode_table().passes == list(passes.NAMES)


def test_an_unknown_pass_name_is_refused_with_the_allowed_ones() -> None:
    with pytest.raises(ConfigError, match="unknown pass 'gzip'; use one of envelope, whitespace, dedup"):
        parse_config({"reduction": {"normal": {"passes": ["gzip"]}}}, Path("config.json"))


def test_a_new_select_pass_is_one_spec_and_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def select(work: Work, ctx: PassContext) -> list[Piece] | None:
        return ["FIRST LINE ONLY: " + work.lines[0], work.whole("chars (test pass)")]

    spec = PassSpec("firstline", "select", False, "keeps the first line", select, "chars (test pass)")
    monkeypatch.setattr(passes, "PASSES", (*passes.PASSES[:4], spec, *passes.PASSES[4:]))
    table = ModeTable(triggerChars=100, capChars=200, headChars=100, tailChars=50, passes=["firstline"])
    keys: list[bytes] = []
    ctx = PassContext(table, ReductionConfig(), lambda b: keys.append(b) or "a" * 32)
    text = "\n".join(f"row {i} " + "x" * 40 for i in range(50))
    out = reduce_text(text, ctx)
    assert out.startswith("FIRST LINE ONLY: row 0 ") and "chars (test pass) archived as " + "a" * 32 in out
    assert keys == [text.encode()]


def test_every_kind_a_pass_names_is_a_kind_the_classifier_returns() -> None:
    from lightmem_plugin.reduction.kinds import KINDS

    named = {k for p in passes.PASSES for k in p.kinds}
    assert named and named <= set(KINDS), named - set(KINDS)
