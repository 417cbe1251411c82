"""Which part of lightmem2 saved the tokens a call did not send: the rows of ``report``'s top reductions.

Why read it off what the model is shown: every tool output lightmem2 changed says so in its own text,
in the stub of the pass that chose its lines (``[lightmem2: 5,106 chars of output with a traceback
(frames and exception shown) archived as ...]``), a repeat marker, a reference to an identical
output, or the stub of an eviction batch. Reading that back needs no state beside the request, so
a restarted proxy reports the same rows as one that never stopped, and a pass added to the registry
(:data:`.reduction.passes.PASSES`) is named by its own ``what`` label with no line here.

The rows of one call sum to what it did not send (the host's request minus ours, in tokens; negative
when ours is longer): each tool output the pipeline changed counts its original's tokens minus its
shown tokens under the name of what changed it; ``call ids`` counts the host's long tool call ids
the model reads in a few tokens (:mod:`~.prefix.call_ids`; measured on the bundled demo session, DeepSeek's
ids: the largest row, above every pass); the rest of the difference, outside tool outputs, is
``eviction`` once the session has paged anything out (finished tasks, archived arguments) and
``stabilizer`` before that (its session-values block and placeholders, and the definition of our own
recover tool, which the host alone would not send: usually a small negative figure).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import cache

from ..eviction.stubs import EVICTED
from ..reduction.base import STUB_PREFIX
from ..reduction.headtail import PROTECTED_WHAT
from ..reduction.linedup import WHAT as REPEATED
from ..reduction.passes import PASSES

CALL_IDS = "call ids"  # the host's long tool call ids, read by the model in a few tokens
EVICTION = "eviction"
STABILIZER = "stabilizer"
REPEATS = "dedup"  # the repeat stage's pass: whole repeated outputs and lines an earlier output showed
CLEANED = "whitespace"  # a whole-output stub after the clean stage only: the text was tidied, not cut
FALLBACK = "truncate"  # head and tail around a stub (its label is the generic one)

_LABEL = re.compile(re.escape(STUB_PREFIX) + r"[\d,]+ (?P<what>[^\[\]\n]*?) archived")
_EVICTED = (EVICTED, STUB_PREFIX + "output of finished work archived")  # now, and in states saved before
_IDENTICAL = STUB_PREFIX + "identical to "
_REPEAT = "[lightmem2 repeat: "
_CUT = frozenset({"chars", PROTECTED_WHAT})  # the labels of a head + tail cut


@cache
def _by_label() -> dict[str, str]:
    """Stub label -> the pass that writes it (labels shared by several passes are left out)."""
    owners: dict[str, set[str]] = {}
    for spec in PASSES:
        for what in (spec.what, *spec.also):
            owners.setdefault(what, set()).add(spec.name)
    return {what: next(iter(names)) for what, names in owners.items() if len(names) == 1}


def saver(shown: str) -> str:
    """The name of what made a tool output's shown form differ from its original.

    In order: an eviction stub; the first stub whose label only one pass writes (``chars of JSON``);
    a generic stub with lines after it (head + tail: ``N chars archived``, also when it kept error
    lines from the middle); repeat markers, their output's stub, or a reference to an identical
    output; a generic stub that closes the text (the clean stage tidied it); else the stabilizer (a
    placeholder in the output). One name per output: when a pass cut an output that repeat markers
    had already shortened, the whole saving counts under the pass (its label is the one in the text
    that says what the model was shown of the rest).
    """
    if any(stub in shown for stub in _EVICTED):
        return EVICTION
    labels = [(m.group("what"), m.end()) for m in _LABEL.finditer(shown)]
    for what, _ in labels:
        name = _by_label().get(what)
        if name is not None:
            return name
    for what, end in labels:
        if what in _CUT and shown[end:].split("]", 1)[-1].strip():
            return FALLBACK
    if _IDENTICAL in shown or _REPEAT in shown or any(what == REPEATED for what, _ in labels):
        return REPEATS
    return CLEANED if labels else STABILIZER


def split_saving(outputs: Iterable[tuple[str, int]], total: int, paged_out: bool) -> dict[str, int]:
    """One call's rows: ``outputs`` are (what changed it, tokens it saved) per changed tool output;
    ``total`` is all the call did not send. The rest goes to eviction or the stabilizer (see above)."""
    rows: Counter[str] = Counter()
    for name, tokens in outputs:
        rows[name] += tokens
    rest = total - sum(rows.values())
    if rest:
        rows[EVICTION if paged_out else STABILIZER] += rest
    return dict(sorted((name, n) for name, n in rows.items() if n))
