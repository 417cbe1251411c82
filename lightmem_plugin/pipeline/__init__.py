"""The pipeline: hook points every host adapter calls, and the fail-open runner around them.

    ingest_tool_result   reduce a tool output ONCE as it enters the history (memoised, DESIGN I3)
    before_model_call    stabilise the head, apply the memoised reductions, (aggressive) evict in batches
    after_model_call     restore placeholders in what the model wrote, record real cache usage

A session is four parts, each a module of its own: the chat adapter (:mod:`~.codecs.chat_adapter`),
the transformer chain (:attr:`Session.STEPS`: reduce, evict, stabilise, call ids), the decisions it
took (:mod:`.session_snapshot`, persisted by :mod:`~.store.session_state`) and the recorder
(:mod:`~.metering.recorder`).

Why fail-open (I5): we sit between an agent and its model. Any exception inside a pass returns the
original payload, is counted per pass and shown by ``status``/``doctor``; the host never breaks.
Why memoise by (tool call id, content hash): the reduced form of an output must never change later in
the session, even if the mode changes (mode switches apply to new content only).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import sqlite3
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Self, TypeVar

import xxhash

from .. import wire
from ..codecs._common import Reuse
from ..codecs.memo import Interned, PerObject
from ..config import Config, ConfigHolder
from ..errors import ArtifactCorrupt
from ..eviction.break_cost import break_cost
from ..eviction.entries import entries
from ..eviction.evictor import Evictor
from ..eviction.goals import is_goal
from ..eviction.record_render import render as render_record
from ..eviction.record_store import LEVELS, RecordStore
from ..eviction.session_record import extract
from ..faults import FailOpen, FaultSink, open_sink, report
from ..metering.accounting import CallFacts
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
from ..prefix.call_ids import Respeller, respellable, short_id
from ..prefix.stabilizer import Stabilizer, tool_name
from ..reduction import passes
from ..reduction.base import PassContext, prefers_shell
from ..reduction.dedup import DedupIndex, Repeats, call_base, call_key, scope_of
from ..reduction.kinds import ToolCall
from ..reduction.reduce import TextReducer, reduce_media, reduce_output, reduce_text
from ..reduction.verbatim import passes_verbatim
from ..security import tenancy
from ..store import CallLedger, SessionStates, Stores, open_stores
from ..store.home import Home
from ..store.ledger import CallRecord
from ..store.registry import Registry
from ..store.search_index import IndexBase, SearchIndex, index_hook, indexing_later
from ..store.session_state import Journal, StoredSession, retry_start
from ..tokens import TokenCounter
from ..wire.chat.adapter import ChatAdapter
from . import session_snapshot

T = TypeVar("T")
CONFIG_IN_FORCE: dict[str, str] = {
    "mode": "each call; a reduction already made stays as the model saw it (new content only)",
    "stabilizer": "each call; headMessages only in a new session (the head it keeps stable is decided once)",
    "reduction": "each call; a reduction already made stays as the model saw it (new content only)",
    "eviction": "each call",
    "estimator": "each call (the estimator is rebuilt, the tasks it tracked kept)",
    "registry": "the next start of the process (the archive is opened once)",
    "server": "the next start of serve; upstreams, maxRequestBytes, sessionIdleS and maxSessions each request",
    "store": "the next start of the process (the stores are opened once)",
    "gateway": "each request (serve reads its users and tokens at each request)",
    "redaction": "the next start of the process (its patterns are compiled once)",
}
"""When an edit of each config section reaches a running session (a test holds every key to it)."""


class LightMem:
    """The plugin for one process: config, artifact registry and the sessions it serves."""

    def __init__(
        self,
        config: Config | None = None,
        registry: Registry | None = None,
        ledger: CallLedger | None = None,
        states: SessionStates | None = None,
        faults: FaultSink | None = None,
    ) -> None:
        self._holder = None if config is not None else ConfigHolder()
        self.ledger = ledger
        self.faults = faults  # where failures are reported for status/doctor (None: counted only)
        self.states = states  # where sessions persist their decisions (None: in memory only)
        self.records: RecordStore | None = None
        self.search_index: IndexBase | None = None  # what archiving indexes into (attach_search_index)
        self.counter = TokenCounter()
        self._fixed = config
        cfg = self.config
        # without an archive key where sealing is on, archives are redacted instead; the failure is
        # reported (doctor, status) and never stops the host
        self.registry = registry or Home.default().registry(
            cfg, on_key_error=lambda err: report(self.faults, "registry", err)
        )
        self.sessions: OrderedDict[str, Session] = OrderedDict()
        self._active = threading.local()  # whose outputs this thread archives (search index, owners)
        self.registry.owner = lambda: tenancy.owner_of(self.active_session)
        self.max_sessions: int | None = None
        """Sessions kept in memory (None: ``server.maxSessions``). Why above the sessions served at
        once: at 64, 100 concurrent host sessions reloaded on almost every call (measured: a fifth of
        the proxy's CPU, and every memo of the pipeline lost)."""
        self.expired = 0  # sessions dropped for idleness so far (serve gives their memory back)
        self._sessions_lock = threading.Lock()

    @property
    def active_session(self) -> str | None:
        """The session whose outputs are being archived in this thread (sessions of one process run
        in several threads at once: an artifact must never be credited to another one's user)."""
        return getattr(self._active, "session", None)

    @active_session.setter
    def active_session(self, session_id: str | None) -> None:
        self._active.session = session_id

    @classmethod
    def from_config(cls, stores: Stores | None = None) -> Self:
        """A plugin that follows the user's config file (reloaded when it changes) and keeps a ledger
        and session state in ``stores`` (default: those ``store.url`` names, see :mod:`.store`)."""
        if stores is None:
            try:
                stores = open_stores(ConfigHolder().current)
            except (OSError, sqlite3.Error):  # an unusable database must not break the host; doctor says why
                stores = None
        ledger, states = (stores.ledger, stores.states) if stores else (None, None)
        plugin = cls(ledger=ledger, states=states, faults=open_sink())
        if stores is not None:  # a shared database keeps the artifacts too
            plugin.registry = stores.registry_like(plugin.registry)
        plugin.attach_search_index(stores)
        plugin.records = RecordStore(Home.default().records_dir, plugin.registry.redactor)
        return plugin

    @property
    def config(self) -> Config:
        """The config in force (the last good one if the file turned bad)."""
        if self._fixed is not None:
            return self._fixed
        assert self._holder is not None
        return self._holder.reload()

    @property
    def config_error(self) -> str | None:
        """Why the config file was rejected, if it was."""
        return self._holder.last_error if self._holder else None

    def attach_search_index(self, stores: Stores | None = None) -> None:
        """Index every new artifact for ``lightmem2 search`` into ``stores``' index (the data dir's when
        None; the database's with ``store.url``); skipped if the index cannot open."""
        try:
            index = stores.search_index() if stores is not None else SearchIndex.default()
        except (OSError, sqlite3.Error):
            return  # search is a convenience: archiving works without it
        self.search_index = index
        self.registry.on_put = index_hook(index, lambda: self.active_session)

    @contextlib.contextmanager
    def searching(self) -> Iterator[IndexBase]:
        """The index archiving fills (:meth:`attach_search_index`: the stores' one), or, when it could
        not be opened then, the data dir's, opened for this search and closed after it."""
        if self.search_index is not None:
            yield self.search_index
            return
        with SearchIndex.default() as index:
            yield index

    def session(self, session_id: str) -> Session:
        """The session with this id (created on first use, or reloaded from the session store, also
        when another process sharing the store wrote it since this one did)."""
        stale = self._stale(self.sessions.get(session_id))
        with self._sessions_lock:
            now = time.monotonic()
            self._expire_idle(now)
            found = self.sessions.get(session_id)
            if found is not None and found is stale:
                del self.sessions[session_id]
                found.settle()
                found = None
            if found is None:
                found = self.sessions[session_id] = Session(self, session_id)
                cap = self.max_sessions or self.config.server.maxSessions
                while len(self.sessions) > cap:  # least recently used first
                    self.sessions.popitem(last=False)[1].settle()
            else:
                self.sessions.move_to_end(session_id)
            found.last_used = now
            return found

    def _stale(self, session: Session | None) -> Session | None:
        """``session`` when the store holds a newer version of it than it last read or wrote."""
        journal = session.journal if session is not None else None
        if journal is None or self.states is None:
            return None
        try:
            return session if self.states.version(journal.session_id) != journal.version else None
        except (OSError, sqlite3.Error) as err:  # fail-open: keep serving what this process holds
            report(self.faults, "state", err, journal.session_id)
            return None

    def settle(self) -> None:
        """Every session's bookkeeping still pending (:meth:`Session.settle`): before a process stops."""
        with self._sessions_lock:
            held = list(self.sessions.values())
        for session in held:
            session.settle()

    def expire_idle(self) -> int:
        """Drop the sessions idle past ``server.sessionIdleS`` now; how many (``serve`` sweeps)."""
        with self._sessions_lock:
            return self._expire_idle(time.monotonic())

    def _expire_idle(self, now: float) -> int:
        """Drop sessions unused for ``server.sessionIdleS`` (oldest first), when a store keeps their
        decisions: a long-running proxy's memory then follows its active sessions, not all it ever saw
        (measured before: ~5-6x each session's last request, never released)."""
        if self.states is None:
            return 0
        idle = self.config.server.sessionIdleS
        dropped = 0
        while self.sessions:
            sid, oldest = next(iter(self.sessions.items()))
            if now - oldest.last_used < idle or oldest._in_call:
                break
            del self.sessions[sid]
            oldest.settle()
            dropped += 1
        self.expired += dropped
        return dropped


def _unknown_spelling(call_id: str) -> None:
    """Outside a request, the spelling the model will read of a call id is not known."""
    return None


def _digest(text: str) -> str:
    return str(xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass")))


class Session:
    """One conversation: a chat adapter, the transformer chain and the decisions it took, a recorder.

    - :class:`~.codecs.chat_adapter.ChatAdapter` decodes chat-form messages into the neutral model and
      encodes them back, incrementally (hosts only append);
    - the transformer chain (:data:`STEPS`: reduce, evict, stabilise, call ids) maps the request the
      host sent to the one the model sees; each step is fail-open on its own;
    - the decisions the chain took over time (:mod:`~.pipeline.session_snapshot`) persist in the session store
      after every call, so a restarted process sends the same bytes;
    - :class:`~lightmem_plugin.metering.recorder.Recorder` writes one ledger row per model call.
    """

    def __init__(self, plugin: LightMem, session_id: str) -> None:
        self.plugin = plugin
        self.id = session_id
        self.last_used = time.monotonic()  # for idle expiry (LightMem.session); never in model text
        self.fail = FailOpen(plugin.faults, session_id)
        self.cfg: Config = plugin.config  # read once per call: the holder stats the config file
        self._in_call = False
        self._unsettled: Callable[[], None] | None = None  # the last call's bookkeeping (settle)
        self._settling = threading.Lock()
        # -- decisions (persisted, session_snapshot) --
        self.memo: dict[str, str | None] = {}  # (call id, content) -> what the model sees; None: unchanged
        self.image_memo: dict[str, tuple[str, str] | None] = {}
        self.repeats = Repeats(DedupIndex(plugin.config.reduction.dedupMaxRepeats))
        self.repeats.gone = self._paged_out
        self._paged_for: tuple[object, int] = (None, 0)  # the eviction stubs (and their count) read last
        self._paged: dict[str, bool] = {}  # call id, as a pass names it -> paged out (see _paged_out)
        self._paged_keys: set[str] = set()
        self.stabilizer = Stabilizer(plugin.config.stabilizer)
        self.evictor = Evictor(
            plugin.config.eviction, plugin.registry.put_short, plugin.counter, plugin.config.estimator
        )
        # a restarted sidecar or proxy continues the session's call numbering instead of overwriting rows
        self.calls = self._recorded_calls(plugin.ledger, session_id)
        self.last_record_renders: dict[str, str] = {}  # the session record last stored, per level
        # -- per process --
        self.chat = ChatAdapter()
        self.codec_reuse = Reuse()  # a proxy's wire codecs decode and encode only what changed
        self.respeller = Respeller()
        self._respelling = False  # this call's ids go out short (decided per request, see call_ids)
        self.recorder = Recorder(plugin.ledger, plugin.counter, plugin.registry.peek, self.fail)
        self._respelled_ids = False
        self._evicted_now = False
        self._record_call = 0  # the call the session record was last snapshotted at
        self.passes_override: dict[str, TextReducer] = {}  # tests: replace the text passes
        self._processed: PerObject[Message, Message] = PerObject(self._process_message)
        self._interned: Interned[Message] = Interned()  # a proxy's fresh objects -> last call's (memo)
        self._tool_calls: dict[str, ToolCall] = {}
        self.prefer_shell = False  # stubs name the shell command (see reduction.base.prefers_shell)
        self.proxy_respells = False
        """Outputs ingested outside a request reach the model through this plugin's proxy on a wire
        whose ids it respells (a Claude Code hook whose ``ANTHROPIC_BASE_URL`` is our ``serve``), so a
        repeat may name the short id; otherwise a hook's repeat names no call."""
        # ledger rows of this session object: another process serving the same session writes its own
        # (never shown to the model, so a random id costs no determinism)
        self.writer = os.urandom(6).hex()
        self.journal: Journal | None = None
        self._saved_batch_check: tuple[int, ...] | None = None  # eviction state version on disk
        self._loaded: StoredSession | None = None  # as loaded, until the first call (retry_start)
        self._request_key: str | None = None
        if plugin.states is not None:
            store = plugin.states
            self.fail.run("state", lambda: self._load_state(store), None)

    @property
    def respelled_ids(self) -> bool:
        """The host may respell call ids after we see them (OpenClaw, for some providers: letters and
        digits only, just before each request): a repeat then names no call id (dedup.reference), and
        the ledger compares messages with ids in that form (:func:`~.metering.accounting.ids_alike`)."""
        return self._respelled_ids

    @respelled_ids.setter
    def respelled_ids(self, value: bool) -> None:
        self._respelled_ids = value
        self.recorder.host_respells(value)

    @property
    def last_record(self) -> CallRecord | None:
        """The ledger row of the last call (with the provider's usage once it came)."""
        return self.recorder.last

    # -- persisted state ---------------------------------------------------------------------------
    def _load_state(self, store: SessionStates) -> None:
        """Continue the session from what was saved (a restart, or dropped from memory): same bytes."""
        try:
            loaded = store.load(self.id)
        except ArtifactCorrupt:  # sealed with a key no longer at hand: unreadable, so start over
            store.forget(self.id)
            self.journal = Journal(store, self.id)
            raise
        recorded = self.calls
        try:
            if not loaded.empty:
                session_snapshot.restore(self, loaded, self.plugin.config.stabilizer)
                self._saved_batch_check = self.evictor.state.version
                stored = int((loaded.blobs.get("core") or {}).get("calls", 0))
                if recorded == stored + 1:
                    self._take_unsaved_call(stored)
        except Exception:
            store.forget(self.id)  # a damaged or outdated state: start the session over, cleanly
            self.journal = Journal(store, self.id)
            raise
        self.journal = Journal(store, self.id, loaded)
        self._loaded = loaded

    def _take_unsaved_call(self, stored: int) -> None:
        """The ledger holds one call more than the saved decisions: its process wrote the row and died
        before it saved them (the window between the two writes), so the model never had that call.
        Number the next call as the decisions say, and let its row replace the dead one's; numbered
        from the ledger instead, the session's eviction batches would run one call late from then on."""
        last = self.plugin.ledger.calls(self.id)[-1:] if self.plugin.ledger is not None else []
        if last and last[0].call_index == stored + 1:
            self.calls = stored
            self.writer = last[0].writer

    def _take_retry(self, request_key: str) -> None:
        """A session just loaded from the store whose last call was this same request (its process
        died before the host had the answer, and the host or a load balancer sent it again): start
        from the decisions as they were before that call, so it is sent as it was, and its ledger row
        is replaced rather than doubled."""
        loaded, self._loaded = self._loaded, None
        blobs = retry_start(loaded, request_key) if loaded is not None else None
        if loaded is None or blobs is None:
            return
        session_snapshot.restore(self, replace(loaded, blobs=blobs), self.plugin.config.stabilizer)
        self.calls = int((blobs.get("core") or {}).get("calls", 0))
        self._saved_batch_check = None
        last = self.plugin.ledger.calls(self.id)[-1:] if self.plugin.ledger is not None else []
        if last and last[0].call_index == self.calls + 1:
            self.writer = last[0].writer  # the retried call's row is this row

    def _save(self) -> None:
        """Write what this call decided (new entries and changed documents only); fail-open."""
        journal = self.journal
        if journal is None:
            return
        version = self.evictor.state.version
        maps, blobs = session_snapshot.snapshot(self, with_eviction=version != self._saved_batch_check)

        def save() -> bool:
            journal.save(maps, blobs, self._request_key)
            return True

        if self.fail.run("state", save, False):  # a failed write is retried with the next call
            self._saved_batch_check = version

    @staticmethod
    def _recorded_calls(ledger: CallLedger | None, session_id: str) -> int:
        """Calls the ledger already holds for this session (0 when there is no usable ledger)."""
        if ledger is None:
            return 0
        try:
            return max((r.call_index for r in ledger.calls(session_id)), default=0)
        except (OSError, sqlite3.Error):
            return 0

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
        if self.cfg.mode_table().eviction:
            hint = self.cfg.reduction.recoverHint
            shell = hint == "shell" or (hint == "auto" and self.prefer_shell)
            if self.cfg.eviction.argumentsOnArrival:
                self.evictor.on_arrival(original, shell)
            self._evicted_now = self.evictor.maybe_evict(self.calls, original, reduced, shell)
        return self.evictor.apply(reduced)

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

    STEPS: tuple[tuple[str, Callable[[Session, Request, Request], Request]], ...] = (
        ("reduction", _reduce_step),
        ("eviction", _evict_step),
        ("stabilizer", _stabilize_step),
        ("call_ids", _call_ids_step),
    )
    """The transformer chain, in order: each step gets the host's request and the previous step's
    result, and a step that fails hands its input on unchanged (counted under its name)."""

    def _transform(self, req: Request) -> Request:
        out = req
        for name, step in self.STEPS:
            current = out
            out = self.fail.run(name, lambda: step(self, req, current), current)  # noqa: B023
        return out

    # -- hook points -------------------------------------------------------------------------------
    def process(
        self,
        req: Request,
        whole_turn: bool = False,
        request_key: str | None = None,
        api: str | None = None,
    ) -> Request:
        """The transformed request (neutral model); the original on any failure. Writes a ledger row
        (with ``whole_turn``, when :meth:`record_turn` brings the calls the host made inside the turn).
        ``request_key`` identifies the host's request bytes (the proxy's): the same key again as the
        first call after a reload is a retry of the stored last call (:meth:`_take_retry`). ``api``:
        the wire API the request came in on (:data:`..wire.NAMES`); its provider's cache prices an
        eviction's break (None: the Python API, a prefix cache unless ``eviction.cacheModel`` says)."""
        out = self.begin(req, whole_turn, request_key, api)
        self.settle()
        return out

    def begin(
        self,
        req: Request,
        whole_turn: bool = False,
        request_key: str | None = None,
        api: str | None = None,
    ) -> Request:
        """:meth:`process` up to the transformed request; its bookkeeping (the ledger row, the saved
        state) waits for :meth:`settle`, which the next call of the session runs first if nobody did.

        Why: the proxy sends the request upstream first and settles while the provider works, so the
        host waits only for the transformation (measured with host-like load: the bookkeeping was a
        third of the time the proxy added before the first byte)."""
        self.settle()
        req = replace(req, messages=self._interned.map(req.messages))
        if request_key is not None and self._loaded is not None:
            self.fail.run("state", lambda: self._take_retry(request_key), None)
        self._loaded = None
        self._request_key = request_key
        self.recorder.flush()
        self.plugin.active_session = self.id  # evictions archive too, with no new output ingested
        self.calls += 1
        self._follow(self.plugin.config)
        self.evictor.break_cost = break_cost(
            self.cfg.eviction.cacheModel, wire.get(api).cache_model if api in wire.NAMES else None
        )
        errors_before = Counter(self.fail.errors)
        self._respelling = self._short_ids() and self.fail.run("call_ids", lambda: respellable(req), False)
        self._in_call = True
        later: list[Callable[[], None]] = []  # what this call archived, indexed as it settles
        try:
            with indexing_later(later):
                out = self.fail.run("pipeline", lambda: self._transform(req), req)
        finally:
            self._in_call = False
        facts = self._facts(self.fail.errors - errors_before)
        self._unsettled = lambda: self._bookkeep(facts, req, out, whole_turn, later)
        return out

    def settle(self) -> None:
        """The bookkeeping :meth:`begin` left, once (no-op when there is none); safe from any thread."""
        with self._settling:
            pending, self._unsettled = self._unsettled, None
            if pending is not None:
                pending()

    @property
    def unsettled(self) -> bool:
        """True between :meth:`begin` and :meth:`settle`."""
        return self._unsettled is not None

    def _bookkeep(
        self,
        facts: CallFacts,
        req: Request,
        out: Request,
        whole_turn: bool,
        indexing: list[Callable[[], None]],
    ) -> None:
        for add in indexing:  # what the call archived, for search: after the send, not before it
            self.fail.run("search", add, None)
        self.fail.run("record", lambda: self._record_step(req), None)
        self.calls = self.recorder.call(facts, req, out, whole_turn)
        self._save()
        self._request_key = None

    def before_model_call(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        whole_turn: bool = False,
        api: str | None = None,
    ) -> list[dict[str, Any]]:
        """OpenAI chat-form messages in and out (the Python API for any agent loop).

        The returned message dicts may be shared with later calls' results: treat them as read-only.
        ``whole_turn``: the host assembles the context once per turn and makes the turn's model calls
        itself (OpenClaw); report them with :meth:`record_turn` so the ledger has a row per model call.
        ``api``: the wire API the host's provider speaks, when the host says (:meth:`process`).
        """
        try:
            req = self.chat.decode(messages, tools)
        except Exception as err:  # fail-open (I5): the caller's messages go out as they were
            self.fail.report("codec", err)
            return messages
        out = self.process(req, whole_turn, api=api)
        encoded = self.fail.run("codec", lambda: self.chat.encode(out), {"messages": messages})
        result: list[dict[str, Any]] = encoded["messages"]
        return result

    def _follow(self, cfg: Config) -> None:
        """Every step of the session reads the config in force at this call (:data:`CONFIG_IN_FORCE`
        says when each section applies).

        Why: a user who edits ``eviction.batchTurns`` in config.json mid-session expects the next call
        to use it; the evictor, stabilizer and dedup index used to keep the config the session was
        created with (measured: ``session.cfg`` said 9, the evictor acted on 3)."""
        if cfg is self.cfg:  # the holder hands out the same object until the file changes
            return
        self.cfg = cfg
        self.evictor.reconfigure(cfg.eviction, cfg.estimator)
        self.stabilizer.reconfigure(cfg.stabilizer)
        self.repeats.outputs.max_repeats = cfg.reduction.dedupMaxRepeats

    def _facts(self, errors: Counter[str]) -> CallFacts:
        return CallFacts(
            self.id,
            self.calls,
            self.cfg.mode,
            head_messages=max(1, self.cfg.stabilizer.headMessages),
            evicted_tokens=self.evictor.last_evicted_tokens if self._evicted_now else 0,
            eviction=self._evicted_now,
            eviction_what=self.evictor.describe_last() if self._evicted_now else "",
            paged_out=bool(
                self.evictor.state.batches or self.evictor.state.args or self.evictor.state.collapses
            ),
            errors=dict(errors),
            last_error=self.fail.last.error if errors and self.fail.last else None,
            writer=self.writer,
        )

    def _next_call_facts(self) -> CallFacts:
        """A later model call of a turn the host ran itself: numbered next, no eviction of its own."""
        self.calls += 1
        return replace(self._facts(Counter()), eviction=False, evicted_tokens=0, eviction_what="")

    def record_turn(
        self, turn: list[dict[str, Any]], calls: list[tuple[int, dict[str, Any]]], api: str | None = None
    ) -> int:
        """Ledger rows for the model calls a host made inside one turn it assembled once (OpenClaw).

        ``turn`` is the turn's messages in chat form (the user's prompt first, then each model call's
        reply and the tool results that followed), ``calls`` a ``(position in turn, usage)`` pair per
        model call. Call k received the assembled history plus ``turn[:position]``: the first one is
        the row :meth:`before_model_call` kept back, each later one a new row. Tool results in the turn
        were reduced as they arrived; the without-lightmem2 side counts their originals. Returns the
        number of rows written (0 without a pending turn, or when ``turn`` does not decode).
        """
        decoded: list[Message] | None = None
        if self.recorder.pending and calls:
            try:
                decoded = ChatAdapter.decode_turn(turn)
            except Exception as err:  # fail-open (I5): the turn's first call keeps its row
                self.fail.report("codec", err)
        rows = self.recorder.turn(decoded, calls, self._next_call_facts, api or "")
        if rows:
            self._save()
        return rows

    def after_model_call(
        self, response: Any, usage: dict[str, Any] | None = None, api: str | None = None
    ) -> Any:
        """Restore placeholders in what the model wrote; record the provider's real cache usage.

        ``api`` is ``anthropic``, ``chat`` or ``responses``; guessed from the usage keys when omitted.
        """
        self.settle()  # the usage belongs on this call's row
        self.recorder.usage(usage, api)
        return self.fail.run("restore", lambda: self._restore(response), response)

    def _restore(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.stabilizer.restore(value)
        if isinstance(value, Message):
            parts: list[Any] = []
            for p in value.parts:
                if isinstance(p, TextPart):
                    parts.append(TextPart(self.stabilizer.restore(p.text), dict(p.extra)))
                elif isinstance(p, ToolCallPart):
                    args = self.stabilizer.restore_arguments(p.arguments)
                    parts.append(ToolCallPart(p.id, p.name, args, dict(p.extra)))
                else:
                    parts.append(p)
            return Message(value.role, parts, dict(value.extra), dict(value.hints))
        if isinstance(value, dict):
            out = copy.deepcopy(value)
            if isinstance(out.get("content"), str):
                out["content"] = self.stabilizer.restore(out["content"])
            for call in out.get("tool_calls") or []:
                fn = call.get("function") or {}
                if isinstance(fn.get("arguments"), str):
                    fn["arguments"] = self.stabilizer.restore_arguments(fn["arguments"])
            return out
        return value
