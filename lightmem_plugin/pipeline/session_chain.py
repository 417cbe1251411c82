"""The transformer chain of a session and the ingestion it runs on each tool output (DESIGN 2).

    ingest_tool_result   reduce a tool output ONCE as it enters the history (memoised, DESIGN I3)
    STEPS                reduce, evict, stabilise, call ids: the host's request to the one the model sees
    restored             placeholders in what the model wrote back to the values they stand for

Why apart from :class:`~lightmem_plugin.pipeline.Session`: the session coordinates a call (begin,
settle, the recorder, persistence); this is what the call does to the content, step by step. It is
the session's base class, so every step keeps reading and writing the session's own attributes (the
ones declared below) and a test can still replace one step on :class:`~lightmem_plugin.pipeline.Session`.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import xxhash

from ..config import Config
from ..eviction.cold_cache import Verdict
from ..eviction.deferred import deferred_table
from ..eviction.entries import entries
from ..eviction.evictor import Evictor
from ..eviction.goals import is_goal
from ..eviction.record_render import render as render_record
from ..eviction.record_store import LEVELS, RecordStore
from ..eviction.session_record import extract
from ..faults import FailOpen, FaultSink
from ..metering.recorder import Recorder
from ..model import (
    LISTED_TOOLS,
    ImagePart,
    Message,
    OpaquePart,
    Request,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ..prefix import cache_ttl
from ..prefix.call_ids import Respeller, short_id
from ..prefix.stabilizer import Stabilizer, tool_name
from ..reduction import passes
from ..reduction.base import PassContext, prefers_shell
from ..reduction.dedup import Repeats, call_base, call_key, scope_of
from ..reduction.kinds import ToolCall
from ..reduction.reduce import TextReducer, reduce_media, reduce_output, reduce_text
from ..reduction.verbatim import passes_verbatim
from ..store import CallLedger, SessionStates
from ..store.registry import Registry
from ..tokens import TokenCounter

if TYPE_CHECKING:
    from ..codecs.memo import PerObject


def _unknown_spelling(call_id: str) -> None:
    """Outside a request, the spelling the model will read of a call id is not known."""
    return None


def _digest(text: str) -> str:
    return str(xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass")))


class Plugin(Protocol):
    """What a session reads of the plugin that serves it (a :class:`~lightmem_plugin.pipeline.LightMem`
    is one): named here so that the session's modules need not import the plugin that imports them."""

    faults: FaultSink | None
    ledger: CallLedger | None
    states: SessionStates | None
    records: RecordStore | None
    registry: Registry
    counter: TokenCounter
    active_session: str | None

    @property
    def config(self) -> Config: ...


class SessionChain:
    """What a session call does to the content; :class:`~lightmem_plugin.pipeline.Session` sets up
    every attribute declared here (its ``__init__`` says which persist) and runs :meth:`_transform`."""

    plugin: Plugin
    id: str
    cfg: Config
    fail: FailOpen
    recorder: Recorder
    calls: int
    memo: dict[str, str | None]
    image_memo: dict[str, tuple[str, str] | None]
    repeats: Repeats
    stabilizer: Stabilizer
    evictor: Evictor
    last_record_renders: dict[str, str]
    respeller: Respeller
    passes_override: dict[str, TextReducer]
    prefer_shell: bool
    proxy_respells: bool
    cache_provider: str | None
    _in_call: bool
    _respelling: bool
    respelled_ids: bool
    _evicted_now: bool
    cold: Verdict
    _record_call: int
    _processed: PerObject[Message, Message]
    _tool_calls: dict[str, ToolCall]
    _paged_for: tuple[object, int]
    _paged: dict[str, bool]
    _paged_keys: set[str]

    def _save(self) -> None:
        """Persist what an ingestion outside a request decided: the session's job (its persistence)."""
        raise NotImplementedError

    def _follow(self, cfg: Config) -> None:
        """Every step of the session reads the config in force at this call (:data:`.config_in_force.KEYS`
        says when each key applies).

        Why: a user who edits ``eviction.batchTurns`` in config.json mid-session expects the next call
        to use it; the evictor, stabilizer and dedup index used to keep the config the session was
        created with (measured: ``session.cfg`` said 9, the evictor acted on 3)."""
        if cfg is self.cfg:  # the holder hands out the same object until the file changes
            return
        self.cfg = cfg
        self.evictor.reconfigure(cfg.eviction, cfg.estimator)
        self.stabilizer.reconfigure(cfg.stabilizer)
        self.repeats.outputs.max_repeats = cfg.reduction.dedupMaxRepeats

    # -- ingestion ---------------------------------------------------------------------------------
    def _context(self, call: ToolCall | None = None) -> PassContext:
        cfg = self.cfg
        respell: Callable[[str], str | None] | None = None
        if self._in_call:
            respell = self._id_as_read
        elif self._short_ids():  # a hook: the proxy may respell the ids, or not
            respell = short_id if self.proxy_respells else _unknown_spelling
        return PassContext(
            cfg.mode_table(),
            cfg.reduction,
            self.plugin.registry.put_short,
            call,
            self.prefer_shell,
            ids_as_sent=not self.respelled_ids,
            respell=respell,
        )

    def ingest_tool_result(self, call_id: str, output: str, call: ToolCall | None = None) -> str:
        """What the model will see of this tool output; computed once per (call id, content).

        ``call`` is the tool call that produced it (its command tells the output's kind); within a
        request the pipeline finds it itself, a host hook passes it."""
        self.plugin.active_session = self.id
        if passes_verbatim(call):  # a recovered original, a tool catalog: never a stub of itself
            return output
        # keyed by the id's spelling-independent form: a host may hand the same call twice, spelled
        # two ways (OpenClaw: middleware, then assemble); the second sighting gets the same bytes
        slot = f"{call_key(call_id)}:{_digest(output)}"
        if self._in_call:  # in a request: spelled as the model reads it
            self.repeats.outputs.confirm(call_id)
        if slot in self.memo:
            self.repeats.outputs.seen(call_id)
            hit = self.memo[slot]
            return output if hit is None else hit
        if not self._in_call:  # a host hook ingesting between model calls sees the current config
            self._follow(self.plugin.config)
        result = self.fail.run("reduction", lambda: self._reduce(call_id, output, call), output)
        self.memo[slot] = None if result == output else result
        if not self._in_call:
            self._save()
        return result

    def _reduce(self, call_id: str, output: str, call: ToolCall | None) -> str:
        reducer = self.passes_override.get("text", reduce_text)
        return reduce_output(call_id, output, self._context(call), self.repeats, reducer)

    def _ingest_image(self, part: ImagePart) -> ImagePart:
        if part.data is None or not passes.of_stage("media", self.cfg.mode_table().passes):
            return part
        slot = _digest(part.data)
        if slot not in self.image_memo:
            self.image_memo[slot] = self.fail.run("images", lambda: self._reduce_image(part), None)
        done = self.image_memo[slot]
        if done is None:
            return part
        return ImagePart(media_type=done[1], data=done[0], url=part.url, extra=dict(part.extra))

    def _reduce_image(self, part: ImagePart) -> tuple[str, str] | None:
        raw = base64.b64decode(part.data or "", validate=False)
        out = reduce_media(raw, part.media_type or "", self._context())
        if out is None:
            return None
        return base64.b64encode(out[0]).decode("ascii"), out[1]

    def _reduce_result(self, part: ToolResultPart) -> ToolResultPart:
        content: list[TextPart | ImagePart | OpaquePart] = []
        changed = False
        for i, sub in enumerate(part.content):
            new = sub
            if isinstance(sub, TextPart):
                text = self.ingest_tool_result(
                    f"{part.tool_call_id}#{i}" if i else part.tool_call_id,
                    sub.text,
                    self._tool_calls.get(part.tool_call_id),
                )
                if text != sub.text:
                    new = TextPart(text, dict(sub.extra))
            elif isinstance(sub, ImagePart):
                new = self._ingest_image(sub)
            changed = changed or new is not sub
            content.append(new)
        if not changed:
            return part
        return ToolResultPart(part.tool_call_id, content, part.is_error, dict(part.extra))

    def _process_message(self, msg: Message) -> Message:
        for p in msg.parts:
            if isinstance(p, ToolCallPart):  # the call a later tool result answers: names its kind
                self._tool_calls[p.id] = ToolCall(p.name, p.arguments)
        parts = [self._reduce_result(p) if isinstance(p, ToolResultPart) else p for p in msg.parts]
        if all(a is b for a, b in zip(parts, msg.parts, strict=True)):
            return msg
        return Message(msg.role, parts, dict(msg.extra), dict(msg.hints))

    # -- the transformer chain -----------------------------------------------------------------------
    def _reduce_step(self, original: Request, req: Request) -> Request:
        """Every tool output as it was reduced on arrival (memoised); repeats scoped to the task."""
        listed = [tool_name(t) for t in req.tools] or list(req.hints.get(LISTED_TOOLS) or [])
        if listed:  # the tools the model can call: in the request's tools, or listed in its input
            self.prefer_shell = prefers_shell(listed)
        messages = self._processed.map(self._scoped(req.messages))
        return Request(messages, list(req.tools), dict(req.extra), dict(req.hints))

    def _scoped(self, messages: list[Message]) -> Iterator[Message]:
        """``messages``, setting the repeat scope before each is reduced: the history the host still
        sends (its oldest tool result, :func:`scope_of`: a repeat never points into outputs the host
        compacted away) and, with finished tasks leaving, the task (nor into a task that may leave)."""
        scoped = self.cfg.mode_table().eviction and self.cfg.eviction.finishedTasks
        first = next((p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolResultPart)), "")
        origin = next(iter(self.repeats.outputs.names), "")  # the session's first call, as keyed
        if not origin or call_key(first) == origin:
            first = ""  # the host still sends the session from its start: the session's own scope
        goals = 0
        self.repeats.scope = scope_of(first, 0)
        for msg in messages:
            if scoped and is_goal(msg):
                goals += 1
                self.repeats.scope = scope_of(first, goals - 1)
            yield msg

    def _evict_step(self, original: Request, reduced: Request) -> Request:
        """Re-apply past evictions; in a mode with eviction, run a batch when one is due and pays."""
        self._evicted_now = False
        self.evictor.spell = self._id_as_read
        table = self.cfg.mode_table()
        if table.eviction:
            hint = self.cfg.reduction.recoverHint
            shell = hint == "shell" or (hint == "auto" and self.prefer_shell)
            if self.cfg.eviction.argumentsOnArrival:
                self.evictor.on_arrival(original, shell)
            self._evicted_now = self.evictor.maybe_evict(self.calls, original, reduced, shell)
        else:
            self.evictor.last_evicted_tokens = 0
        if table.reduceAtColdStart and self.cold.cold:
            again = self.evictor.reduce_at_cold(self.calls, original, reduced, self._reduce_again)
            self._evicted_now = self._evicted_now or again
        return self.evictor.apply(reduced)

    def _reduce_again(self, call_id: str, text: str) -> str:
        """``text``, the output of ``call_id`` as the model reads it, reduced again by the mode's
        passes to about ``deferredViewChars`` (:func:`..eviction.deferred.deferred_table`)."""
        ctx = replace(
            self._context(self._tool_calls.get(call_id)), table=deferred_table(self.cfg.mode_table())
        )
        return self.passes_override.get("text", reduce_text)(text, ctx)

    def _record_step(self, original: Request) -> None:
        """Persist the session record (every batch of calls, when it changed) for ``lightmem2 resume``:
        bookkeeping (:meth:`settle`), since the request the model sees does not depend on it."""
        store = self.plugin.records
        if store is None or self.calls - self._record_call < self.cfg.eviction.batchTurns:
            return
        self._record_call = self.calls
        view = entries(original).turns
        record = extract(view, self.evictor.tasks, source=self.evictor.estimator)
        renders: dict[str, str] = {level: render_record(record, level) for level in LEVELS}
        if renders != self.last_record_renders:
            store.append(self.id, len(view) - 1, renders)
            self.last_record_renders = renders

    def _stabilize_step(self, original: Request, req: Request) -> Request:
        """The head made byte-stable (session values to placeholders), the per-call tail last."""
        return self.stabilizer.apply(req)

    def _paged_out(self, call_id: str) -> bool:
        """Whether eviction replaced the output of ``call_id`` (in any spelling, a part's ``#N`` aside)
        with a stub: a repeat may not refer to it (:attr:`~.reduction.dedup.Repeats.gone`). Read from
        the eviction state, which persists, so a restarted process decides the same."""
        stubs = self.evictor.state.stubs
        if not stubs:
            return False
        if self._paged_for[0] is not stubs or self._paged_for[1] != len(stubs):  # stubs grow at batches
            self._paged_for = (stubs, len(stubs))
            self._paged_keys = {call_key(call_base(c)) for c in stubs}
            self._paged = {}
        known = self._paged.get(call_id)
        if known is None:  # asked once per spelling: repeats ask for every line they find
            known = self._paged[call_id] = call_key(call_base(call_id)) in self._paged_keys
        return known

    @property
    def _id_as_read(self) -> Callable[[str], str]:
        """How the model reads a host call id in the current request: the one answer that the
        repeat references, the eviction archives and the ``call_ids`` step all follow."""
        return short_id if self._respelling else str

    def _short_ids(self) -> bool:
        """Whether this session's requests get short call ids (:mod:`~.prefix.call_ids`). Not for a host that
        assembles the context once per turn (OpenClaw): the calls inside a turn reach the provider
        with the host's ids, so respelling them at the next turn would break the cached prefix."""
        return self.cfg.stabilizer.shortCallIds and not self.respelled_ids

    def _call_ids_step(self, original: Request, req: Request) -> Request:
        """Every tool call id in a few tokens (:mod:`~.prefix.call_ids`), when this request allows it."""
        return self.respeller.apply(req) if self._respelling else req

    def _cache_ttl_step(self, original: Request, req: Request) -> Request:
        """Every breakpoint (or the request) asking the TTL ``stabilizer.cacheTtl`` chooses, of the
        provider whose cache holds the prompt (:mod:`~.prefix.cache_ttl`); last, so it sees every
        breakpoint the steps before left."""
        return cache_ttl.apply(req, self.cfg.stabilizer.cacheTtl, self.cache_provider)

    STEPS: tuple[tuple[str, Callable[[SessionChain, Request, Request], Request]], ...] = (
        ("reduction", _reduce_step),
        ("eviction", _evict_step),
        ("stabilizer", _stabilize_step),
        ("call_ids", _call_ids_step),
        ("cache_ttl", _cache_ttl_step),
    )
    """The transformer chain, in order: each step gets the host's request and the previous step's
    result, and a step that fails hands its input on unchanged (counted under its name)."""

    def _transform(self, req: Request) -> Request:
        out = req
        for name, step in self.STEPS:
            current = out
            out = self.fail.run(name, lambda: step(self, req, current), current)  # noqa: B023
        return out


def restored(stabilizer: Stabilizer, value: Any) -> Any:
    """``value`` (what the model wrote: text, a neutral message or a chat-form one) with the
    stabilizer's placeholders back to the session's values, tool-call arguments included."""
    if isinstance(value, str):
        return stabilizer.restore(value)
    if isinstance(value, Message):
        parts: list[Any] = []
        for p in value.parts:
            if isinstance(p, TextPart):
                parts.append(TextPart(stabilizer.restore(p.text), dict(p.extra)))
            elif isinstance(p, ToolCallPart):
                args = stabilizer.restore_arguments(p.arguments)
                parts.append(ToolCallPart(p.id, p.name, args, dict(p.extra)))
            else:
                parts.append(p)
        return Message(value.role, parts, dict(value.extra), dict(value.hints))
    if isinstance(value, dict):
        out = copy.deepcopy(value)
        if isinstance(out.get("content"), str):
            out["content"] = stabilizer.restore(out["content"])
        for call in out.get("tool_calls") or []:
            fn = call.get("function") or {}
            if isinstance(fn.get("arguments"), str):
                fn["arguments"] = stabilizer.restore_arguments(fn["arguments"])
        return out
    return value
