"""Replay recorded sessions through a policy and measure cost K, hit rate, retention and overhead.

Why replay: the only honest way to know whether a change saves money without losing what the agent
needs is to run the very calls a real agent made. Each call's prompt is transformed by the policy
(vanilla, a lightmem2 mode, or a benchmark baseline), cut into per-message token chunks, fed to a
provider prefix-cache model (``cachesim``) in order, and judged by the retention metric
(``retention``) against what the agent wrote next.

Beside K, each session reports **K charged** (K plus one recover round trip for every later use that
is only recoverable, priced as in ``retention``), retention by span and by whole line, the share of
error lines still shown while their output is the newest of its command, and the lines shown outside
lightmem2 stubs that are not lines of the original output (``fidelity``).

The cache has time (``clock="recorded"``, the default): prefixes expire over the recorded pauses,
and the provider's own short reads and warm heads are taken from the recording (:mod:`.luck`), so every
policy meets the provider the recorded session met; each session also gives the K the provider
really billed for it (``recorded_K``), the residual the calibration is judged by: simulated vanilla
K within 1.3% of the bill on every dev Claude Code session. ``clock="none"`` is the earlier model, a
cache that never forgets (it put those sessions 17-30% under their bill).

``--head volatile`` is a constructed scenario, labelled as such in every report: the same sessions with
a system prompt whose date/time line and runtime stats change on every call, as OpenClaw users report
from custom heads; it is where the stabilizer must win.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import xxhash

from ..codecs.memo import PerObject
from ..config import Config, Mode
from ..errors import LightMemError
from ..metering.cachesim import default_breakpoints, k_cost, make_cache
from ..metering.chat_tokens import REQUEST_OVERHEAD_TOKENS, ChatChunker, chat_key, head_chunk
from ..metering.misses import Cause, Shape, Totals, attribute, cause_dicts
from ..metering.prices import money_of
from ..pipeline import LightMem
from ..prefix import cache_ttl
from ..prefix.stabilizer import TAIL_PREFIX
from ..reduction.base import prefers_shell
from ..store.registry import Registry
from ..store.sealing import Sealer
from ..tokens import TokenCounter
from . import miss_shape
from .compaction import INSTRUCTION_TOKENS, HostCompactor, host_limit
from .fidelity import ChangedLinesTracker
from .luck import HOUR_S, Luck, answers_cached, chosen_ttl, recorded_luck
from .retention import RetentionTracker, prompt_text, recover_charge
from .traces import TraceSource, is_sqlite, load_trace, store_sessions
from .traces.base import Trace, TraceCall, appends_to

Head = Literal["plain", "volatile"]
Clock = Literal["recorded", "none"]
Compaction = Literal["modelled", "recorded"]
ChatMessage = dict[str, Any]


class SessionPolicy(Protocol):
    """One session's transformer: call index and prompt in, the prompt the model would see out."""

    def transform(self, index: int, prompt: list[ChatMessage]) -> list[ChatMessage]: ...

    def lookup(self, key: str) -> str | None: ...


PolicyFactory = Callable[[Trace], SessionPolicy]


class Vanilla:
    """The host as it is: the prompt passes unchanged. ``ttl``: the cache TTL its requests ask for
    (seconds; None: as recorded), as a host that asks for a longer one itself would."""

    def __init__(self, ttl: float | None = None) -> None:
        self.ttl = ttl

    def transform(self, index: int, prompt: list[ChatMessage]) -> list[ChatMessage]:
        return prompt

    def lookup(self, key: str) -> str | None:
        return None


def called_tools(trace: Trace) -> list[str]:
    """The names of the tools the trace's agent called, sorted."""
    names: set[str] = set()
    for call in trace.calls:
        for message in call.prompt:
            for tool_call in message.get("tool_calls") or ():
                name = (tool_call.get("function") or {}).get("name") if isinstance(tool_call, dict) else None
                if isinstance(name, str):
                    names.add(name)
    return sorted(names)


class LightMemPolicy:
    """A lightmem2 mode, through the same Python API the adapters use, with a private registry.

    With the recorded ``clock``, each call is made at its recorded time (``TraceCall.at``) and the
    session keeps the prefix as long as the replay's cache model does (:func:`.luck.chosen_ttl`), so it
    meets the same pauses: where the cache model expires the prefix, the session's call is cold too.
    Without (``clock="none"``, a cache that never forgets), the session knows no time either."""

    def __init__(
        self, trace: Trace, mode: Mode, root: Path, config: Config | None = None, clock: Clock = "recorded"
    ) -> None:
        cfg = (config or Config()).model_copy(update={"mode": mode})
        eviction: dict[str, Any] = {}
        if cfg.eviction.cacheModel == "auto":  # the replay calls the Python API: say which cache it is
            eviction["cacheModel"] = "anthropic" if trace.provider == "anthropic" else "prefix"
        self.ttl = cache_ttl.asked(cfg.stabilizer.cacheTtl, trace.provider) if clock == "recorded" else None
        """The TTL this session's requests ask for (``stabilizer.cacheTtl``; None: as recorded)."""
        if cfg.eviction.cacheTtlS is None:  # the TTL the cache model applies (no time: no expiry)
            chosen = chosen_ttl(trace, trace.provider, self.ttl) if clock == "recorded" else None
            eviction["cacheTtlS"] = chosen
        if eviction:
            cfg = cfg.model_copy(update={"eviction": cfg.eviction.model_copy(update=eviction)})
        self.times = [c.at for c in trace.calls] if clock == "recorded" else []
        # sealed as in a real install (archives exact, so recovers are judged on the real bytes); the
        # key lives only for the replay
        registry = Registry(
            root / "artifacts", sealer=Sealer(os.urandom(32)) if cfg.registry.encrypt else None
        )
        self.plugin = LightMem(config=cfg, registry=registry)
        self.session = self.plugin.session(trace.id)
        # stubs name the recovery the recorded host would have (recoverHint "auto"): the prompts list no
        # tools, so judge by the tools called. mini-swe-agent has bash alone, and Claude Code's hooks
        # name the shell command too: a replay that named lightmem2_recover sent other bytes than
        # those hosts get (seen in a review of the swe dumps)
        self.session.prefer_shell = prefers_shell(called_tools(trace))
        self.session.clock = lambda: None  # the replay's time is the recording's, never the wall clock's
        self.session.host = trace.kind  # as the sidecar (OpenClaw) says; its compaction threshold
        self.evicted_cold = 0
        """Calls at which a batch paged out while the cache was cold (its break priced free)."""

    def transform(self, index: int, prompt: list[ChatMessage]) -> list[ChatMessage]:
        now = self.times[index] if index < len(self.times) else None
        out = self.session.before_model_call(prompt, now=now)
        self.evicted_cold += self.session.cold.cold and self.session.evicted_now
        return out

    def observe(self, usage: dict[str, Any], api: str) -> None:
        """The provider's usage of the call just sent, as a proxy hands it on (``after_model_call``)."""
        self.session.after_model_call(None, usage=usage, api=api)

    def left_at(self, call: int) -> int | None:
        """The call (0-based, as ``transform`` numbers them) from which what the agent added at
        ``call`` is no longer sent: the collapse of the finished task it belongs to, if there was
        one. A recover round trip made in a task leaves with it; K charged counts it until then."""
        state = self.session.evictor.state
        task = sum(1 for g in state.goal_calls if g <= call + 1)  # goal n + 1 first seen at goal_calls[n]
        for c in state.collapses:
            if c.number == task and c.call_index - 1 > call:
                return c.call_index - 1
        return None

    def lookup(self, key: str) -> str | None:
        try:
            return self.plugin.registry.recover(key)
        except LightMemError:  # unknown or corrupt key: the span counts as lost, which is the point
            return None


def policy_for(
    name: str, root: Path, config: Config | None = None, clock: Clock = "recorded"
) -> PolicyFactory:
    """``vanilla`` or a mode name -> a factory of per-session policies (``clock``: the replay's)."""
    if name == "vanilla":  # the host asking the TTL ``stabilizer.cacheTtl`` chooses
        choice = config.stabilizer.cacheTtl if config is not None and clock == "recorded" else "host"
        return lambda trace: Vanilla(cache_ttl.asked(choice, trace.provider))
    mode: Mode = name  # type: ignore[assignment]
    return lambda trace: LightMemPolicy(
        trace, mode, root / xxhash.xxh3_64_hexdigest(trace.id.encode()), config, clock
    )


def volatile_head(prompt: list[ChatMessage], index: int, used_tokens: int) -> list[ChatMessage]:
    """The constructed volatile-head scenario: a per-call clock and runtime stats in the system prompt."""
    secs = 5 * 3600 + 34 * 60 + 17 * index
    stamp = f"2026-11-30T{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}Z"
    line = f"Current time: {stamp}\nRuntime: call {index + 1}, tokens used so far: {used_tokens}\n\n"
    if prompt and prompt[0].get("role") == "system" and isinstance(prompt[0].get("content"), str):
        return [dict(prompt[0], content=line + prompt[0]["content"]), *prompt[1:]]
    # transcripts without their system prompt (Claude Code): the host's head is a system message of its own
    return [{"role": "system", "content": line + "You are a coding agent."}, *prompt]


@dataclass
class SessionResult:
    """Figures of one replayed session."""

    id: str
    kind: str
    provider: str
    calls: int = 0
    input_tokens: int = 0
    hit_tokens: int = 0
    miss_tokens: int = 0
    write_tokens: int = 0
    K: float = 0.0
    recorded_prompt_tokens: int = 0
    recorded_cached_tokens: int = 0
    recorded_K: float = 0.0
    """What the provider billed the recorded session, in K (its own reads, writes and misses)."""
    cache_ttl_s: float | None = None
    """Seconds the replay's cache kept a prefix (what the policy's requests asked, else as recorded;
    None: no expiry)."""
    cold_starts: int = 0
    """Calls that found their cached prefix expired after a pause."""
    session_cold_starts: int = 0
    """Calls the policy's own session found cold (a lightmem2 mode: the pauses it met, as the cache
    model applies them; :mod:`..eviction.cold_cache`)."""
    evictions_at_cold: int = 0
    """Of those, calls at which an eviction batch paged out (its break priced free)."""
    short_reads: int = 0
    """Calls at which the recorded provider read less than it held (every policy reads as little)."""
    output_tokens: int = 0
    """What the model wrote: the recorded answers (the same for every policy) and the summaries of the
    host's compactions."""
    host_compactions: int = 0
    """Compactions the host made in this replay (modelled past its threshold, or as recorded)."""
    compacted_before: list[int] = field(default_factory=list)
    """The calls (0-based) before which the host compacted in this replay."""
    recorded_compactions: int = 0
    """Compactions the host made in the recorded session."""
    compaction_output_tokens: int = 0
    """The summaries the host's compactions wrote (output tokens, in ``output_tokens`` too)."""
    lost_to_compaction: int = 0
    """Uses lost because the host's compaction took their output out of the history (of ``lost``)."""
    usd: float | None = None
    """The session in money at the model's list price (:mod:`..metering.prices`), output included;
    None when no price is known for the model."""
    recorded_usd: float | None = None
    """What the provider billed the recorded session, at the same prices."""
    uses: int = 0
    kept: int = 0
    recoverable: int = 0
    lost: int = 0
    kept_lines: int = 0
    recoverable_lines: int = 0
    lost_lines: int = 0
    error_pairs: int = 0
    error_pairs_kept: int = 0
    task_uses: int = 0
    task_kept: int = 0
    task_kept_lines: int = 0
    said_uses: int = 0
    said_kept: int = 0
    said_recoverable: int = 0
    said_lost: int = 0
    recovers: int = 0
    recovered_tokens: int = 0
    K_charged: float = 0.0
    K_charged_all: float = 0.0  # also a recover for each reuse of the agent's own words that left
    lines_shown: int = 0
    lines_changed_outside_stubs: int = 0
    overhead_ms: list[float] = field(default_factory=list)
    misses: list[dict[str, Any]] = field(default_factory=list)
    """Per call with uncached input: ``{"call", "causes"}``, each cause's tokens, money and what happened
    (:mod:`..metering.misses`; a host compaction's summarising call is ``"call": "summary before N"``)."""
    miss_causes: dict[str, Any] = field(default_factory=dict)
    """The session's uncached input by cause (:meth:`..metering.misses.Totals.as_dict`)."""
    uncached_usd: float | None = None
    """The session's uncached input in money, priced apart from the causes (cache writes at the write
    price, misses at the input price): the causes' money sums to it."""


def split_tail(prompt: list[ChatMessage]) -> tuple[list[ChatMessage], str | None]:
    """Split the stabilizer's per-call tail block off the last message.

    On Anthropic the tail is a separate text block after the block that carries ``cache_control``, so
    the cached prefix ends before it; the cache model must see it the same way.
    """
    last = prompt[-1] if prompt else None
    content = last.get("content") if last else None
    if not isinstance(content, str) or TAIL_PREFIX not in content:
        return prompt, None
    cut = content.rindex(TAIL_PREFIX)
    return [*prompt[:-1], {**prompt[-1], "content": content[:cut]}], content[cut:]


def replay_trace(
    trace: Trace,
    policy: SessionPolicy,
    provider: str | None = None,
    head: Head = "plain",
    dump: Path | None = None,
    counter: TokenCounter | None = None,
    clock: Clock = "recorded",
    compaction: Compaction = "modelled",
) -> SessionResult:
    """Replay one trace through ``policy``; optionally write each transformed prompt to ``dump``.

    ``compaction``: ``modelled`` starts from the history as if the host had not compacted and
    compacts where the host's rule (:mod:`.compaction`) says, on the context the policy sent;
    ``recorded`` replays the prompts as the host sent them, compacted where it compacted.
    """
    provider = provider or trace.provider
    counter = counter or TokenCounter()
    chunker = ChatChunker(counter.encode, head=0)
    head_tokens = _head_tokens(trace, counter)
    cache = make_cache(provider)
    asked = getattr(policy, "ttl", None)  # optional: the TTL the policy's requests ask for
    luck = recorded_luck(trace, provider, asked) if clock == "recorded" else Luck()
    cache.ttl = luck.ttl
    # the answer cached with its prompt: as the recording shows, else as the provider does
    shown = answers_cached(trace) if provider == trace.provider else None
    answers = cache.caches_output if shown is None else shown
    if luck.warm:
        cache.warm(luck.warm)
    # the head in the blocks the host sends it in: where an earlier session left part of it cached
    # (the tool definitions, before the system prompt), that part ends a block and a breakpoint
    cut = luck.warm if 0 < luck.warm < head_tokens else head_tokens
    head_blocks = [head_chunk(n) for n in (cut, head_tokens - cut) if n > 0]
    # only where the transcript is known to hold less than was sent (Claude Code keeps thinking as a
    # summary); elsewhere the difference is the provider's tokenizer, not unseen input
    unseen = clock == "recorded" and trace.kind == "claude-code"
    hidden = HiddenInput.of(trace, chunker, head_tokens) if unseen else None
    # a policy whose stubs are not lightmem2's (a peer) says how to find the keys they name
    tracker = RetentionTracker(policy.lookup, getattr(policy, "stub_keys", None))
    fidelity = ChangedLinesTracker()
    res = SessionResult(trace.id, trace.kind, provider)
    res.cache_ttl_s = luck.ttl
    res.recorded_compactions = len(trace.compactions)
    host = None
    if compaction == "modelled":
        limit = host_limit(trace)
        host = HostCompactor(
            trace, limit.threshold, lambda ms: sum(map(len, chunker.chunks(ms))), limit.keep_recent
        )
    summarised = ""  # the text of the history the latest compaction took away
    sink = dump.open("w", encoding="utf-8") if dump else None
    used = 0
    reported = 0  # the previous call's input and output, as the provider reported them to the host
    scale = 1.0  # the provider's tokens per token counted here (its tokenizer is not ours)
    sent: tuple[list[Any], list[Any]] = ([], [])  # the previous call's chunks and their keys
    sent_body: list[ChatMessage] = []  # and its messages
    prev_original: list[ChatMessage] = []  # the host's previous prompt
    misses = _Misses(provider, trace.model, luck.ttl == HOUR_S)
    try:
        for i, call in enumerate(trace.calls):
            size = host.due(i, reported, scale) if host else None
            host_compacted = False
            if host and size is not None:
                host.compact(i, size)
                host_compacted = True
                summary = _summarising_call(trace, i, sent, chunker, provider, len(head_blocks))
                usage = cache.observe(*summary, call.at if clock == "recorded" else None)
                _add_usage(res, usage)
                what = "the host's summarising call reads the whole history"
                shape = Shape(usage.input_tokens, 0, 0, "host compaction", what)
                misses.add(f"summary before {i}", shape, usage)
                res.compaction_output_tokens += host.done[-1].summary_tokens
                summarised = prompt_text(trace.calls[i].uncompacted)
            elif host is None and any(c.before_call == i for c in trace.compactions):
                summarised = prompt_text(trace.calls[i].uncompacted)
                host_compacted = True
            original = host.prompt(i) if host else call.prompt
            prompt = volatile_head(original, i, used) if head == "volatile" else original
            t0 = time.perf_counter()
            out = policy.transform(i, prompt)
            res.overhead_ms.append((time.perf_counter() - t0) * 1000)
            body, tail = split_tail(out) if provider == "anthropic" else (out, None)
            chunks, body_keys = chunker.pieces(body)
            if hidden:
                chunks, body_keys = hidden.place(body, chunks, body_keys)
            keys: list[Any] = [("head", n, len(b)) for n, b in enumerate(head_blocks)]
            chunks = [*head_blocks, *chunks]
            keys += body_keys
            marks = default_breakpoints(chunks, len(head_blocks)) if provider == "anthropic" else None
            if tail is not None:  # the per-call tail is its own block after the breakpoint
                chunks = [*chunks, list(counter.encode(tail))]
                keys.append(("tail", tail))
            cap = luck.caps.get(i)
            res.short_reads += cap is not None
            at = call.at if clock == "recorded" else None
            if answers and i:
                _cache_answer(cache, chunker, sent, len(sent_body), trace.calls[i - 1], body)
            usage = cache.observe(chunks, marks, keys, at, cap)
            if usage.miss_tokens:

                def new_of(k: int, body: list[ChatMessage] = body) -> int:
                    last = body[len(body) - k :]
                    return sum(map(len, chunker.pieces(last)[0])) + (hidden.tokens(last) if hidden else 0)

                before = trace.calls[i - 1].at if i else None
                gap = None if at is None or before is None else at - before
                shape = miss_shape.shape(
                    i,
                    usage.input_tokens,
                    miss_shape.common_tokens(sent, chunks, keys) if i else 0,
                    new_of,
                    len(chunks[-1]) if tail is not None else 0,
                    prev_original if i else None,
                    original,
                    host_compacted,
                    _idle(gap, cache.ttl) if usage.cold else None,
                    _what_policy_did(policy),
                    "lightmem2" if getattr(policy, "session", None) is not None else "peer",
                )
                misses.add(i, shape, usage)
            prev_original = original
            sent, sent_body = (chunks, keys), body
            if host and call.prompt_tokens:
                # what the host reads in the provider's usage: our count of what the policy sent, in the
                # provider's tokens (so that vanilla meets its threshold at the recorded call)
                recorded = head_tokens + sum(map(len, chunker.chunks(call.prompt)))
                scale = call.prompt_tokens / (recorded + (hidden.tokens(call.prompt) if hidden else 0))
            reported = round(usage.input_tokens * scale) + (call.completion_tokens or 0)
            observe = getattr(policy, "observe", None)  # optional: the usage a proxy would hand on
            if observe is not None:
                observe(*_usage_seen(usage, scale, call.completion_tokens or 0, provider))
            res.cold_starts += usage.cold
            res.recorded_K += _recorded_k(call, luck.recorded_write_factor)
            used += usage.input_tokens
            res.calls += 1
            _add_usage(res, usage)
            res.recorded_prompt_tokens += call.prompt_tokens
            res.recorded_cached_tokens += call.cached_tokens
            # the agent's history is the whole one: a use of what the host's compaction took away is lost
            uses = tracker.add_call(call.uncompacted if host else call.prompt, out, call.output, original)
            if summarised:
                res.lost_to_compaction += sum(u.verdict == "lost" and u.span in summarised for u in uses)
            fidelity.add_call(original, out)
            if sink:
                sink.write(json.dumps({"messages": out}, ensure_ascii=False) + "\n")
    finally:
        if sink:
            sink.close()
    r = tracker.result()
    res.uses, res.kept, res.recoverable, res.lost = r.uses, r.kept, r.recoverable, r.lost
    res.kept_lines, res.recoverable_lines, res.lost_lines = r.kept_lines, r.recoverable_lines, r.lost_lines
    res.error_pairs, res.error_pairs_kept = r.error_pairs, r.error_pairs_kept
    res.task_uses, res.task_kept, res.task_kept_lines = r.task_uses, r.task_kept, r.task_kept_lines
    res.said_uses, res.said_kept = r.said_uses, r.said_kept
    res.said_recoverable, res.said_lost = r.said_recoverable, r.said_lost
    gone = getattr(policy, "left_at", None)  # optional: when what a call added left the context

    def charged(rec: Any) -> tuple[int, int, int | None]:
        return rec.call, counter.count(rec.text), gone(rec.call) if gone is not None else None

    recovers = [charged(rec) for rec in tracker.recovers if not rec.said]
    said = [charged(rec) for rec in tracker.recovers if rec.said]
    res.recovers, res.recovered_tokens = len(recovers), sum(t for _, t, _ in recovers)
    res.lines_shown, res.lines_changed_outside_stubs = fidelity.shown, fidelity.changed
    session = getattr(policy, "session", None)  # a lightmem2 mode, maybe inside a wrapper (a probe)
    if session is not None:
        res.session_cold_starts = len(session.cold_starts)
        res.evictions_at_cold = int(getattr(policy, "evicted_cold", 0))
    writes = res.write_tokens if provider == "anthropic" else 0
    res.K = k_cost(res.hit_tokens, res.miss_tokens, writes, write_factor=luck.write_factor)
    res.compacted_before = [c.before_call for c in (host.done if host else trace.compactions)]
    res.host_compactions = len(res.compacted_before)
    res.output_tokens = sum(c.completion_tokens or 0 for c in trace.calls) + res.compaction_output_tokens
    hourly = writes if luck.ttl == HOUR_S else 0
    res.usd = money_of(
        provider,
        trace.model,
        res.hit_tokens,
        res.miss_tokens - writes,
        writes - hourly,
        hourly,
        res.output_tokens,
    )
    if provider == trace.provider:
        res.recorded_usd = _recorded_usd(trace)
    res.misses = misses.calls
    res.miss_causes = Totals.of(misses.causes).as_dict()
    res.uncached_usd = money_of(provider, trace.model, 0, res.miss_tokens - writes, writes - hourly, hourly)
    res.K_charged = res.K + recover_charge(recovers, res.calls)
    res.K_charged_all = res.K_charged + recover_charge(said, res.calls)
    return res


def _idle(gap: float | None, ttl: float | None) -> str:
    """An expiry in words: the idle gap and the TTL it outlasted."""
    if gap is None:
        return "the cache had expired"
    return f"idle {gap:,.0f} s" + (f", past the {ttl:,.0f} s TTL" if ttl else "")


def _what_policy_did(policy: SessionPolicy) -> str:
    """What a lightmem2 mode changed at the call just made, in words (its batch), else a general line."""
    session = getattr(policy, "session", None)
    if session is not None and getattr(session, "evicted_now", False):
        return str(session.evictor.describe_last()) or "a batch"
    return "the policy changed what it had sent before"


class _Misses:
    """The replay's cache misses by cause, call by call, priced as the session is."""

    def __init__(self, provider: str, model: str | None, hourly: bool) -> None:
        self.provider, self.model, self.hourly = provider, model, hourly
        self.calls: list[dict[str, Any]] = []
        self.causes: list[list[Cause]] = []

    def _money(self, usage: Any) -> float | None:
        writes = usage.write_tokens if self.provider == "anthropic" else 0
        w5, w1 = (0, writes) if self.hourly else (writes, 0)
        return money_of(self.provider, self.model, 0, usage.miss_tokens - writes, w5, w1)

    def add(self, call: int | str, shape: Shape, usage: Any) -> None:
        usd = self._money(usage)
        causes = attribute(shape, usage.miss_tokens, usd=usd)
        self.causes.append(causes)
        self.calls.append({"call": call, "causes": cause_dicts(causes)})


def _usage_seen(usage: Any, scale: float, output: int, provider: str) -> tuple[dict[str, Any], str]:
    """The usage the provider reports for what the policy sent (in its tokens, at ``scale``), in the
    form of its wire API: what a proxy sees and hands to the session."""
    hit, write = round(usage.hit_tokens * scale), round(usage.write_tokens * scale)
    total = round(usage.input_tokens * scale)
    if provider == "anthropic":
        return {
            "input_tokens": max(0, total - hit - write),
            "cache_read_input_tokens": hit,
            "cache_creation_input_tokens": write,
            "output_tokens": output,
        }, "anthropic"
    details = {"cached_tokens": hit}
    return {"prompt_tokens": total, "completion_tokens": output, "prompt_tokens_details": details}, "chat"


def _add_usage(res: SessionResult, usage: Any) -> None:
    """Count one billed call's input in the session's totals."""
    res.input_tokens += usage.input_tokens
    res.hit_tokens += usage.hit_tokens
    res.miss_tokens += usage.miss_tokens
    res.write_tokens += usage.write_tokens


def _cache_answer(
    cache: Any,
    chunker: ChatChunker,
    sent: tuple[list[Any], list[Any]],
    count: int,
    before: TraceCall,
    body: list[ChatMessage],
) -> None:
    """What the model generated at the previous call, cached after that call's prompt, where the
    provider caches answers: as this call sends it back (``body[count]``), when that is the answer
    the model wrote. Tool-call ids do not count: the provider assigns them outside what the model
    generates (DeepSeek's rendering of a message has none), so a policy that respells them keeps the
    hit. A model that wrote its thinking first generated that, not the answer: nothing to hit."""
    if before.output.get("reasoning_content") or len(body) <= count:
        return
    answer = body[count]
    if _pad_key(answer) != _pad_key(before.output):
        return
    chunks, keys = chunker.pieces([answer])
    cache.generated([*sent[0], *chunks], [*sent[1], *keys], before.at)


def _summarising_call(
    trace: Trace,
    i: int,
    sent: tuple[list[Any], list[Any]],
    chunker: ChatChunker,
    provider: str,
    head_blocks: int,
) -> tuple[list[Any], list[int] | None, list[Any]]:
    """Chunks, breakpoints and keys of the host's summarising call before call ``i``: what the
    previous call sent (as the policy made it), the messages the host added since, and the
    instruction to summarise."""
    calls = trace.calls
    before, now = calls[i - 1].uncompacted, calls[i].uncompacted
    added = now[len(before) :] if appends_to(before, now) else []
    more, more_keys = chunker.pieces(added)
    instruction = _pad(-1, INSTRUCTION_TOKENS)
    chunks = [*sent[0], *more, instruction]
    keys = [*sent[1], *more_keys, ("compact", i)]
    marks = default_breakpoints(chunks, head_blocks) if provider == "anthropic" else None
    return chunks, marks, keys


class HiddenInput:
    """Input the provider billed that the recording does not show, put back where it was sent.

    Why: a Claude Code transcript keeps the model's thinking as a summary, while the request carries
    it whole (signed), and the provider counts it: on the dev sessions the recorded input is 15-27%
    above what their messages count, and simulated K was short by as much. The growth of the recorded
    input from one call to the next, beyond the growth of what the new messages count, is what the
    first new message (the previous answer, with its thinking) carries unseen. It stays in every later
    call that still holds that message, whatever the policy did to the tool results around it; a
    message a policy left out takes its hidden input with it, and so does an answer a policy sent
    without its thinking (a compaction leaves it out: :mod:`..eviction.thinking`). A prompt the host
    rewrote (a compaction) carries its unseen input on its first message.
    """

    def __init__(self, pads: dict[int, int], thought: frozenset[int] = frozenset()) -> None:
        self.pads = pads
        self.thought = thought
        """The answers (by key) that were recorded with their thinking."""
        # a message's key costs a JSON dump; the same message objects come back every call
        self._keys: PerObject[ChatMessage, int] = PerObject(_pad_key)

    @classmethod
    def of(cls, trace: Trace, chunker: ChatChunker, head_tokens: int) -> HiddenInput | None:
        """The unseen input of ``trace`` per message, from its recorded usage (None when it has none)."""
        pads: dict[int, int] = {}
        before: TraceCall | None = None
        counted_before = 0
        for call in trace.calls:
            counted = head_tokens + sum(len(c) for c in chunker.pieces(call.prompt)[0])
            if before is None:
                extra, at = call.prompt_tokens - counted, 0
            elif appends_to(before.prompt, call.prompt):
                extra = (call.prompt_tokens - before.prompt_tokens) - (counted - counted_before)
                at = len(before.prompt)
            else:
                extra = call.prompt_tokens - counted - sum(pads.get(_pad_key(m), 0) for m in call.prompt)
                at = 0
            if extra > 0 and at < len(call.prompt):
                key = _pad_key(call.prompt[at])
                pads[key] = pads.get(key, 0) + extra
            before, counted_before = call, counted
        thought = frozenset(
            _pad_key(m)
            for c in trace.calls
            for m in c.prompt
            if m.get("role") == "assistant" and REASONING in m
        )
        return cls(pads, thought) if pads else None

    def _unseen(self, message: ChatMessage, key: int) -> int:
        """What ``message`` carries unseen: nothing when it was recorded thinking and is sent without."""
        if key in self.thought and REASONING not in message:
            return 0
        return self.pads.get(key, 0)

    def tokens(self, prompt: list[ChatMessage]) -> int:
        """The unseen input ``prompt`` carries."""
        return sum(self._unseen(m, k) for m, k in zip(prompt, self._keys.map(prompt), strict=True))

    def place(
        self, prompt: list[ChatMessage], chunks: list[Any], keys: list[Any]
    ) -> tuple[list[Any], list[Any]]:
        """``chunks``/``keys`` of ``prompt`` with each message's unseen input right after it."""
        out_chunks: list[Any] = []
        out_keys: list[Any] = []
        for message, pad_key, chunk, key in zip(prompt, self._keys.map(prompt), chunks, keys, strict=True):
            out_chunks.append(chunk)
            out_keys.append(key)
            n = self._unseen(message, pad_key)
            if n:
                out_chunks.append(_pad(pad_key, n))
                out_keys.append(("hidden", pad_key, n))
        return out_chunks, out_keys


REASONING = "reasoning_content"
"""Where the traces' chat form carries an answer's thinking (:func:`.traces.base.assistant_message`)."""


def _pad_key(message: ChatMessage) -> int:
    """What names a message across policies: its role, text and tool calls (their names and
    arguments; ids may be respelled, and thinking is what is unseen)."""
    calls = [
        ((c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
        for c in message.get("tool_calls") or ()
        if isinstance(c, dict)
    ]
    return chat_key({"role": message.get("role"), "content": message.get("content"), "calls": calls})


@functools.lru_cache(maxsize=4096)
def _pad(key: int, n: int) -> tuple[int, ...]:
    """``n`` stand-in tokens for unseen input, distinct per message (no false prefix match)."""
    return (-(1_000_000 + key % 1_000_000),) * n


def _recorded_k(call: TraceCall, write_factor: float) -> float:
    """K of one recorded call as its provider billed it: Anthropic's reads, writes (at the session's
    write price) and uncached input; elsewhere cached and uncached input."""
    if call.cache_read_input_tokens is not None and call.cache_creation_input_tokens is not None:
        return k_cost(
            call.cache_read_input_tokens,
            call.prompt_tokens - call.cache_read_input_tokens,
            call.cache_creation_input_tokens,
            write_factor=write_factor,
        )
    return k_cost(call.cached_tokens, call.prompt_tokens - call.cached_tokens)


def _recorded_usd(trace: Trace) -> float | None:
    """The recorded session in money as its provider billed it (reads, uncached input, five-minute
    and one-hour writes, output), at list price."""
    total = 0.0
    for call in trace.calls:
        read = (
            call.cache_read_input_tokens if call.cache_read_input_tokens is not None else call.cached_tokens
        )
        written = call.cache_creation_input_tokens or 0
        hourly = call.cache_write_1h_tokens or 0
        usd = money_of(
            trace.provider,
            trace.model,
            read,
            call.prompt_tokens - read - written,
            written - hourly,
            hourly,
            call.completion_tokens or 0,
        )
        if usd is None:
            return None
        total += usd
    return total


def _head_tokens(trace: Trace, counter: TokenCounter) -> int:
    """Tokens outside the messages (tool definitions, system prompt the transcript lacks).

    swe traces: the calibrated constant. Claude Code transcripts and OpenClaw session files omit the
    system prompt and tools, so the head is what the first call's reported input exceeds our count of
    its messages by.
    """
    if trace.kind not in ("claude-code", "openclaw") or not trace.calls:
        return REQUEST_OVERHEAD_TOKENS
    first = trace.calls[0]
    chunker = ChatChunker(counter.encode, head=0)
    counted = sum(len(c) for c in chunker.chunks(first.prompt))
    return max(0, first.prompt_tokens - counted)


def _pct(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def summarize(results: Iterable[SessionResult]) -> dict[str, Any]:
    """The ``--json`` object over all sessions."""
    rs = list(results)
    hit = sum(r.hit_tokens for r in rs)
    miss = sum(r.miss_tokens for r in rs)
    inp = sum(r.input_tokens for r in rs)
    uses = sum(r.uses for r in rs)
    pairs = sum(r.error_pairs for r in rs)
    overhead = [x for r in rs for x in r.overhead_ms]
    return {
        "sessions": len(rs),
        "calls": sum(r.calls for r in rs),
        "input_tokens": inp,
        "hit_tokens": hit,
        "miss_tokens": miss,
        "write_tokens": sum(r.write_tokens for r in rs),
        "hit_rate": round(hit / inp, 4) if inp else 0.0,
        "K": round(sum(r.K for r in rs), 1),
        "recorded_K": round(sum(r.recorded_K for r in rs), 1),
        "output_tokens": sum(r.output_tokens for r in rs),
        "usd": _money_sum([r.usd for r in rs]),
        "recorded_usd": _money_sum([r.recorded_usd for r in rs]),
        "cold_starts": sum(r.cold_starts for r in rs),
        "session_cold_starts": sum(r.session_cold_starts for r in rs),
        "evictions_at_cold": sum(r.evictions_at_cold for r in rs),
        "short_reads": sum(r.short_reads for r in rs),
        "host_compactions": sum(r.host_compactions for r in rs),
        "recorded_compactions": sum(r.recorded_compactions for r in rs),
        "compaction_output_tokens": sum(r.compaction_output_tokens for r in rs),
        "lost_to_compaction": sum(r.lost_to_compaction for r in rs),
        "retention_uses": uses,
        "retention_kept": round(sum(r.kept for r in rs) / uses, 4) if uses else 1.0,
        "retention_recoverable": round(sum(r.recoverable for r in rs) / uses, 4) if uses else 0.0,
        "retention_lost": round(sum(r.lost for r in rs) / uses, 4) if uses else 0.0,
        "retention_kept_lines": round(sum(r.kept_lines for r in rs) / uses, 4) if uses else 1.0,
        "retention_recoverable_lines": round(sum(r.recoverable_lines for r in rs) / uses, 4) if uses else 0.0,
        "retention_lost_lines": round(sum(r.lost_lines for r in rs) / uses, 4) if uses else 0.0,
        "task_uses": (tu := sum(r.task_uses for r in rs)),
        "task_kept": round(sum(r.task_kept for r in rs) / tu, 4) if tu else 1.0,
        "task_kept_lines": round(sum(r.task_kept_lines for r in rs) / tu, 4) if tu else 1.0,
        "said_uses": (su := sum(r.said_uses for r in rs)),
        "said_kept": round(sum(r.said_kept for r in rs) / su, 4) if su else 1.0,
        "said_recoverable": round(sum(r.said_recoverable for r in rs) / su, 4) if su else 0.0,
        "said_lost": round(sum(r.said_lost for r in rs) / su, 4) if su else 0.0,
        "error_line_pairs": pairs,
        "error_lines_kept": round(sum(r.error_pairs_kept for r in rs) / pairs, 4) if pairs else 1.0,
        "K_charged": round(sum(r.K_charged for r in rs), 1),
        "K_charged_all": round(sum(r.K_charged_all for r in rs), 1),
        "recovers": sum(r.recovers for r in rs),
        "recovered_tokens": sum(r.recovered_tokens for r in rs),
        "lines_shown": sum(r.lines_shown for r in rs),
        "lines_changed_outside_stubs": sum(r.lines_changed_outside_stubs for r in rs),
        "overhead_ms_p50": round(_pct(overhead, 50), 3),
        "overhead_ms_p99": round(_pct(overhead, 99), 3),
        "miss_causes": _causes_over(rs),
        "uncached_usd": _money_sum([r.uncached_usd for r in rs]),
        "recorded_hit_rate": round(
            sum(r.recorded_cached_tokens for r in rs) / max(1, sum(r.recorded_prompt_tokens for r in rs)), 4
        ),
    }


def _causes_over(rs: Sequence[SessionResult]) -> dict[str, Any]:
    """The uncached input of all sessions by cause (:class:`..metering.misses.Totals`)."""
    causes = [[Cause(c["cause"], c["tokens"], c["usd"]) for m in r.misses for c in m["causes"]] for r in rs]
    return Totals.of(causes).as_dict()


def _money_sum(values: Sequence[float | None]) -> float | None:
    """The total in USD (4 decimals), or None when a session has no price (a partial sum would read
    as the whole)."""
    if not values or any(v is None for v in values):
        return None
    return round(sum(v for v in values if v is not None), 4)


def trace_files(paths: Iterable[str | Path]) -> list[TraceSource]:
    """Expand directories into their trace files and OpenClaw SQLite stores into their sessions
    (both sorted, so runs are reproducible): a store is a directory of sessions kept in one file.
    A store is told by its content, whatever its name; a directory's own listing goes by suffix."""
    out: list[TraceSource] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(
                f
                for f in p.iterdir()
                if f.name.endswith((".json", ".json.gz", ".jsonl", ".jsonl.gz", ".jsonl.zst"))
            )
        elif is_sqlite(p):
            out += store_sessions(p)
        else:
            out.append(p)
    return out


def replay_paths(
    paths: Iterable[str | Path],
    policy: str | PolicyFactory,
    provider: str | None = None,
    head: Head = "plain",
    dump_dir: Path | None = None,
    progress: bool = False,
    config: Config | None = None,
    clock: Clock = "recorded",
    compaction: Compaction = "modelled",
) -> list[SessionResult]:
    """Replay every trace under ``paths`` through ``policy`` (a name or a factory)."""
    files = trace_files(paths)
    counter = TokenCounter()
    results: list[SessionResult] = []
    with tempfile.TemporaryDirectory(prefix="lightmem2-replay-") as tmp:
        factory = policy_for(policy, Path(tmp), config, clock) if isinstance(policy, str) else policy
        if dump_dir:
            dump_dir.mkdir(parents=True, exist_ok=True)
        for n, path in enumerate(files, 1):
            trace = load_trace(path)
            if not trace.calls:
                continue
            if progress:
                bar = "#" * (30 * n // len(files))
                print(
                    f"\r[{bar:<30}] {n}/{len(files)} {trace.id[:40]:<40}", end="", file=sys.stderr, flush=True
                )
            dump = dump_dir / f"{trace.id}.jsonl" if dump_dir else None
            if provider:  # the policy prices its decisions on the cache the replay simulates
                trace = dataclasses.replace(trace, provider=provider)
            results.append(
                replay_trace(trace, factory(trace), provider, head, dump, counter, clock, compaction)
            )
        if progress:
            print(file=sys.stderr)
    return results


def result_dicts(results: Iterable[SessionResult]) -> list[dict[str, Any]]:
    """Per-session figures without the raw overhead samples."""
    return [{k: v for k, v in asdict(r).items() if k != "overhead_ms"} for r in results]
