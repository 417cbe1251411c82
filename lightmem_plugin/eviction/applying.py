"""Every eviction decision made so far, applied to a request: the same bytes call after call.

Why re-apply rather than rewrite once: the host keeps sending its own history, so each request comes
with the outputs, arguments and tasks a batch paged out; the stubs and summaries must go in again
exactly as before (DESIGN I2), or the prefix the provider cached breaks on every call. Why memoise
by message object: a message that was stubbed is handed on as the very same object while the
decisions stand (:class:`..codecs.memo.PerObject`), so later steps (encode, count) reuse their work
too; a collapse is re-checked cheaply by the identity of the messages it verified last.
"""

from __future__ import annotations

from typing import Any

from ..codecs.memo import PerObject
from ..model import Message, Request, TextPart, ToolCallPart, ToolResultPart
from .collapse import Collapse, fingerprint
from .state import EvictionState
from .thinking import without_thinking


class Applier:
    """Applies a session's eviction state to each request, and remembers what it built for it."""

    def __init__(self) -> None:
        self._state = EvictionState()  # the decisions the memo's misses read (set at each call)
        self._applied: PerObject[Message, Message] = PerObject(self._stub_message)
        self._applied_for: tuple[int, ...] = ()  # the eviction decisions _applied was made for
        self._thoughtless: PerObject[Message, Message] = PerObject(without_thinking)
        self._verified: dict[int, tuple[Message, Message]] = {}
        self._collapsed: dict[int, Message] = {}
        self._requests: dict[int, tuple[Message, Message]] = {}  # task -> (its request, what is sent)
        self.collapsed: list[tuple[int, int]] = []
        """(first, last) message ranges of the last applied request that became one message each."""

    def apply(self, state: EvictionState, req: Request) -> Request:
        """``req`` with every eviction in ``state`` applied (no change when none applies); the ranges
        of ``req.messages`` that were replaced by one summary message each are in :attr:`collapsed`."""
        self.collapsed = []
        if not (state.stubs or state.args or state.collapses or state.thinking_before):
            return req
        return self._collapse(state, req, self.stub_parts(state, req))

    def stub_parts(self, state: EvictionState, req: Request) -> Request:
        """``req`` with evicted tool outputs and arguments replaced by their stubs, and the answers a
        compaction left behind without their thinking (:mod:`.thinking`; same messages)."""
        return self._unthought(state, self._stub_parts(state, req))

    def _unthought(self, state: EvictionState, req: Request) -> Request:
        upto = min(state.thinking_before, len(req.messages))
        if upto <= 0:
            return req
        head = self._thoughtless.map(req.messages[:upto])  # the same object call after call
        if all(a is b for a, b in zip(head, req.messages, strict=False)):
            return req
        return Request([*head, *req.messages[upto:]], req.tools, req.extra, req.hints)

    def _stub_parts(self, state: EvictionState, req: Request) -> Request:
        if not (state.stubs or state.args):
            return req
        made_for = (*state.version, len(state.stubs))
        if made_for != self._applied_for:  # new decisions: every message is looked at again
            self._applied.forget()
            self._applied_for = made_for
        self._state = state
        out = self._applied.map(req.messages)  # a stubbed message is the same object call after call
        if all(a is b for a, b in zip(out, req.messages, strict=True)):
            return req
        return Request(out, req.tools, req.extra, req.hints)

    def _stub_message(self, msg: Message) -> Message:
        """``msg`` with its evicted outputs and arguments as their stubs (``msg`` itself if none)."""
        stubs, args = self._state.stubs, self._state.args
        if not any(
            (isinstance(p, ToolResultPart) and p.tool_call_id in stubs)
            or (isinstance(p, ToolCallPart) and p.id in args)
            for p in msg.parts
        ):
            return msg
        return Message(msg.role, [self._stubbed(p) for p in msg.parts], dict(msg.extra), dict(msg.hints))

    def _stubbed(self, part: Any) -> Any:
        if isinstance(part, ToolResultPart):
            stub = self._state.stubs.get(part.tool_call_id)
            if stub is not None:
                return ToolResultPart(part.tool_call_id, [TextPart(stub)], part.is_error, dict(part.extra))
        elif isinstance(part, ToolCallPart):
            args = self._state.args.get(part.id)
            if args is not None:
                return ToolCallPart(part.id, part.name, args, dict(part.extra))
        return part

    def _collapse(self, state: EvictionState, original: Request, req: Request) -> Request:
        """``req`` with each collapsed task's messages replaced by its one summary message.

        A collapse applies only where the same messages are found again (checked on ``original``, by
        fingerprint); a host that rewrote its history gets its own messages back, never a wrong one."""
        if not state.collapses:
            return req
        src, msgs = original.messages, req.messages
        keep: list[tuple[int, int, Message]] = []
        requests: dict[int, Message] = {}  # a finished task's request that left with it
        verified: dict[int, tuple[Message, Message]] = {}
        for c in state.collapses:
            if c.last >= len(src):
                continue
            seen = self._verified.get(c.number)
            ok = seen is not None and seen[0] is src[c.first] and seen[1] is src[c.last]
            if not ok and fingerprint(src[c.first : c.last + 1]) != c.fingerprint:
                continue
            verified[c.number] = (src[c.first], src[c.last])
            msg = self._collapsed.get(c.number)
            if msg is None:
                msg = self._collapsed[c.number] = Message("assistant", [TextPart(c.text)])
            keep.append((c.first, c.last, msg))
            short = self._short_request(c, src)
            if short is not None:
                requests[c.goal] = short
        self._verified = verified
        if not keep:
            return req
        if requests:
            msgs = [requests.get(i, m) for i, m in enumerate(msgs)]
        out: list[Message] = []
        pos = 0
        for first, last, msg in sorted(keep, key=lambda k: k[0]):
            if first < pos:
                continue  # overlapping ranges cannot come from one history; keep the first
            out.extend(msgs[pos:first])
            out.append(msg)
            self.collapsed.append((first, last))
            pos = last + 1
        out.extend(msgs[pos:])
        return Request(out, req.tools, req.extra, req.hints)

    def _short_request(self, c: Collapse, src: list[Message]) -> Message | None:
        """What is sent for the request of collapsed task ``c`` when it left with the task (the same
        object call after call), or None: it stays whole, or the host's request there is another."""
        if c.goal < 0 or c.goal >= len(src):
            return None
        original = src[c.goal]
        hit = self._requests.get(c.number)
        if hit is not None and hit[0] is original:
            return hit[1]
        if fingerprint([original]) != c.goal_fingerprint:
            return None
        first = original.parts[0] if original.parts else None
        extra = dict(first.extra) if isinstance(first, TextPart) else {}
        short = Message(
            original.role, [TextPart(c.goal_text, extra)], dict(original.extra), dict(original.hints)
        )
        self._requests[c.number] = (original, short)
        return short
