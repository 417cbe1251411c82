"""What must stay in view because an output that stays refers to it: the repeat references as sent.

Why eviction reads them: reduction sends a repeat of an earlier output (whole, or line by line) as a
reference to it (:mod:`..reduction.dedup`), so the model reads the text only once, at the first copy.
Paging that first copy out while the reference stays would leave the model neither: a batch must not
choose an output a staying one stands on, nor collapse a finished task a later output refers into.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..model import Request, ToolResultPart
from ..reduction.dedup import call_base, calls_named, names_no_call
from ..reduction.linedup import MIN_LINE_CHARS
from .entries import tool_result
from .goals import GoalTask


@dataclass
class References:
    """The references the tool outputs of a request make to earlier outputs, as sent: by result id,
    (its message, the calls it names), and the lines its references that name no call stand for."""

    named: dict[str, tuple[int, set[str]]]
    unnamed: dict[str, frozenset[str]]


def references_in(sent: Request, original: Request) -> References:
    """One scan of ``sent`` for the repeat references and markers (:mod:`..reduction.dedup`)."""
    refs = References({}, {})
    for i, msg in enumerate(sent.messages):
        for p in msg.parts:
            if not isinstance(p, ToolResultPart):
                continue
            text = p.text()
            if calls := calls_named(text):
                refs.named[p.tool_call_id] = (i, calls)
            if names_no_call(text):
                refs.unnamed[p.tool_call_id] = lines_of(original, i, p.tool_call_id) - set(text.split("\n"))
    return refs


def lines_of(req: Request, index: int, cid: str) -> frozenset[str]:
    """The substantial lines (as a repeat marker counts them) of the host's output of ``cid``."""
    part = tool_result(req.messages[index], cid) if index < len(req.messages) else None
    if part is None:
        return frozenset()
    return frozenset(line for line in part.text().split("\n") if len(line.strip()) >= MIN_LINE_CHARS)


def stood_on(
    refs: References, original: Request, leaving: Mapping[str, int], spell: Callable[[str], str]
) -> set[str]:
    """The outputs in ``leaving`` (call id -> the message that holds it) that an output staying in
    view stands on: a later repeat of the whole output or of its lines is sent as a reference to it
    (:func:`..reduction.dedup.calls_named`), so paging it out would leave the model neither copy.
    Seen: a file read twice, the second read sent as "identical to the output of tool call X", and X
    paged out as stale for the re-read. A reference that names no call
    (:func:`..reduction.dedup.names_no_call`) holds, by content, every leaving output that has one of
    the substantial lines it stands for (the lines of its original that its sent text lacks: a frame
    that stays, such as ``<returncode>0</returncode>``, holds nothing). ``spell``: how the model reads
    a host call id (:attr:`.evictor.Evictor.spell`)."""
    if not refs.named and not refs.unnamed:
        return set()
    as_read = {spell(call_base(cid)): cid for cid in leaving}
    known: dict[str, frozenset[str]] = {}

    def lines_in(cid: str) -> frozenset[str]:
        if cid not in known:
            known[cid] = lines_of(original, leaving[cid], cid)
        return known[cid]

    stay: set[str] = set()
    grew = True
    while grew:  # an output kept because it is stood on keeps what it stands on in turn
        grew = False
        for rid in (*refs.named, *refs.unnamed):
            if rid in leaving and rid not in stay:
                continue  # leaves too (it comes later, so the same break takes it)
            held = {as_read.get(name) for name in refs.named.get(rid, (0, set()))[1]}
            if refs.unnamed.get(rid):
                lines = refs.unnamed[rid]
                held.update(c for c in leaving if c != rid and c not in stay and lines_in(c) & lines)
            for cid in held:
                if cid is not None and cid not in stay:
                    stay.add(cid)
                    grew = True
    return stay


def referred_into(sent: Request, refs: References, t: GoalTask, spell: Callable[[str], str]) -> bool:
    """Whether an output after finished task ``t`` refers to one of its outputs by name. Repeats
    are scoped to their task where tasks leave (aggressive mode), so this happens only for outputs
    reduced before the session switched to such a mode; collapsing ``t`` would then leave those
    references pointing at nothing the model can read, so ``t`` stays."""
    later = [names for at, names in refs.named.values() if at > t.last]
    if not later:
        return False
    inside = {
        spell(call_base(p.tool_call_id))
        for m in sent.messages[t.first : t.last + 1]
        for p in m.parts
        if isinstance(p, ToolResultPart)
    }
    return any(names & inside for names in later)
