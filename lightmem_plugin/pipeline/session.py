"""One conversation: the coordinator of a call (DESIGN 2: begin, then settle once the request is sent).

A session is four parts, each a module of its own: the chat adapter (:mod:`~lightmem_plugin.wire.chat.adapter`),
the transformer chain (:mod:`.session_chain`, the session's base: :attr:`Session.STEPS` reduce, evict,
stabilise, call ids), the decisions it took (:mod:`.session_snapshot`, written and read back by
:mod:`.session_persistence`) and the recorder (:mod:`~.metering.recorder`). What is left here is the
order a call runs them in: the hook points, begin and settle. Why apart from
:class:`~lightmem_plugin.pipeline.LightMem`: that one holds a process's config, stores and sessions;
this one is a single conversation, read on its own.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .. import wire
from ..codecs._common import Reuse
from ..codecs.memo import Interned, PerObject
from ..config import Config
from ..eviction import cold_cache
from ..eviction.break_cost import break_cost
from ..eviction.evictor import Evictor
from ..faults import FailOpen
from ..metering.accounting import HOST_COMPACTION, CallFacts
from ..metering.prices import price_for
from ..metering.recorder import Recorder
from ..model import Message, Request
from ..prefix import cache_ttl
from ..prefix.call_ids import Respeller, respellable
from ..prefix.stabilizer import Stabilizer
from ..reduction.dedup import DedupIndex, Repeats
from ..reduction.kinds import ToolCall
from ..reduction.reduce import TextReducer
from ..store.ledger import CallRecord
from ..store.search_index import indexing_later
from ..store.session_state import Journal
from ..wire.chat.adapter import ChatAdapter
from .session_chain import Plugin, SessionChain, restored
from .session_persistence import SessionPersistence, recorded_calls


class Session(SessionChain):
    """One conversation: a chat adapter, the transformer chain and the decisions it took, a recorder.

    - :class:`~lightmem_plugin.wire.chat.adapter.ChatAdapter` decodes chat-form messages into the neutral model and
      encodes them back, incrementally (hosts only append);
    - the transformer chain (:class:`~.pipeline.session_chain.SessionChain`, its base: :data:`STEPS`
      reduce, evict, stabilise, call ids) maps the request the host sent to the one the model sees;
      each step is fail-open on its own;
    - the decisions the chain took over time (:mod:`~.pipeline.session_snapshot`) persist in the session
      store after every call (:mod:`~.pipeline.session_persistence`), so a restarted process sends the
      same bytes;
    - :class:`~lightmem_plugin.metering.recorder.Recorder` writes one ledger row per model call.
    """

    def __init__(self, plugin: Plugin, session_id: str) -> None:
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
        self.calls = recorded_calls(plugin.ledger, session_id)
        self.last_record_renders: dict[str, str] = {}  # the session record last stored, per level
        # -- per process --
        self.chat = ChatAdapter()
        self.codec_reuse = Reuse()  # a proxy's wire codecs decode and encode only what changed
        self.respeller = Respeller()
        self._respelling = False  # this call's ids go out short (decided per request, see call_ids)
        self.recorder = Recorder(plugin.ledger, plugin.counter, plugin.registry.peek, self.fail)
        self.model = ""  # the model the last request named ('' when none): what its row is priced as
        self._respelled_ids = False
        self._evicted_now = False
        self.host_event = ""
        """What the host itself did at the next call, for its ledger row (the proxy sets it: a Codex
        compaction, :mod:`lightmem_plugin.server.codex_compaction`); cleared by :meth:`begin`."""
        self._record_call = 0  # the call the session record was last snapshotted at
        self.passes_override: dict[str, TextReducer] = {}  # tests: replace the text passes
        self._processed: PerObject[Message, Message] = PerObject(self._process_message)
        self._interned: Interned[Message] = Interned()  # a proxy's fresh objects -> last call's (memo)
        self._tool_calls: dict[str, ToolCall] = {}
        self.prefer_shell = False  # stubs name the shell command (see reduction.base.prefers_shell)
        self.cache_provider: str | None = None  # whose cache holds the prompt (set at each call)
        self.proxy_respells = False
        """Outputs ingested outside a request reach the model through this plugin's proxy on a wire
        whose ids it respells (a Claude Code hook whose ``ANTHROPIC_BASE_URL`` is our ``serve``), so a
        repeat may name the short id; otherwise a hook's repeat names no call."""
        # ledger rows of this session object: another process serving the same session writes its own
        # (never shown to the model, so a random id costs no determinism)
        self.writer = os.urandom(6).hex()
        # -- the provider's cache over time (decisions only: never in model text) --
        self.clock: Callable[[], float | None] = time.time
        """Epoch seconds now, for telling a call whose provider cache went cold (:mod:`..eviction.cold_cache`);
        a replay sets one that knows no time and passes each recorded call's time (``now``) instead."""
        self.cold = cold_cache.WARM
        """This call's verdict: cold after a pause past the TTL in force (its break is priced free)."""
        self.cold_starts: list[tuple[int, str]] = []
        """(call number, code) of every call of this session object that met a cold cache, by a pause
        or by a drop its usage showed (the ledger keeps them for ``status`` and ``report``)."""
        self.cache_used_at: float | None = None
        """When the provider last used this session's cache, as far as seen (epoch seconds): the last
        call's start, when it processed the prompt, or later (an answer, a turn's calls). Persisted, so
        a session reloaded after it left memory still sees the pause."""
        self._clocked = False  # this call's time came from :attr:`clock` (not from the caller's ``now``)
        self._left: tuple[int, int | None] | None = None  # (call, tokens it left cached), from its usage
        self.persistence = SessionPersistence(plugin, session_id, self.fail)
        self.persistence.load(self)

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
    def host(self) -> str | None:
        """The host this session serves (``claude-code``, ``openclaw``; None: not known), whose
        compaction threshold the evictor stays under (:mod:`..eviction.compacting`)."""
        return self.evictor.host

    @host.setter
    def host(self, value: str | None) -> None:
        self.evictor.host = value

    @property
    def evicted_now(self) -> bool:
        """True when this call's eviction batch paged something out (the prefix changed)."""
        return self._evicted_now

    @property
    def journal(self) -> Journal | None:
        """The session's link to the session store (None without one); its version says whether
        another process wrote the session since (:meth:`LightMem.session` reloads it then)."""
        return self.persistence.journal

    @property
    def last_record(self) -> CallRecord | None:
        """The ledger row of the last call (with the provider's usage once it came)."""
        return self.recorder.last

    def _save(self) -> None:
        """Write what this call decided (:meth:`.session_persistence.SessionPersistence.save`)."""
        self.persistence.save(self)

    # -- hook points -------------------------------------------------------------------------------
    def process(
        self,
        req: Request,
        whole_turn: bool = False,
        request_key: str | None = None,
        api: str | None = None,
        now: float | None = None,
    ) -> Request:
        """The transformed request (neutral model); the original on any failure. Writes a ledger row
        (with ``whole_turn``, when :meth:`record_turn` brings the calls the host made inside the turn).
        ``request_key`` identifies the host's request bytes (the proxy's): the same key again as the
        first call after a reload is a retry of the stored last call (:mod:`.session_persistence`). ``api``:
        the wire API the request came in on (:data:`..wire.NAMES`); its provider's cache prices an
        eviction's break (None: the Python API, a prefix cache unless ``eviction.cacheModel`` says).
        ``now``: when the call is made (epoch seconds; None: :attr:`clock`), for its cache verdict."""
        out = self.begin(req, whole_turn, request_key, api, now)
        self.settle()
        return out

    def begin(
        self,
        req: Request,
        whole_turn: bool = False,
        request_key: str | None = None,
        api: str | None = None,
        now: float | None = None,
    ) -> Request:
        """:meth:`process` up to the transformed request; its bookkeeping (the ledger row, the saved
        state) waits for :meth:`settle`, which the next call of the session runs first if nobody did.

        Why: the proxy sends the request upstream first and settles while the provider works, so the
        host waits only for the transformation (measured with host-like load: the bookkeeping was a
        third of the time the proxy added before the first byte)."""
        self.settle()
        req = replace(req, messages=self._interned.map(req.messages))
        self.persistence.begin(self, request_key)
        self.recorder.flush()
        self.plugin.active_session = self.id  # evictions archive too, with no new output ingested
        self.calls += 1
        self._follow(self.plugin.config)
        at = now if now is not None else self.fail.run("cold_cache", self.clock, None)
        self.cache_provider = self.fail.run("cold_cache", lambda: self._provider(req, api), None)
        self.cold = self.fail.run("cold_cache", lambda: self._verdict(req, api, at), cold_cache.WARM)
        self.cache_used_at, self._clocked = at, now is None
        if self.cold.cold:
            self.cold_starts.append((self.calls, self.cold.code))
        self.evictor.break_cost = break_cost(
            self.cfg.eviction.cacheModel,
            wire.get(api).cache_model if api in wire.NAMES else None,
            cold=self.cold.cold,
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
        named = req.extra.get("model")
        self.model = named if isinstance(named, str) else ""
        facts = self._facts(self.fail.errors - errors_before)
        self.host_event = ""
        self._unsettled = lambda: self._bookkeep(facts, req, out, whole_turn, later)
        return out

    def _provider(self, req: Request, api: str | None) -> str | None:
        """Whose cache holds the prompt, for its default TTL: Anthropic's where the wire API or
        ``eviction.cacheModel`` says so, else the provider of the model the request names (its list
        price's), else None (unknown: no pause is known to make a call cold)."""
        if (api in wire.NAMES and wire.get(api).cache_model == "anthropic") or (
            self.cfg.eviction.cacheModel == "anthropic"
        ):
            return "anthropic"
        named = req.extra.get("model")
        price = price_for(named, self.cfg.prices) if isinstance(named, str) and named else None
        return price.provider if price is not None else None

    def _verdict(self, req: Request, api: str | None, at: float | None) -> cold_cache.Verdict:
        """Whether this call finds the provider's cache cold: a pause since the cache was last used
        longer than the TTL in force (``eviction.cacheTtlS``, else the request's, else the provider's)."""
        setting = self.cfg.eviction.cacheTtlS
        if setting is not None:  # what the request asks would not count: no need to read it
            return cold_cache.by_pause(self.cache_used_at, at, setting)
        provider = self.cache_provider
        asked = cache_ttl.asked(self.cfg.stabilizer.cacheTtl, provider)  # what lightmem2 will ask
        requested = asked if asked is not None else cold_cache.requested_ttl(req, provider)
        ttl = cold_cache.ttl_in_force(provider, requested, None)
        return cold_cache.by_pause(self.cache_used_at, at, ttl)

    def _used_now(self) -> None:
        """The provider used the session's cache until now at the latest (an answer came, a turn's
        calls ended): a long OpenClaw turn, whose own calls read the cache, is no pause. Later than
        the real use (the prompt is cached as it is read, before the answer), so a pause is never
        overstated. Only on the session's own clock: a caller that passes each call's time (a replay)
        keeps its time line."""
        at = self.fail.run("cold_cache", self.clock, None) if self._clocked else None
        if at is not None:
            self.cache_used_at = at

    def _drop_shown(self) -> None:
        """The last call's usage, against what the call before it left cached: a drop makes that call a
        cold start of its own (counted and written on its row; it prices no break: it wrote the prompt
        again, so the next call finds it)."""
        rec = self.recorder.last
        if rec is None or not rec.has_real_usage:
            return
        left = self._left[1] if self._left is not None and self._left[0] == rec.call_index - 1 else None
        # the host's own change (Codex's summarising request sends no tools) is no drop of the cache
        host_changed = (rec.break_reason or "").startswith(HOST_COMPACTION)
        verdict = cold_cache.by_drop(
            left, rec.real_hit_tokens, rec.prefix_break_at is None and not host_changed
        )
        if verdict.cold and not rec.cold_start:
            self.cold_starts.append((rec.call_index, verdict.code))
            self.recorder.mark_cold(verdict.code)
        self._left = (
            rec.call_index,
            cold_cache.left_cached(rec.real_cache_read, rec.real_cache_creation, rec.real_input_tokens),
        )

    def _context_used(self, usage: dict[str, Any], api: str | None) -> None:
        """The input the provider counted for the last call: how the evictor learns the host's count of
        the context (:class:`..eviction.compacting.Gauge`)."""
        name = api if api in wire.NAMES else wire.for_usage(usage).name
        self.evictor.usage(wire.get(name).usage(usage).input_tokens or 0)

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
        self.persistence.request_key = None

    def before_model_call(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        whole_turn: bool = False,
        api: str | None = None,
        model: str | None = None,
        now: float | None = None,
    ) -> list[dict[str, Any]]:
        """OpenAI chat-form messages in and out (the Python API for any agent loop).

        The returned message dicts may be shared with later calls' results: treat them as read-only.
        ``whole_turn``: the host assembles the context once per turn and makes the turn's model calls
        itself (OpenClaw); report them with :meth:`record_turn` so the ledger has a row per model call.
        ``api``: the wire API the host's provider speaks, when the host says (:meth:`process`).
        ``model``: the model the call goes to, when the host says; its ledger row is priced as that
        model (:mod:`lightmem_plugin.metering.prices`), as the proxy prices a request naming one.
        ``now``: when the call is made (epoch seconds; None: the session's :attr:`clock`), which decides
        whether the provider's cache went cold since the previous call (a replay passes recorded times).
        """
        try:
            req = self.chat.decode(messages, tools)
        except Exception as err:  # fail-open (I5): the caller's messages go out as they were
            self.fail.report("codec", err)
            return messages
        if model:
            req = replace(req, extra={**req.extra, "model": model})
        out = self.process(req, whole_turn, api=api, now=now)
        encoded = self.fail.run("codec", lambda: self.chat.encode(out), {"messages": messages})
        result: list[dict[str, Any]] = encoded["messages"]
        return result

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
            model=self.model,
            # the price under the config in force at this call (an edit of `prices` prices the next)
            price=self.fail.run("prices", lambda: price_for(self.model, self.cfg.prices), None),
            cold_start=self.cold.code or None,
            host_event=self.host_event,
        )

    def _next_call_facts(self) -> CallFacts:
        """A later model call of a turn the host ran itself: numbered next, no eviction of its own."""
        self.calls += 1
        return replace(
            self._facts(Counter()),
            eviction=False,
            evicted_tokens=0,
            eviction_what="",
            cold_start=None,
            host_event="",
        )

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
        self._used_now()
        if calls:  # the turn's first call received the assembled history: the gauge's pair (compacting)
            first = min(calls, key=lambda c: c[0])[1]
            self.fail.run("eviction", lambda: self._context_used(first, api), None)
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
        self._used_now()
        if usage:
            self.fail.run("cold_cache", self._drop_shown, None)
            self.fail.run("eviction", lambda: self._context_used(usage, api), None)
        return self.fail.run("restore", lambda: restored(self.stabilizer, response), response)
