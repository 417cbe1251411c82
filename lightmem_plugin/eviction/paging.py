"""A batch's decision written down: what it chose is archived, and what replaces it is recorded.

Why archive before anything leaves: everything paged out stays recoverable by the key its stub
names (DESIGN 5), so the text goes to the registry first, and only then does the state say what
stands in for it. Finished tasks are archived one document each (their collapse, :mod:`.collapse`);
the outputs and arguments of one batch share one document, numbered by line so each stub names its
own range, and the first output's stub carries the session record (:mod:`.session_record`), which so
changes only at batches. The state written here is what :mod:`.applying` re-applies on every call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..config import EvictionConfig
from ..model import Message, Request, ToolCallPart, ToolResultPart
from ..tokens import TokenCounter
from .choosing import PLACEHOLDER_KEY, Candidate, events_in
from .collapse import Collapse, archive_document, fingerprint, request_text, summary
from .entries import document_text, tool_call, tool_result
from .goals import GoalTask
from .heuristic import HeuristicEstimator
from .lifecycle import TaskRegistry
from .record_render import RecordLevel, render
from .session_record import extract
from .state import Batch, EvictionState
from .stubs import largest_leaf, output_stub, request_stub, stub_arguments


@dataclass(frozen=True)
class Pager:
    """Writes the session's eviction decisions (made per call: a restored session or a new config
    replaces what it writes to and reads)."""

    config: EvictionConfig
    archive: Callable[[bytes], str]
    counter: TokenCounter
    estimator: HeuristicEstimator
    tasks: TaskRegistry
    state: EvictionState
    spell: Callable[[str], str]
    """How the model reads a host call id (:attr:`.evictor.Evictor.spell`): the archives name each
    call so, as the context around its stub did."""

    def on_arrival(self, req: Request, shell: bool) -> int:
        """Archive the long arguments of calls that just ran, as they first come back as input
        (:meth:`.evictor.Evictor.on_arrival` says why); returns how many archived."""
        results = {p.tool_call_id for m in req.messages for p in m.parts if isinstance(p, ToolResultPart)}
        done = 0
        known = set(self.state.sent_whole)
        for msg in req.messages:
            if msg.role != "assistant":
                continue
            for p in msg.parts:
                if not isinstance(p, ToolCallPart) or p.id in self.state.args or p.id in known:
                    continue
                if p.id not in results:
                    self.state.sent_whole.append(p.id)
                    known.add(p.id)
                    continue
                leaf = largest_leaf(p.arguments)
                if leaf is None or len(leaf[1]) < self.config.argumentMinChars:
                    continue
                key = self.archive((leaf[1] + "\n").encode("utf-8", "surrogatepass"))
                stubbed = stub_arguments(p.arguments, key, shell, None)
                if stubbed is not None:
                    self.state.args[p.id] = stubbed[0]
                    done += 1
        return done

    def page_out(
        self,
        chosen: list[Candidate],
        view: list[Message],
        ids: list[str | None],
        owners: list[int],
        original: Request,
        sent: Request,
        goals: list[GoalTask],
        call_index: int,
        shell: bool,
        level: RecordLevel | None = None,
    ) -> int:
        """Archive what was chosen and write its stubs: finished tasks one archive each, outputs and
        arguments together in one (whose first stub carries the session record, at ``level`` or the
        configured ``recordLevel``); the tokens saved."""
        by_number = {t.number: t for t in goals}
        created = frozenset(self.estimator.live.created)
        keep_chars = self.config.goalKeepChars
        saved = 0
        keys: list[str] = []
        for it in chosen:
            if not it.ident.startswith("task:"):
                continue
            t = by_number[int(it.ident[5:])]
            span = original.messages[t.first : t.last + 1]
            leaves = request_stub(t, original.messages, PLACEHOLDER_KEY, shell, keep_chars) is not None
            request = request_text(original.messages[t.goal]) if leaves else None
            doc = archive_document(t.number, t.first, t.last, span, request, self.spell)
            key = self.archive(doc.encode("utf-8", "surrogatepass"))
            text = summary(t.number, key, span, events_in(t, owners, self.estimator), created, shell)
            collapse = Collapse(
                t.number, t.first, t.last, fingerprint(span), text, key, call_index, it.saving
            )
            short = request_stub(t, original.messages, key, shell, keep_chars) if leaves else None
            if short is not None:
                goal = original.messages[t.goal]
                collapse = replace(
                    collapse, goal=t.goal, goal_fingerprint=fingerprint([goal]), goal_text=short
                )
            self.state.collapses.append(collapse)
            saved += it.saving
            keys.append(key)
        parts = [it for it in chosen if not it.ident.startswith("task:")]
        if parts:
            part_saved, part_key = self._page_out_parts(parts, view, ids, original, sent, shell, level)
            saved += part_saved
            keys.insert(0, part_key)
        self.state.batches.append(Batch(call_index, keys[0], [it.ident for it in chosen], saved))
        return saved

    def _page_out_parts(
        self,
        chosen: list[Candidate],
        view: list[Message],
        ids: list[str | None],
        original: Request,
        sent: Request,
        shell: bool,
        level: RecordLevel | None = None,
    ) -> tuple[int, str]:
        """Archive the chosen outputs and arguments together and write their stubs; (tokens saved,
        the archive's key)."""
        index = {cid: i for i, cid in enumerate(ids) if cid is not None}
        lines: list[str] = []
        ranges: dict[str, tuple[int, int]] = {}
        for it in chosen:
            if it.ident.startswith("args:"):
                cid = it.ident[5:]
                call = tool_call(original.messages[it.index], cid)
                value = largest_leaf(call.arguments) if call is not None else None
                lines.append(f"=== lightmem2: arguments of tool call {self.spell(cid)} ===")
                text = value[1] if value is not None else ""
            else:
                cid = it.ident
                lines.append(f"=== lightmem2: output of tool call {self.spell(cid)} ===")
                text = document_text(view[index[cid]])
            start = len(lines) + 1
            lines.extend(text.split("\n"))
            ranges[it.ident] = (start, len(lines))
        doc = "\n".join(lines) + "\n"
        # the registry numbers lines with str.splitlines, which also breaks at \r and the like: where
        # those occur, ranges counted by "\n" would point at other lines, so the stubs name none
        numbered = doc.splitlines() == lines
        key = self.archive(doc.encode("utf-8", "surrogatepass"))
        record = render(extract(view, self.tasks, source=self.estimator), level or self.config.recordLevel)
        saved = 0
        first_output = True
        for it in chosen:
            a, b = ranges[it.ident]
            if it.ident.startswith("args:"):
                cid = it.ident[5:]
                call = tool_call(original.messages[it.index], cid)
                stubbed = (
                    stub_arguments(call.arguments, key, shell, (a, b) if numbered else None)
                    if call is not None
                    else None
                )
                if call is None or stubbed is None:
                    continue
                self.state.args[cid] = stubbed[0]
                saved += self.counter.count(call.arguments) - self.counter.count(stubbed[0])
                continue
            cid = it.ident
            stub = output_stub(key, it.why, (a, b) if numbered else None, shell)
            if first_output and record:
                stub += f"\n[lightmem2 session record]\n{record}"
                first_output = False
            self.state.stubs[cid] = stub
            now = tool_result(sent.messages[it.index], cid)
            saved += self.counter.count(now.text() if now is not None else "") - self.counter.count(stub)
        return saved, key
