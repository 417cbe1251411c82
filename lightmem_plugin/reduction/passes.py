"""The reduction passes, in the order they run: one line per pass.

A new pass is one module in this package that defines ``PASS`` (a :class:`.spec.PassSpec`) and one line
in :data:`PASSES`. Everything else is built from this tuple: the config's pass names and the modes'
default lists (:data:`NAMES`, :data:`LOSSLESS`), the JSON schema, the pass table of ``docs/REFERENCE.md``
(``make docs``: each pass's ``summary`` and the modes that run it), and the run order inside each stage
(:mod:`.reduce`).
"""

from __future__ import annotations

from collections.abc import Iterable

from . import (
    dedup,
    diffsum,
    envelope,
    fileview,
    headtail,
    html,
    images,
    jsonsum,
    logsum,
    searchsum,
    testrun,
    tracesum,
    whitespace,
)
from .spec import PassSpec, Stage

PASSES: tuple[PassSpec, ...] = (
    envelope.PASS,
    whitespace.PASS,
    dedup.PASS,
    html.PASS,
    images.PASS,
    fileview.PASS,
    testrun.PASS,
    tracesum.PASS,
    searchsum.PASS,
    jsonsum.PASS,
    diffsum.PASS,
    logsum.PASS,
    headtail.PASS,
)

NAMES: tuple[str, ...] = tuple(p.name for p in PASSES)
LOSSLESS: tuple[str, ...] = tuple(p.name for p in PASSES if p.lossless)


def of_stage(stage: Stage, enabled: Iterable[str]) -> list[PassSpec]:
    """The passes of ``stage`` whose names are in ``enabled`` (a mode's pass list), in run order."""
    names = set(enabled)
    return [p for p in PASSES if p.stage == stage and p.name in names]
