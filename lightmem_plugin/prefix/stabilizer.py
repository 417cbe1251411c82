"""Keeps the prompt head byte-stable across calls (DESIGN section 4, invariant I2).

Why: a provider prefix cache misses everything after the first changed byte, so a clock, a counter
or a session id near the top of the prompt makes every call a full miss. The stabilizer replaces
such values in the *head* (the leading system/developer messages and the first ``headMessages``
messages) by fixed placeholders and puts the real values where they cost least:

- session values (work dir, home dir, ids, UUIDs) in one small "session values" text part at the end
  of the last head message: it misses once per session, then stays cached;
- per-call values (time, date, counters) in a tiny *tail block*, a text part at the end of the last
  user or tool message. The tail is the only thing that differs from the previous call's prefix, so
  for an append-only host ``strip_tail(apply(t+1))`` starts with ``strip_tail(apply(t))``.

Only the head and the last user/tool message are read; a call whose head did not change costs one
tuple comparison, and only changed lines are re-scanned. :meth:`Stabilizer.restore` and
:meth:`Stabilizer.restore_arguments` map placeholders in model output back before the host sees it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..config import PLACEHOLDERS, StabilizerConfig
from ..errors import ConfigError, UsageError
from ..model import JSON, Message, Part, Request, TextPart, ToolResultPart
from . import placeholders as ph
from .placeholders import LineScan, Scan

SESSION_BLOCK_PREFIX = "\n\n[lightmem2 session values: "
TAIL_PREFIX = "\n\n[lightmem2 now: "
STATE_VERSION = 1
_CALLER_KINDS = ("WORKDIR", "HOME", "SESSION_ID", "AGENT_ID")


def _ours(part: Part) -> bool:
    """A block this module wrote (so applying twice changes nothing)."""
    return isinstance(part, TextPart) and part.text.startswith((SESSION_BLOCK_PREFIX, TAIL_PREFIX))


def head_length(messages: Sequence[Message], head_messages: int) -> int:
    """How many leading messages form the head: the system/developer run, then user messages
    (without tool results) while their index is below ``head_messages``. A session fixes it at its
    first call, so appended messages never join the head and move the session block."""
    n = 0
    while n < len(messages) and messages[n].role in ("system", "developer"):
        n += 1
    while (
        n < min(len(messages), head_messages)
        and messages[n].role == "user"
        and not any(isinstance(p, ToolResultPart) for p in messages[n].parts)
    ):
        n += 1
    return n


def tool_name(tool: JSON) -> str:
    """A tool definition's name in any of the three wire formats."""
    fn = tool.get("function")
    name = tool.get("name", fn.get("name") if isinstance(fn, dict) else None)
    return name if isinstance(name, str) else str(tool.get("type", ""))


def canonical_tools(tools: Sequence[JSON]) -> list[JSON]:
    """Tools sorted by name (stable). ``cache_control`` marks stay at their positions, so an
    Anthropic breakpoint on the last tool still ends the tool list."""
    order = sorted(range(len(tools)), key=lambda i: tool_name(tools[i]))
    if order == list(range(len(tools))):
        return list(tools)
    marks = {i: tools[i]["cache_control"] for i in order if "cache_control" in tools[i]}
    out = [{k: v for k, v in tools[i].items() if i not in marks or k != "cache_control"} for i in order]
    for i, mark in marks.items():
        out[i]["cache_control"] = mark
    return out


def _tail_slot(messages: Sequence[Message]) -> int | None:
    """The last user or tool message (an assistant prefill stays last), else the last message."""
    found = (i for i in range(len(messages) - 1, -1, -1) if messages[i].role in ("user", "tool"))
    return next(found, len(messages) - 1 if messages else None)


def _with_last(parts: list[Any], block: TextPart, prefix: str) -> list[Any]:
    """``parts`` with ``block`` appended, or replacing a block of ours (same ``prefix``) at the end."""
    if parts and isinstance(parts[-1], TextPart) and parts[-1].text.startswith(prefix):
        return [*parts[:-1], block]
    return [*parts, block]


def _tail_list(msg: Message) -> list[Any]:
    """Where the tail lives: inside the tool result of a ``tool`` message (OpenAI formats hold one
    result per tool message), else the message parts (after an Anthropic cache breakpoint)."""
    last = msg.parts[-1] if msg.parts else None
    return list(last.content) if msg.role == "tool" and isinstance(last, ToolResultPart) else list(msg.parts)


def _with_tail_list(msg: Message, items: list[Any]) -> Message:
    last = msg.parts[-1] if msg.parts else None
    if msg.role == "tool" and isinstance(last, ToolResultPart):
        items = [*msg.parts[:-1], ToolResultPart(last.tool_call_id, items, last.is_error, last.extra)]
    return Message(msg.role, items, msg.extra, msg.hints)


def find_tail(req: Request) -> str | None:
    """The tail block text of a transformed request, or None."""
    slot = _tail_slot(req.messages)
    items = _tail_list(req.messages[slot]) if slot is not None else []
    last = items[-1] if items else None
    return last.text if isinstance(last, TextPart) and last.text.startswith(TAIL_PREFIX) else None


def strip_tail(req: Request) -> Request:
    """``req`` without its tail block: the part that I2 says the next call's request starts with."""
    slot = _tail_slot(req.messages)
    if slot is None or find_tail(req) is None:
        return req
    messages = list(req.messages)
    messages[slot] = _with_tail_list(messages[slot], _tail_list(messages[slot])[:-1])
    return Request(messages, req.tools, req.extra, req.hints)


def _check_placeholders(config: StabilizerConfig) -> None:
    bad = [p for p in config.placeholders if p not in PLACEHOLDERS]
    if bad:
        raise ConfigError(
            f"stabilizer.placeholders: unknown placeholder {bad[0]!r}; use names from {', '.join(PLACEHOLDERS)}"
        )


class Stabilizer:
    """Per-session placeholder state plus the transformation of each request.

    ``known`` gives session values the caller already knows (keys WORKDIR, HOME, SESSION_ID,
    AGENT_ID), for hosts that report them outside the prompt text.
    """

    def __init__(self, config: StabilizerConfig, *, known: Mapping[str, str] | None = None) -> None:
        _check_placeholders(config)
        self.config = config
        self._enabled = frozenset(config.placeholders)
        self._session: dict[str, str] = {}  # placeholder name -> value, in order of creation
        self._by_value: dict[str, str] = {}
        self._latest: dict[str, str] = {}  # per-call placeholder name -> value of the latest call
        self._head_len: int | None = None
        self._memo: tuple[tuple[str, ...], Scan] | None = None
        self._lines: dict[str, LineScan] = {}  # line scans of the previous call's head
        self._pattern: re.Pattern[str] | None = None
        self._values: dict[str, str] | None = None
        self._made: dict[int, Message] = {}  # head position -> the message made for it last call
        self._learn_known(known)

    def reconfigure(self, config: StabilizerConfig) -> None:
        """Follow the config in force from the next call on. ``headMessages`` stays as the session
        decided it at its first call (the head it keeps stable is one of its decisions: another length
        would move the cached prefix on every call after)."""
        if config is self.config:
            return
        _check_placeholders(config)
        if frozenset(config.placeholders) != self._enabled:
            self._enabled = frozenset(config.placeholders)
            self._memo, self._lines, self._pattern = None, {}, None  # scans made for the old set
        self.config = config

    # -- state -------------------------------------------------------------------------------------
    def _learn_known(self, known: Mapping[str, str] | None) -> None:
        bad = [key for key in known or {} if key not in _CALLER_KINDS]
        if bad:
            raise UsageError(f"Stabilizer(known=...): unknown key {bad[0]!r}; use {', '.join(_CALLER_KINDS)}")
        for kind in _CALLER_KINDS:
            given = (known or {}).get(kind)
            if given and kind in self._enabled:
                self._name_of(kind, given)

    def _name_of(self, kind: str, value: str) -> str:
        """The placeholder of a session value: the one it already has, else the next free name."""
        name = self._by_value.get(value)
        if name is None:
            count = sum(1 for n in self._session if ph.kind_of(n) == kind)
            name = ph.placeholder_name(kind, count + 1)
            self._session[name] = value
            self._by_value[value] = name
            self._values = None
        return name

    def values(self) -> dict[str, str]:
        """Every placeholder name this session knows -> its (latest) real value."""
        if self._values is None:
            self._values = {**self._session, **self._latest}
        return self._values

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable, ordered state; :meth:`from_state` rebuilds an equal stabilizer."""
        return {
            "version": STATE_VERSION,
            "headLength": self._head_len,
            "session": [[n, v] for n, v in self._session.items()],
            "latest": [[n, v] for n, v in self._latest.items()],
        }

    @classmethod
    def from_state(
        cls, config: StabilizerConfig, state: Mapping[str, Any], *, known: Mapping[str, str] | None = None
    ) -> Stabilizer:
        """A stabilizer continuing the session that :meth:`state_dict` saved."""
        try:
            if state["version"] != STATE_VERSION:
                raise ValueError(f"version {state['version']!r}")
            head = state["headLength"]
            session = [(str(n), str(v)) for n, v in state["session"]]
            latest = [(str(n), str(v)) for n, v in state["latest"]]
            if head is not None and not isinstance(head, int):
                raise ValueError(f"headLength {head!r}")
        except (KeyError, TypeError, ValueError) as err:
            raise UsageError(
                f"stabilizer state is malformed ({err}); pass a dict from Stabilizer.state_dict()"
            ) from None
        self = cls(config)
        self._head_len = head
        for name, value in session:
            self._session[name] = value
            self._by_value.setdefault(value, name)
        self._latest.update(latest)
        self._learn_known(known)
        return self

    # -- transformation ----------------------------------------------------------------------------
    def apply(self, req: Request) -> Request:
        """The stabilised request; ``req`` is not changed, unchanged messages are shared."""
        tools = canonical_tools(req.tools) if self.config.canonicalToolOrder else list(req.tools)
        messages = list(req.messages)
        if self.config.enabled and messages:
            self._stabilise(messages)
        return Request(messages, tools, dict(req.extra), dict(req.hints))

    def _scan(self, texts: tuple[str, ...]) -> Scan:
        """Placeholders for the head texts; only lines not seen in the previous call are scanned."""
        if self._memo is not None and self._memo[0] == texts:
            return self._memo[1]
        lines = dict.fromkeys(line for text in texts for line in text.split("\n"))
        fresh = [line for line in lines if line not in self._lines]
        for line in fresh:
            for kind, value in ph.learn_values(line, self._enabled):
                self._name_of(kind, value)
        if "HOME" in self._enabled and not any(ph.kind_of(n) == "HOME" for n in self._session):
            home = next(filter(None, map(ph.home_in_text, fresh)), None)
            if home is not None:
                self._name_of("HOME", home)
        literals = tuple(sorted(v for n, v in self._session.items() if ph.kind_of(n) != "UUID"))
        pattern = ph.detector(self._enabled, literals)
        old = self._lines if pattern is self._pattern else {}
        self._pattern, self._lines = pattern, {}

        def line_scan(line: str) -> LineScan:
            hit = self._lines.get(line) or old.get(line) or ph.scan_line(line, pattern, literals)
            self._lines[line] = hit
            return hit

        scan = ph.scan_texts(texts, line_scan, self._name_of)
        self._memo = (texts, scan)
        return scan

    def _stabilise(self, messages: list[Message]) -> None:
        if self._head_len is None:
            self._head_len = head_length(messages, self.config.headMessages)
        n = 0
        while n < min(self._head_len, len(messages)) and messages[n].role in ("system", "developer", "user"):
            n += 1
        slots: list[tuple[int, int, str, list[str]]] = []  # message, part, text, pieces (odd: scanned)
        for i in range(n):
            for j, part in enumerate(messages[i].parts):
                if isinstance(part, TextPart) and not _ours(part):
                    user = messages[i].role == "user"
                    pieces = ph.host_blocks(part.text) if user else ["", part.text, ""]
                    slots.append((i, j, part.text, pieces))
        texts = tuple(piece for *_, pieces in slots for piece in pieces[1::2])
        scan = self._scan(texts)
        if scan.per_call:
            self._latest.update(scan.per_call)
            self._values = None
        changed: dict[int, list[Any]] = {}
        done = iter(scan.texts)
        for i, j, text, pieces in slots:
            pieces[1::2] = [next(done) for _ in pieces[1::2]]
            new = "".join(pieces)
            if new != text:
                parts = changed.setdefault(i, list(messages[i].parts))
                parts[j] = replace(parts[j], text=new)
        if scan.session_names:
            used = [(name, value) for name, value in self._session.items() if name in scan.session_names]
            block = TextPart(ph.render_values(SESSION_BLOCK_PREFIX, used))
            changed[n - 1] = _with_last(
                changed.get(n - 1, list(messages[n - 1].parts)), block, SESSION_BLOCK_PREFIX
            )
        made: dict[int, Message] = {}
        for i, parts in changed.items():
            made[i] = messages[i] = self._same_as_last(
                i, Message(messages[i].role, parts, messages[i].extra, messages[i].hints)
            )
        self._made = made
        slot = _tail_slot(messages)
        if scan.per_call and slot is not None:
            tail = TextPart(ph.render_values(TAIL_PREFIX, scan.per_call))
            messages[slot] = _with_tail_list(
                messages[slot], _with_last(_tail_list(messages[slot]), tail, TAIL_PREFIX)
            )

    def _same_as_last(self, i: int, msg: Message) -> Message:
        """The head message made at position ``i`` last call when ``msg`` equals it, else ``msg``.

        Why: the stabilised head is rebuilt on every call from the host's head, and an equal but new
        object defeats every later identity memo (:class:`~.codecs.memo.PerObject`: respelling, the ledger's
        token count), so the head was counted again on each call (measured at the proxy)."""
        last = self._made.get(i)
        return last if last is not None and last == msg else msg

    # -- model output ------------------------------------------------------------------------------
    def restore(self, text: str) -> str:
        """``text`` with placeholders the model wrote replaced by their real (latest) values."""
        return ph.restore_text(text, self.values())

    def restore_arguments(self, arguments: str) -> str:
        """Tool-call argument JSON with placeholders restored; values are escaped inside strings."""
        return ph.restore_json(arguments, self.values())
