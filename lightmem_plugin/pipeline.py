"""The pipeline: hook points every host adapter calls, and the fail-open runner around them.

    ingest_tool_result   reduce a tool output ONCE as it enters the history (memoised, DESIGN I3)
    before_model_call    stabilise the head, apply the memoised reductions, (aggressive) evict in batches
    after_model_call     restore placeholders in what the model wrote, record real cache usage

Why fail-open (I5): we sit between an agent and its model. Any exception inside a pass returns the
original payload, is counted per pass and shown by ``status``/``doctor``; the host never breaks.
Why memoise by (tool call id, content hash): the reduced form of an output must never change later in
the session, even if the mode changes (mode switches apply to new content only).
"""

from __future__ import annotations

import base64
import copy
import sqlite3
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import xxhash

from .accounting import Accountant, CallFacts, detect_api, real_usage, with_real_usage
from .codecs import openai_chat
from .config import Config, ConfigHolder, data_dir
from .eviction.evictor import Evictor, chat_view
from .eviction.record_render import render as render_record
from .eviction.record_store import LEVELS, RecordStore
from .eviction.session_record import extract
from .ledger import CallRecord, Ledger
from .model import ImagePart, Message, OpaquePart, Request, TextPart, ToolCallPart, ToolResultPart
from .redaction import Redactor
from .reduction import dedup, envelope
from .reduction.base import PassContext, already_reduced
from .reduction.images import reduce_image
from .reduction.linedup import LineIndex
from .reduction.reduce import reduce_text
from .registry import Registry
from .search_index import SearchIndex, index_hook
from .stabilizer import Stabilizer
from .tokens import TokenCounter

T = TypeVar("T")
MAX_SESSIONS = 64
"""Sessions kept in memory per process (least recently used dropped; their reductions are reproducible)."""


@dataclass
class PassFailure:
    """The last failure of a pass, for ``doctor``."""

    name: str
    error: str


class FailOpen:
    """Runs a step; on any exception returns the fallback, counts it and remembers the last error."""

    def __init__(self) -> None:
        self.errors: Counter[str] = Counter()
        self.last: PassFailure | None = None

    def run(self, name: str, fn: Callable[[], T], fallback: T) -> T:
        """``fn()``, or ``fallback`` if it raised (the error is counted under ``name``)."""
        try:
            return fn()
        except Exception as err:  # fail-open by design: the host must never break because of us
            self.errors[name] += 1
            self.last = PassFailure(name, f"{type(err).__name__}: {err}"[:300])
            return fallback


class LightMem:
    """The plugin for one process: config, artifact registry and the sessions it serves."""

    def __init__(
        self, config: Config | None = None, registry: Registry | None = None, ledger: Ledger | None = None
    ) -> None:
        self._holder = None if config is not None else ConfigHolder()
        self.ledger = ledger
        self.records: RecordStore | None = None
        self.counter = TokenCounter()
        self._fixed = config
        cfg = self.config
        root = Path(cfg.registry.dir) if cfg.registry.dir else data_dir() / "artifacts"
        redactor = Redactor(cfg.redaction.enabled, cfg.redaction.extraPatterns)
        self.registry = registry or Registry(root, cfg.registry.maxBytes, redactor)
        self.sessions: OrderedDict[str, Session] = OrderedDict()
        self.active_session: str | None = None  # whose outputs are being archived (for the search index)
        self.max_sessions = MAX_SESSIONS
        self._sessions_lock = threading.Lock()

    @classmethod
    def from_config(cls) -> LightMem:
        """A plugin that follows the user's config file (reloaded when it changes) and keeps a ledger."""
        try:
            ledger: Ledger | None = Ledger.default()
        except (OSError, sqlite3.Error):  # an unusable data dir must not break the host; doctor says why
            ledger = None
        plugin = cls(ledger=ledger)
        plugin.attach_search_index()
        plugin.records = RecordStore(data_dir() / "records", plugin.registry.redactor)
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

    def attach_search_index(self) -> None:
        """Index every new artifact for ``lightmem2 search`` (skipped if the index cannot open)."""
        try:
            index = SearchIndex.default()
        except (OSError, sqlite3.Error):
            return  # search is a convenience: archiving works without it
        self.registry.on_put = index_hook(index, lambda: self.active_session)

    def command(self, line: str) -> str:
        """The reply to a chat command such as ``/lightmem2 status`` (same text as the CLI)."""
        from .cli import run_line

        return run_line(line)[0]

    def session(self, session_id: str) -> Session:
        """The session with this id (created on first use)."""
        with self._sessions_lock:
            found = self.sessions.get(session_id)
            if found is None:
                found = self.sessions[session_id] = Session(self, session_id)
                while len(self.sessions) > self.max_sessions:  # least recently used first
                    self.sessions.popitem(last=False)
            else:
                self.sessions.move_to_end(session_id)
            return found


def _digest(text: str) -> str:
    return str(xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass")))


class Session:
    """Per-session state: reduction memo, dedup index, stabilizer, counters."""

    def __init__(self, plugin: LightMem, session_id: str) -> None:
        self.plugin = plugin
        self.id = session_id
        self.fail = FailOpen()
        self.memo: dict[str, str] = {}
        self.image_memo: dict[str, tuple[str, str] | None] = {}
        self.dedup = dedup.DedupIndex(plugin.config.reduction.dedupMaxRepeats)
        self.lines = LineIndex()
        self.cfg: Config = plugin.config  # read once per call: the holder stats the config file
        self._in_call = False
        self.stabilizer = Stabilizer(plugin.config.stabilizer)
        self.evictor = Evictor(
            plugin.config.eviction, plugin.registry.put, plugin.counter, plugin.config.estimator
        )
        self._evicted_now = False
        self._last_record: dict[str, str] = {}
        # a restarted sidecar or proxy continues the session's call numbering instead of overwriting rows
        self.calls = self._recorded_calls(plugin.ledger, session_id)
        self.passes_override: dict[str, Callable[[str, PassContext], str]] = {}
        # incremental state: the previous call's chat input, decoded and processed messages, encodings
        self._chat_in: list[dict[str, Any]] = []
        self._decoded: list[Message] = []
        self._processed: dict[int, tuple[Message, Message]] = {}
        self._encoded: dict[int, tuple[Message, dict[str, Any]]] = {}
        self._accountant = Accountant(plugin.counter) if plugin.ledger is not None else None
        self.last_record: CallRecord | None = None

    @staticmethod
    def _recorded_calls(ledger: Ledger | None, session_id: str) -> int:
        """Calls the ledger already holds for this session (0 when there is no usable ledger)."""
        if ledger is None:
            return 0
        try:
            return max((r.call_index for r in ledger.calls(session_id)), default=0)
        except (OSError, sqlite3.Error):
            return 0

    # -- ingestion ---------------------------------------------------------------------------------
    def _context(self) -> PassContext:
        cfg = self.cfg
        return PassContext(cfg.mode_table(), cfg.reduction, self.plugin.registry.put)

    def ingest_tool_result(self, call_id: str, output: str) -> str:
        """What the model will see of this tool output; computed once per (call id, content)."""
        self.plugin.active_session = self.id
        # keyed by the id's spelling-independent form: a host may hand the same call twice, spelled
        # two ways (OpenClaw: middleware, then assemble); the second sighting gets the same bytes
        slot = f"{dedup.call_key(call_id)}:{_digest(output)}"
        hit = self.memo.get(slot)
        if hit is not None:
            self.dedup.seen(call_id)
            return hit
        if not self._in_call:  # a host hook ingesting between model calls sees the current config
            self.cfg = self.plugin.config
        # a host's header around the output (exit code, wall time) stays byte-exact: only the body is reduced
        result = self.fail.run(
            "reduction", lambda: envelope.apply(output, lambda body: self._reduce(call_id, body)), output
        )
        self.memo[slot] = result
        return result

    def _reduce(self, call_id: str, output: str) -> str:
        if already_reduced(output) and len(output) <= self.cfg.reduction.hardCapChars:
            return output
        ctx = self._context()
        if "dedup" in ctx.table.passes:
            first = self.dedup.check(call_id, output)
            if first is not None:
                key = ctx.archive(output.encode("utf-8", "surrogatepass"))
                return dedup.reference(first, key, len(output))
        reducer = self.passes_override.get("text", reduce_text)
        deduped = self.lines.reduce(output, ctx.archive) if "dedup" in ctx.table.passes else None
        result = reducer(output, ctx) if deduped is None else reducer(deduped[0], ctx) + "\n" + deduped[1]
        self.lines.add(result)
        return result

    def _ingest_image(self, part: ImagePart) -> ImagePart:
        if part.data is None or "images" not in self.cfg.mode_table().passes:
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
        out = reduce_image(raw, part.media_type or "", self._context())
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
                    f"{part.tool_call_id}#{i}" if i else part.tool_call_id, sub.text
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

    # -- hook points -------------------------------------------------------------------------------
    def process(self, req: Request) -> Request:
        """The transformed request (neutral model); the original on any failure. Writes a ledger row."""
        self.calls += 1
        self.cfg = self.plugin.config
        errors_before = Counter(self.fail.errors)
        self._in_call = True
        try:
            out = self.fail.run("pipeline", lambda: self._process(req), req)
        finally:
            self._in_call = False
        self._record(req, out, self.fail.errors - errors_before)
        return out

    def _evict(self, original: Request, reduced: Request) -> Request:
        """Re-apply past evictions; in a mode with eviction, run a batch when one is due and pays."""
        self._evicted_now = False
        if self.cfg.mode_table().eviction:
            self._evicted_now = self.evictor.maybe_evict(self.calls, original, self.evictor.apply(reduced))
        return self.evictor.apply(reduced)

    def _snapshot_record(self, original: Request) -> None:
        """Persist the session record (every batch of calls, when it changed) for ``lightmem2 resume``."""
        store = self.plugin.records
        assert store is not None
        view, _ids = chat_view(original)
        record = extract(view, self.evictor.tasks, source=self.evictor.estimator)
        renders: dict[str, str] = {level: render_record(record, level) for level in LEVELS}
        if renders != self._last_record:
            store.append(self.id, len(view) - 1, renders)
            self._last_record = renders

    def _process_message(self, msg: Message) -> Message:
        parts = [self._reduce_result(p) if isinstance(p, ToolResultPart) else p for p in msg.parts]
        if all(a is b for a, b in zip(parts, msg.parts, strict=True)):
            return msg
        return Message(msg.role, parts, dict(msg.extra), dict(msg.hints))

    def _process(self, req: Request) -> Request:
        done: dict[int, tuple[Message, Message]] = {}
        messages: list[Message] = []
        for msg in req.messages:
            hit = self._processed.get(id(msg))
            out_msg = hit[1] if hit is not None and hit[0] is msg else self._process_message(msg)
            done[id(msg)] = (msg, out_msg)
            messages.append(out_msg)
        self._processed = done
        out = Request(messages, list(req.tools), dict(req.extra), dict(req.hints))
        out = self.fail.run("eviction", lambda: self._evict(req, out), out)
        if self.plugin.records is not None and self.calls % self.cfg.eviction.batchTurns == 0:
            self.fail.run("record", lambda: self._snapshot_record(req), None)
        return self.fail.run("stabilizer", lambda: self.stabilizer.apply(out), out)

    def _decode_chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Request:
        """Decode, reusing the messages the previous call already decoded (hosts only append)."""
        prev = self._chat_in
        n = 0
        limit = min(len(prev), len(messages))
        while n < limit and (messages[n] is prev[n] or messages[n] == prev[n]):
            n += 1
        fresh = [openai_chat.chat_to_message(m, f"messages[{i}]") for i, m in enumerate(messages[n:], n)]
        top = openai_chat.decode_request(
            {"messages": [], "tools": tools} if tools is not None else {"messages": []}
        )
        self._chat_in, self._decoded = list(messages), self._decoded[:n] + fresh
        return Request(list(self._decoded), top.tools, top.extra, top.hints)

    def _encode_chat(self, req: Request) -> dict[str, Any]:
        """Encode, reusing the dicts of messages that are the same objects as last call."""
        done: dict[int, tuple[Message, dict[str, Any]]] = {}
        out: list[dict[str, Any]] = []
        for i, msg in enumerate(req.messages):
            hit = self._encoded.get(id(msg))
            enc = (
                hit[1]
                if hit is not None and hit[0] is msg
                else openai_chat.message_to_chat(msg, f"messages[{i}]")
            )
            done[id(msg)] = (msg, enc)
            out.append(enc)
        self._encoded = done
        payload = openai_chat.encode_request(Request([], req.tools, req.extra, req.hints))
        payload["messages"] = out
        return payload

    def before_model_call(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> list[dict[str, Any]]:
        """OpenAI chat-form messages in and out (the Python API for any agent loop).

        The returned message dicts may be shared with later calls' results: treat them as read-only.
        """
        try:
            req = self._decode_chat(messages, tools)
        except Exception as err:
            self._chat_in, self._decoded = [], []
            self.fail.errors["codec"] += 1
            self.fail.last = PassFailure("codec", str(err)[:300])
            return messages
        out = self.process(req)
        encoded = self.fail.run("codec", lambda: self._encode_chat(out), {"messages": messages})
        result: list[dict[str, Any]] = encoded["messages"]
        return result

    def _record(self, original: Request, sent: Request, errors: Counter[str]) -> None:
        """One ledger row per call (when the plugin keeps a ledger); never lets accounting break a call."""
        ledger, accountant = self.plugin.ledger, self._accountant
        if ledger is None or accountant is None:
            return
        facts = CallFacts(
            self.id,
            self.calls,
            self.cfg.mode,
            head_messages=max(1, self.cfg.stabilizer.headMessages),
            evicted_tokens=self.evictor.last_evicted_tokens if self._evicted_now else 0,
            eviction=self._evicted_now,
            errors=dict(errors),
            last_error=self.fail.last.error if errors and self.fail.last else None,
        )

        def write() -> None:
            self.last_record = accountant.account(facts, original, sent)
            ledger.record_call(self.last_record)

        self.fail.run("ledger", write, None)

    def after_model_call(
        self, response: Any, usage: dict[str, Any] | None = None, api: str | None = None
    ) -> Any:
        """Restore placeholders in what the model wrote; record the provider's real cache usage.

        ``api`` is ``anthropic``, ``chat`` or ``responses``; guessed from the usage keys when omitted.
        """
        rec, ledger = self.last_record, self.plugin.ledger
        if rec is not None and ledger is not None and usage:
            kind = api or detect_api(usage)

            def write() -> None:
                self.last_record = with_real_usage(rec, kind, real_usage(kind, usage))
                ledger.record_call(self.last_record)

            self.fail.run("ledger", write, None)
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
