"""One ledger row per model call: what a session sent, what it would have sent, what the provider said.

Why a part of its own: the transformer chain decides what the model sees; the recorder only watches.
It counts the request as sent and the request the host would have sent without lightmem2 (the
originals of every stub the host already holds, :class:`~.baseline.Baseline`), writes the row, and
amends it with the provider's real usage when that arrives. Three host behaviours shape it:

- a retry (the same request again after one that got no answer) is one model call: it keeps the
  first row's call number;
- a host that assembles a whole turn once and makes the turn's model calls itself (OpenClaw) reports
  them afterwards (:meth:`Recorder.turn`): the first call's row waits for that report;
- nothing here may break a call: every write runs under the session's fail-open guard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..model import Message, Request
from ..store import CallLedger
from ..store.ledger import CallRecord
from ..tokens import TokenCounter
from .accounting import Accountant, CallFacts, detect_api, real_usage, with_real_usage
from .baseline import Baseline
from .prices import Price

if TYPE_CHECKING:
    from ..faults import FailOpen


def with_usage(
    rec: CallRecord, usage: Mapping[str, Any], api: str | None, price: Price | None = None
) -> CallRecord:
    """``rec`` with the provider's ``usage`` (read as ``api``; guessed from its keys when not given),
    billed at ``price``."""
    kind = api or detect_api(usage)
    return with_real_usage(rec, kind, real_usage(kind, usage), price)


def extended(req: Request, messages: list[Message]) -> Request:
    """``req`` with ``messages`` appended (a host's own call inside a turn it assembled once)."""
    return Request([*req.messages, *messages], list(req.tools), dict(req.extra), dict(req.hints))


class Recorder:
    """The ledger rows of one session object (none when the plugin keeps no ledger)."""

    def __init__(
        self,
        ledger: CallLedger | None,
        counter: TokenCounter,
        peek: Callable[[str], bytes],
        fail: FailOpen,
    ) -> None:
        self.ledger = ledger
        self.fail = fail
        self._accountant = Accountant(counter) if ledger is not None else None
        self._baseline = Baseline(peek)
        self._pending: tuple[CallFacts, Request, Request] | None = None
        self._answered = False  # a model answer came since the last row (a retry follows no answer)
        self.last: CallRecord | None = None
        self._price: Price | None = None  # the last row's price, for the usage that amends it

    @property
    def active(self) -> bool:
        """True when rows are written at all."""
        return self.ledger is not None and self._accountant is not None

    @property
    def pending(self) -> bool:
        """True while a whole turn's first call waits for :meth:`turn`."""
        return self._pending is not None

    def call(self, facts: CallFacts, original: Request, sent: Request, defer: bool = False) -> int:
        """Record one call; with ``defer``, keep it back for :meth:`turn`. Returns the call number the
        row got (an earlier one for a retry)."""
        if not self.active:
            return facts.call_index
        if defer:
            self._pending = (facts, original, sent)
            return facts.call_index
        return self.write(facts, original, sent)

    def write(
        self, facts: CallFacts, original: Request, sent: Request, usage: Any = None, api: str = ""
    ) -> int:
        """Account and write one row (fail-open); returns the call number it got."""
        ledger, accountant = self.ledger, self._accountant
        if ledger is None or accountant is None:
            return facts.call_index
        got = facts.call_index

        def write() -> None:
            nonlocal got
            rec = accountant.account(facts, self._baseline.expand(original), sent)
            prev = self.last
            retried = not self._answered and not usage and accountant.repeated
            self._answered = False
            if retried and prev is not None and not prev.has_real_usage:
                # the same request again after one that got no answer: the host retried it (its client
                # timed out, the connection dropped); one model call, so it keeps the first one's row
                rec = replace(rec, call_index=prev.call_index)
                got = prev.call_index
            if usage:
                rec = with_usage(rec, usage, api, facts.price)
            self.last, self._price = rec, facts.price
            ledger.record_call(rec)

        self.fail.run("ledger", write, None)
        return got

    def flush(self) -> None:
        """A whole turn's first call whose turn never came (the host failed or stopped): its row alone."""
        if self._pending is not None:
            facts, original, sent = self._pending
            self._pending = None
            self.write(facts, original, sent)

    def host_respells(self, value: bool) -> None:
        """Whether the host respells call ids before each request (see :func:`~.accounting.ids_alike`)."""
        if self._accountant is not None:
            self._accountant.host_respells = value

    def turn(
        self,
        messages: list[Message] | None,
        calls: list[tuple[int, dict[str, Any]]],
        next_facts: Callable[[], CallFacts],
        api: str,
    ) -> int:
        """Rows for the model calls a host made inside one turn it assembled once (see
        :meth:`~.pipeline.Session.record_turn`); ``messages`` None: the turn did not decode, so the
        first call keeps its row alone. ``next_facts`` numbers each later call. Returns rows written."""
        pending, self._pending = self._pending, None
        if pending is None:
            return 0
        if messages is None or not calls:
            self.write(*pending)
            return 0
        facts, original, sent = pending
        for k, (position, usage) in enumerate(sorted(calls, key=lambda c: c[0])):
            head = messages[: max(0, min(position, len(messages)))]
            if k:
                facts = next_facts()
            self.write(facts, extended(original, head), extended(sent, head), usage, api)
        return len(calls)

    def mark_cold(self, code: str) -> None:
        """The last row met a cold provider cache, as its usage showed (:mod:`..eviction.cold_cache`)."""
        rec, ledger = self.last, self.ledger
        if rec is None or ledger is None:
            return

        def write() -> None:
            self.last = replace(rec, cold_start=code)
            ledger.record_call(self.last)

        self.fail.run("ledger", write, None)

    def usage(self, usage: Mapping[str, Any] | None, api: str | None) -> None:
        """The provider's real usage for the last row (a model answer came)."""
        self._answered = True
        rec, ledger = self.last, self.ledger
        if rec is None or ledger is None or not usage:
            return

        def write() -> None:
            self.last = with_usage(rec, usage, api, self._price)
            ledger.record_call(self.last)

        self.fail.run("ledger", write, None)
