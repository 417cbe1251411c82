"""Per-call accounting for the ledger: what we sent vs. what the host would have sent, and cache breaks.

Why simulate even when the provider reports usage: the provider only tells us about the request we
sent; "K saved" needs the counterfactual (the host's original request through the same cache model).
Both sides are chunked per message with memoisation by message object, so the work per call is
proportional to what is new. Real usage, when the provider reports it, is added afterwards
(:func:`real_usage`).
"""

from __future__ import annotations

import json
import os
import re
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import xxhash

from .. import wire
from ..codecs.memo import PerObject
from ..eviction.compaction_note import HEAD as NOTE_HEAD
from ..model import (
    ImagePart,
    Message,
    OpaquePart,
    Part,
    Request,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    alnum_id,
)
from ..prefix.call_ids import short_id
from ..store.ledger import CallRecord, k_cost
from ..tokens import TokenCounter
from ..wire.base import RealUsage as RealUsage  # re-exported: the ledger's real figures
from ..wire.chat import codec as openai_chat
from .cachesim import make_cache
from .chat_tokens import MESSAGE_OVERHEAD_TOKENS, REQUEST_OVERHEAD_TOKENS, Chunker, chat_tokens, head_chunk
from .prices import Price, money
from .savings import CALL_IDS, saver, split_saving

HOST_COMPACTION = "host compaction"
"""How a ledger row names the host's own compaction: its ``break_reason`` starts with this (the
proxy sees Codex's, :mod:`lightmem_plugin.server.codex_compaction`)."""
SUMMARISING_CALL = "summarising request"
"""The words that name the host's summarising request among those rows (``status`` counts them)."""


@dataclass
class CallFacts:
    """What the pipeline knows about one call besides the two requests."""

    session_id: str
    call_index: int
    mode: str
    evicted_tokens: int = 0
    eviction: bool = False
    eviction_what: str = ""  # what the batch paged out, for report ("task 1 (archived as KEY); 3 outputs")
    paged_out: bool = False  # the session has paged something out (report names what it saves)
    head_messages: int = 1
    errors: dict[str, int] = field(default_factory=dict)
    last_error: str | None = None
    writer: str = ""  # the recording process's id (see ledger.CallRecord.writer)
    model: str = ""  # the model the request named ('' when it named none)
    price: Price | None = None  # its price under the config in force (None: no money for this call)
    cold_start: str | None = None  # why its provider cache was cold (eviction.cold_cache), None: warm
    host_event: str = ""  # what the host itself did at this call (a compaction), its row's break_reason


def render(msg: Message) -> str:
    """A canonical text of a neutral message: what the model reads of it, for counting and diffing."""
    out = [f"<{msg.role}>"]
    for p in msg.parts:
        if isinstance(p, TextPart):
            out.append(p.text)
        elif isinstance(p, ToolCallPart):
            out.append(f"<call {p.id} {p.name}>{p.arguments}")
        elif isinstance(p, ToolResultPart):
            out.append(f"<result {p.tool_call_id}>")
            out.extend(
                sub.text if isinstance(sub, TextPart) else f"<image {hash_of(sub)}>" for sub in p.content
            )
        elif isinstance(p, ImagePart):
            out.append(f"<image {hash_of(p)}>")
        elif isinstance(p, OpaquePart):
            out.append(f"<opaque {hash_of(p)}>")
    return "\n".join(out)


def ids_alike(msg: Message) -> Message:
    """``msg`` with every tool call id in letters and digits only, as OpenClaw sends ids to most
    providers (its "strict" mode: ``toolu_8_0`` -> ``toolu80``).

    Why: OpenClaw hands the plugin a turn's messages at ``commitTurn`` with the ids its runtime made
    (``toolu_8_0``) and the next ``assemble()`` the same messages with the ids it sent the provider
    (``toolu80``). Compared as written, every turn boundary looked like a changed message: measured on
    OpenClaw 2026.9.6 with an Anthropic provider, 6 of the 8 cache breaks ``report`` listed were these,
    and the simulated hit rate fell there, while the provider reported ~99% hits."""
    if not any(isinstance(p, ToolCallPart | ToolResultPart) for p in msg.parts):
        return msg
    parts: list[Part] = []
    for p in msg.parts:
        if isinstance(p, ToolCallPart):
            p = replace(p, id=alnum_id(p.id) or p.id)
        elif isinstance(p, ToolResultPart):
            p = replace(p, tool_call_id=alnum_id(p.tool_call_id) or p.tool_call_id)
        parts.append(p)
    return replace(msg, parts=parts)


def hash_of(part: ImagePart | OpaquePart) -> int:
    """A stable identity for a non-text part (its content, not its object)."""
    raw = json.dumps(part.raw if isinstance(part, OpaquePart) else [part.data, part.url], sort_keys=True)
    return int(xxhash.xxh3_64_intdigest(raw.encode("utf-8", "surrogatepass")))


def message_tokens(msg: Message, encode: Callable[[str], Sequence[int]]) -> array[int]:
    """A neutral message's token chunk, counted as the benchmark's replay counts its chat form.

    Why the chat form: ``make bench`` and ``make demo`` count prompts with :func:`chat_tokens` (texts,
    tool names and arguments, a calibrated overhead per message), and the ledger behind ``status`` and
    ``report`` must give the same figures for the same session (the demo showed 6.8% saved in its table
    and 6.3% in the report under it, from ids and tags counted here only). A message the chat form
    cannot carry (an Anthropic thinking block) is counted from its canonical text instead.
    """
    try:
        chat = openai_chat.message_to_chat(msg)
    except Exception:  # not expressible in chat form: count what the model reads of it
        return array("i", [-1] * MESSAGE_OVERHEAD_TOKENS) + array("i", encode(render(msg)))
    return array("i", chat_tokens(chat, encode))


def without_note(msg: Message) -> Message:
    """``msg`` without what lightmem2 put into the host's own text, which the host alone would not
    send, so "without lightmem2" leaves it out: its compaction note (:mod:`..eviction.compaction_note`,
    carried after a compaction as Claude Code's additional context, in Codex's and OpenClaw's summary;
    from its first line to the end of its text, with the host's ``<system-reminder>`` wrapper around
    it) and Claude Code's line saying our hook ran (``PreCompact [... lightmem2 hook ...] completed
    successfully``, 43 tokens measured after a ``/compact``). Claude Code's listing of our slash
    command (~25 tokens in its environment text on every call) stays counted as the host's, as the
    e2e tests measure it."""
    ours = (NOTE_HEAD, _HOOK_RAN)
    if not any(isinstance(p, TextPart) and any(o in p.text for o in ours) for p in msg.parts):
        return msg
    parts: list[Any] = []
    for p in msg.parts:
        if isinstance(p, TextPart) and NOTE_HEAD in p.text:
            at = p.text.index(NOTE_HEAD)
            start, end = p.text.rfind(_OPEN, 0, at), p.text.find(_CLOSE, at)
            if start >= 0 and end >= 0:  # the whole wrapper block
                text = p.text[:start].rstrip("\n") + p.text[end + len(_CLOSE) :]
            else:
                text = p.text[:at].rstrip("\n")
            p = replace(p, text=text)
        if isinstance(p, TextPart) and _HOOK_RAN in p.text:
            p = replace(p, text=_HOOK_LINE.sub("", p.text))
        parts.append(p)
    return replace(msg, parts=parts)


_OPEN, _CLOSE = "<system-reminder>", "</system-reminder>"
_HOOK_RAN = "lightmem2 hook "
_HOOK_LINE = re.compile(r"\n?[A-Za-z]+ \[[^\]\n]*lightmem2 hook [^\]\n]*\] completed successfully")


def _first_break(prev: Sequence[str], cur: Sequence[str], evicted: bool = False) -> tuple[int, int] | None:
    """(message index, char offset) of the first difference in what the previous call had cached.

    The previous request's last message carried the per-call tail block, so it is allowed to differ;
    but not at a call where a batch paged out (``evicted``): a batch may change only that message (the
    newest-but-one tool output, a compaction's oldest kept one), and that change is the break.
    """
    for i in range(min(len(prev) - 1, len(cur))):
        if prev[i] != cur[i]:
            return i, len(os.path.commonprefix([prev[i], cur[i]]))
    if len(cur) < len(prev) - 1:
        return len(cur), 0
    last = len(prev) - 1
    if evicted and 0 <= last < len(cur) and prev[last] != cur[last]:
        return last, len(os.path.commonprefix([prev[last], cur[last]]))
    return None


# what a request carries outside its messages (tool definitions, BOS), as the replay counts it: a
# constant, stable head, so the ledger's totals and the benchmark's agree for the same session
_HEAD = array("i", head_chunk(REQUEST_OVERHEAD_TOKENS))

OWN_TOOL_SUFFIXES = ("lightmem2_recover", "lightmem2_search")
OWN_NAMESPACE = "mcp__lightmem2"
MCP_RESOURCE_TOOLS = frozenset(("list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource"))
"""Tools Codex adds once any MCP server is configured (measured on Codex 0.171.0 with gpt-5.5)."""


def _is_own(name: str) -> bool:
    return name.endswith(OWN_TOOL_SUFFIXES) or name == OWN_NAMESPACE or name.startswith(OWN_NAMESPACE + "__")


def own_tools(tools: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The tool definitions a host sends only because lightmem2 is installed: our recover and search
    tools (as a plugin's, an MCP server's or inside Codex's ``mcp__lightmem2`` namespace) and, when no
    other MCP server's tools are in the list, the generic MCP resource tools the host adds for having
    one (Codex with gpt-5.5 lists no MCP tool at all, only ``tool_search`` and these three; should the
    user have another server behind ``tool_search``, the saving shown is on the low side)."""
    from ..prefix.stabilizer import tool_name  # lazy: the stabilizer pulls in the placeholder machinery

    names = [tool_name(dict(t)) for t in tools]
    ours = [t for t, n in zip(tools, names, strict=True) if _is_own(n)]
    if not any(n.startswith("mcp__") and not _is_own(n) for n in names):
        ours += [t for t, n in zip(tools, names, strict=True) if n in MCP_RESOURCE_TOOLS]
    return ours


class Accountant:
    """Simulated cache accounting of one session (64-token prefix blocks, the common denominator)."""

    def __init__(self, counter: TokenCounter, provider: str = "deepseek") -> None:
        self.host_respells = False
        """The host respells call ids to letters and digits before each request (OpenClaw: see
        :func:`ids_alike`); its messages are then counted and compared with ids in that form."""
        self._ours = self._chunker(counter)
        self._base = self._chunker(counter)
        self._cache_ours = make_cache(provider)
        self._cache_base = make_cache(provider)
        self._prev: list[str] = []
        # the previous call's chunks and keys, ours and the host's: where the provider caches the
        # answer with its prompt, the next call hits it
        self._sent_before: tuple[list[Any], list[str]] = ([], [])
        self._tools_before: list[Any] = []  # the host's tool definitions at the previous call
        self._host_before: tuple[list[Any], list[str]] = ([], [])
        self._encode = counter.encode
        self._footprint: tuple[str, int] = ("", 0)
        self._changes: PerObject[Message, list[tuple[str, int]]] = PerObject(self._message_changes)
        self._noteless: PerObject[Message, Message] = PerObject(without_note)
        self._host: dict[str, ToolResultPart] = {}  # this call's tool outputs as the host sent them
        self._spelled: dict[str, str] = {}  # call id as the model reads it -> as the host spelled it
        self.repeated = False
        """True when the last call sent exactly what the call before it sent (a host's retry)."""

    def _chunker(self, counter: TokenCounter) -> Chunker[Message, str]:
        """Neutral messages counted as the replay counts them; keyed by their canonical text (ids as
        the provider reads them when the host respells them)."""

        def seen(m: Message) -> Message:
            return ids_alike(m) if self.host_respells else m

        return Chunker(lambda m: message_tokens(seen(m), counter.encode), lambda m: render(seen(m)), head=0)

    def footprint(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of :func:`own_tools` in ``tools`` (memoised on their text: it rarely changes).

        Why: "without lightmem2" is the request the host would send without lightmem2 installed, and
        that one lacks our tools. Measured on Codex 0.171.0 with gpt-5.5: ~380 tokens a call, counted
        as if the host sent them anyway, overstated the saving by 12% at the last call. Only our few
        tools are rendered on each call, never the host's whole list (Claude Code's is ~80 KB)."""
        ours = own_tools(tools) if tools else []
        if not ours:
            return 0
        shown = json.dumps(ours, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        if self._footprint[0] != shown:
            self._footprint = (shown, len(self._encode(shown)))
        return self._footprint[1]

    def _changed_parts(self, original: Request, sent: Request) -> list[tuple[str, int]]:
        """(what changed it, tokens saved) for each tool output ``sent`` shows otherwise than the host,
        and ``call ids`` entries for the ids the model reads in a few tokens (:mod:`~.prefix.call_ids`).
        Parts are matched by call id, as the host spelled it or as the model reads it; each sent
        message is judged once (:class:`~.codecs.memo.PerObject`), not on every call that re-sends it."""
        self._host, self._spelled = {}, {}
        for m in original.messages:
            for p in m.parts:
                if isinstance(p, ToolCallPart | ToolResultPart):
                    cid = p.id if isinstance(p, ToolCallPart) else p.tool_call_id
                    self._spelled[short_id(cid)] = cid
                    if isinstance(p, ToolResultPart):
                        self._host[cid] = self._host[short_id(cid)] = p
        return [entry for entries in self._changes.map(sent.messages) for entry in entries]

    def _message_changes(self, msg: Message) -> list[tuple[str, int]]:
        """:meth:`_changed_parts` of one sent message."""
        out: list[tuple[str, int]] = []
        ids = 0
        for p in msg.parts:
            if not isinstance(p, ToolCallPart | ToolResultPart):
                continue
            cid = p.id if isinstance(p, ToolCallPart) else p.tool_call_id
            host_id = self._spelled.get(cid, cid)
            if host_id != cid:
                ids += len(self._encode(host_id)) - len(self._encode(cid))
            if not isinstance(p, ToolResultPart) or (was := self._host.get(cid)) is None or was is p:
                continue
            shown, text = p.text(), was.text()
            if shown != text:
                out.append((saver(shown), len(self._encode(text)) - len(self._encode(shown))))
        if ids:
            out.append((CALL_IDS, ids))
        return out

    def account(self, facts: CallFacts, original: Request, sent: Request) -> CallRecord:
        """The ledger row of one call (real usage still unknown). The baseline leaves out our own
        tools (:meth:`footprint`): the host alone would not send them."""
        chunks, texts = self._ours.pieces(sent.messages)
        host_messages = self._noteless.map(original.messages)  # without lightmem2's compaction note
        base_chunks, base_texts = self._base.pieces(host_messages)
        # compared as parsed (in C, stopping at the first difference), never rendered: Claude Code's
        # list is ~80 KB, and rendering it on every call is what footprint() avoids
        tools_changed = original.tools != self._tools_before
        shape = self._shape(chunks, texts, base_texts, tools_changed, facts.host_event)
        self._tools_before = original.tools
        if self._cache_ours.caches_output:
            _cache_answer(self._cache_ours, self._sent_before, sent.messages, chunks, texts)
            _cache_answer(self._cache_base, self._host_before, original.messages, base_chunks, base_texts)
        self._sent_before, self._host_before = (chunks, texts), (base_chunks, base_texts)
        if facts.cold_start and facts.cold_start.startswith("pause"):  # the host's cache went cold too
            self._cache_ours.expire()
            self._cache_base.expire()
        ours = self._cache_ours.observe([_HEAD, *chunks], keys=["<head>", *texts])
        base = self._cache_base.observe([_HEAD, *base_chunks], keys=["<head>", *base_texts])
        baseline = max(0, base.input_tokens - self.footprint(sent.tools))
        brk = _first_break(self._prev, texts, facts.eviction) if self._prev else None
        self.repeated = bool(self._prev) and texts == self._prev
        self._prev = texts
        reason = facts.host_event or None  # the host's own change (its compaction) is named even unbroken
        if brk is not None and reason is None:
            if facts.eviction:
                reason = "eviction batch" + (f": {facts.eviction_what}" if facts.eviction_what else "")
            elif brk[0] < facts.head_messages:
                reason = f"head message {brk[0]} changed (session values or system prompt)"
            else:
                reason = f"message {brk[0]} changed"
        price = facts.price
        simulated = money(price, ours.hit_tokens, ours.miss_tokens) if price is not None else None
        uncached = money(price, 0, ours.miss_tokens) if price is not None else None
        without = money(price, base.hit_tokens, base.miss_tokens) if price is not None else None
        return CallRecord(
            session_id=facts.session_id,
            call_index=facts.call_index,
            mode=facts.mode,
            model=facts.model,
            cost_usd=simulated,
            # both sides through the same cache model and the same price, output alike on both
            saved_usd=None if simulated is None or without is None else without - simulated,
            input_tokens=ours.input_tokens,
            baseline_tokens=baseline,
            hit_tokens=ours.hit_tokens,
            miss_tokens=ours.miss_tokens,
            write_tokens=0,
            k=k_cost(ours.hit_tokens, ours.miss_tokens),
            k_baseline=k_cost(base.hit_tokens, base.miss_tokens),
            saved_by_pass=split_saving(
                self._changed_parts(original, sent), baseline - ours.input_tokens, facts.paged_out
            ),
            evicted_tokens=facts.evicted_tokens,
            prefix_break_at=brk,
            break_reason=reason,
            errors=dict(facts.errors),
            last_error=facts.last_error,
            writer=facts.writer,
            cold_start=facts.cold_start,
            miss_shape=shape,
            uncached_usd=uncached,
        )

    def _shape(
        self, chunks: list[Any], texts: list[str], host_texts: list[str], tools_changed: bool, host_event: str
    ) -> str:
        """This request against the previous one (:attr:`CallRecord.miss_shape`): its leading tokens
        identical to the previous request's, the tokens of the messages the host appended, and who
        changed what stood between (the host, when its own request does not extend its previous one
        or its tool definitions changed, which come first in the prompt; its compaction when it names
        one; else lightmem2, when ours does not extend ours)."""
        prev_chunks, prev_texts = self._sent_before
        prev_host = self._host_before[1]
        if not prev_texts:
            return "0 0 first"
        if tools_changed:
            return f"0 0 {'host-compaction' if host_event else 'host-tools'}"
        common = len(_HEAD)
        for before, after, chunk, text in zip(prev_chunks, prev_texts, chunks, texts, strict=False):
            if before is chunk or text == after:
                common += len(chunk)
                continue
            common += len(os.path.commonprefix([list(before), list(chunk)]))
            break
        extends = len(host_texts) >= len(prev_host) and host_texts[: len(prev_host)] == prev_host
        added = len(host_texts) - len(prev_host) if extends else 0
        new = sum(len(c) for c in chunks[len(chunks) - added :]) if added else 0
        if host_event:
            by = "host-compaction"
        elif not extends:
            by = "host-compaction" if len(host_texts) < len(prev_host) else "host"
        elif len(texts) < len(prev_texts) or texts[: len(prev_texts)] != prev_texts:
            by = "lightmem2"
        else:
            by = "-"
        return f"{common} {new} {by}"


def _cache_answer(
    cache: Any,
    before: tuple[list[Any], list[str]],
    messages: Sequence[Message],
    chunks: list[Any],
    texts: list[str],
) -> None:
    """Where the provider caches the answer with its prompt (DeepSeek): the previous call's prompt
    followed by the assistant message that comes right after it in this one (the answer, as this
    call sends it back) is cached before this call reads. Which answers a provider caches a replay
    takes from the recording (:func:`~lightmem_plugin.measure.luck.answers_cached`); a live session
    assumes it does."""
    n = len(before[1])
    if not n or len(texts) <= n or messages[n].role != "assistant" or texts[:n] != before[1]:
        return
    cache.generated([_HEAD, *before[0], chunks[n]], ["<head>", *before[1], texts[n]], None)


def detect_api(usage: Mapping[str, Any]) -> str:
    """Which API a ``usage`` object came from, by its keys (the wire registry decides)."""
    return wire.for_usage(usage).name


def real_usage(api: str, usage: Mapping[str, Any]) -> RealUsage:
    """Normalise a provider ``usage`` object: total input (cached + uncached + written), cached part."""
    return wire.get(api).usage(usage)


def with_real_usage(rec: CallRecord, api: str, figures: RealUsage, price: Price | None = None) -> CallRecord:
    """``rec`` with the provider's real figures in the ledger's fields, and with ``price`` its money
    as billed (:func:`billed`)."""
    if wire.get(api).ledger_fields == "anthropic":
        rec = replace(
            rec,
            real_cache_read=figures.cached_tokens,
            real_cache_creation=figures.cache_write_tokens,
            real_cache_write_1h=figures.cache_write_1h_tokens,
            real_input_tokens=figures.input_tokens,
            output_tokens=figures.output_tokens,
        )
    else:
        rec = replace(
            rec,
            real_cached_tokens=figures.cached_tokens,
            real_input_tokens=figures.input_tokens,
            output_tokens=figures.output_tokens,
        )
    return billed(rec, price)


def billed(rec: CallRecord, price: Price | None) -> CallRecord:
    """``rec`` with ``cost_usd`` from the provider's figures when it reported them (cached reads,
    uncached input, 5-minute and 1-hour writes, output), as the provider bills them; without them the
    simulated cost :meth:`Accountant.account` set stays. No price: no money."""
    if price is None:
        return replace(rec, cost_usd=None, saved_usd=None, uncached_usd=None)
    if not rec.has_real_usage:
        return rec
    hit, total = rec.real_hit_tokens or 0, rec.real_input_tokens or 0
    write = rec.real_cache_creation or 0
    hour = min(write, rec.real_cache_write_1h or 0)
    miss = max(0, total - hit - write)
    return replace(
        rec,
        cost_usd=money(price, hit, miss, write - hour, hour, rec.output_tokens or 0),
        uncached_usd=money(price, 0, miss, write - hour, hour),
    )
