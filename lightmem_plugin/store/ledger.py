"""Per-session, per-call accounting: what we sent, what vanilla would have sent, and what the cache did.

Why a ledger: ``status``, ``report``, ``doctor`` and ``visual`` all answer "did lightmem2 pay off, and
what broke the cache?" from the same rows, across processes (a hook, the proxy and the CLI are separate
processes). Why SQLite: stdlib, one small file, atomic commits, and WAL lets one process write while
another reads. Each call is one row written in one transaction, so recording is cheap and a crash loses
at most the call in flight. Dicts are stored as JSON with sorted keys so the same record always reads
back the same way. The file is 0600 in the 0700 data dir (DESIGN I6); it holds counts and reasons only,
never message text.

Cost model (DESIGN section 1): ``K = 0.1 * hit + miss + 1.25 * write`` where hit, miss and write are
disjoint token counts of one request (``write`` are tokens written to the cache, Anthropic's
``cache_creation``). Beside K each row keeps money in USD (schema version 3): what the call cost as
billed, output included, and what lightmem2 saved on it, both priced by the metering layer
(:mod:`lightmem_plugin.metering.prices`); the ledger only stores and sums them. Rows written before
version 3 have no money (NULL, shown as "-").
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..security.redaction import Redactor
from ..tokens import k_cost as _k_cost
from .home import Home
from .sqlite_store import open_private_db

_SCHEMA_VERSION = 5
_SCHEMA = (
    "session_id TEXT NOT NULL, writer TEXT NOT NULL DEFAULT '', call_index INTEGER NOT NULL, "
    "mode TEXT NOT NULL, "
    "input_tokens INTEGER NOT NULL, baseline_tokens INTEGER NOT NULL, hit_tokens INTEGER NOT NULL, "
    "miss_tokens INTEGER NOT NULL, write_tokens INTEGER NOT NULL, real_cache_read INTEGER, "
    "real_cache_creation INTEGER, real_cached_tokens INTEGER, real_input_tokens INTEGER, k REAL NOT NULL, "
    "k_baseline REAL NOT NULL, saved_by_pass TEXT NOT NULL, evicted_tokens INTEGER NOT NULL, "
    "break_message INTEGER, break_offset INTEGER, break_reason TEXT, errors TEXT NOT NULL, last_error TEXT"
)
_V2_COLUMNS = tuple(col.split()[0] for col in _SCHEMA.split(", "))
_V3_ADDED = (
    ("model", "TEXT"),
    ("output_tokens", "INTEGER"),
    ("real_cache_write_1h", "INTEGER"),
    ("cost_usd", "REAL"),
    ("saved_usd", "REAL"),
)
"""Version 3: the model the call named ('' when the host named none, NULL on older rows), the output
tokens and the 1-hour share of the cache writes the provider reported, and money (USD)."""
_V4_ADDED = (("cold_start", "TEXT"),)
"""Version 4: why the call met a cold provider cache (NULL: warm, unknown, or an older row)."""
_V5_ADDED = (("miss_shape", "TEXT"), ("uncached_usd", "REAL"))
"""Version 5: what the request was made of against the previous one, for naming the cause of each
uncached token (:mod:`..metering.misses`), and the money of its uncached input (NULL: older rows)."""
_COLUMNS = _V2_COLUMNS + tuple(name for name, _ in (*_V3_ADDED, *_V4_ADDED, *_V5_ADDED))
_JSON_COLUMNS = ("saved_by_pass", "errors")
_V1_COLUMNS = tuple(c for c in _V2_COLUMNS if c != "writer")
# Version 2 keys rows by (session, writer, call index): two processes serving one session (two
# proxies, a team gateway) each number their calls, and before this one's rows replaced the other's
# (measured: 40 requests alternating between two proxies left 21 rows). A version-1 ledger is copied
# into the new table (writer '') in the same script that creates it.
_CREATE = (
    "CREATE TABLE IF NOT EXISTS calls (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    + ", ".join(f"{c} TEXT" for c in _V1_COLUMNS)
    + ");\n"
    "CREATE TABLE calls_v2 (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    + _SCHEMA
    + ", UNIQUE (session_id, writer, call_index));\n"
    f"INSERT INTO calls_v2 (seq, {', '.join(_V1_COLUMNS)}) SELECT seq, {', '.join(_V1_COLUMNS)} FROM calls;\n"
    "DROP TABLE calls;\n"
    "ALTER TABLE calls_v2 RENAME TO calls;\n"
    "DROP INDEX IF EXISTS calls_by_session;\n"
    "CREATE INDEX calls_by_session ON calls (session_id, call_index);\n"
)
_STEPS = (
    (2, _CREATE),
    (3, "".join(f"ALTER TABLE calls ADD COLUMN {name} {kind};\n" for name, kind in _V3_ADDED)),
    (4, "".join(f"ALTER TABLE calls ADD COLUMN {name} {kind};\n" for name, kind in _V4_ADDED)),
    (5, "".join(f"ALTER TABLE calls ADD COLUMN {name} {kind};\n" for name, kind in _V5_ADDED)),
)
"""The ledger's schema in steps: a file at version 1 or 2 keeps its rows and gains the money columns
(NULL: unknown), a new file gets both steps."""


def _redacted(rec: CallRecord) -> CallRecord:
    """``rec`` with credentials removed from its free-text fields (an error may quote its input).

    The built-in rules are compiled once per process (:func:`_redactor`), and a row without free text
    costs nothing: measured under host-like load before this, building a ``Redactor`` for every row (twice
    per call) was 21% of the proxy's CPU (``benchmarks/bench_server.py`` profile, py-spy)."""
    if not rec.last_error and not rec.break_reason:
        return rec
    redactor = _redactor()
    return replace(
        rec,
        last_error=redactor.redact(rec.last_error) if rec.last_error else rec.last_error,
        break_reason=redactor.redact(rec.break_reason) if rec.break_reason else rec.break_reason,
    )


@functools.cache
def _redactor() -> Redactor:
    return Redactor()


def k_cost(hit: int, miss: int, write: int = 0) -> float:
    """K of one request with disjoint counts: cached at 0.1x, uncached at 1x, cache writes at 1.25x.

    The ledger keeps ``write`` apart from ``miss``; the one cost formula (:func:`~.tokens.k_cost`)
    counts writes inside the misses.
    """
    return _k_cost(hit, miss + write, write)


def _without(cost: float | None, saved: float | None) -> float | None:
    """What lightmem2's calls would have cost without it: what they cost plus what it saved (None
    where either is unknown)."""
    return None if cost is None or saved is None else cost + saved


@dataclass(frozen=True)
class CallRecord:
    """One model call as the ledger keeps it.

    ``real_*`` are what the provider reported (None when it did not): ``real_input_tokens`` is the
    call's total input (cached + uncached + written; adapters add up Anthropic's split usage),
    ``real_cache_read`` / ``real_cache_creation`` Anthropic's figures, ``real_cached_tokens`` OpenAI's.
    ``prefix_break_at`` is (message index, char offset) of the first byte that differs from the previous
    call's request, None when this request extends it. ``errors`` counts pass failures in this call.

    Money (schema version 3): ``model`` the call named ('' when the host named none, None on rows
    older than money); ``output_tokens`` and ``real_cache_write_1h`` (the 1-hour share of
    ``real_cache_creation``) as the provider reported them; ``cost_usd`` the call in USD as billed
    (from the provider's figures when it reported them, else from the simulated ones), output
    included; ``saved_usd`` what lightmem2 saved on it (the call without lightmem2 priced the same,
    less this one). Both None when no price applies.

    ``cold_start`` (schema version 4): why the call met a cold provider cache, as a code of
    :mod:`lightmem_plugin.eviction.cold_cache` (``pause 1800 300``, ``drop 45000``); None when warm or
    unknown.

    ``miss_shape`` (schema version 5): the request against the previous one, in lightmem2's count,
    as ``"common new by"`` (leading tokens identical to the previous request, tokens the host
    appended, who changed what stood between: ``first``, ``lightmem2``, ``host``, ``host-tools``,
    ``host-compaction`` or ``-``), read by :meth:`shape`; ``uncached_usd`` the money of the call's uncached input (cache
    writes and misses), which :mod:`lightmem_plugin.metering.misses` splits by cause. None on older rows.
    """

    session_id: str
    call_index: int
    mode: str
    input_tokens: int
    baseline_tokens: int
    hit_tokens: int
    miss_tokens: int
    write_tokens: int = 0
    real_cache_read: int | None = None
    real_cache_creation: int | None = None
    real_cached_tokens: int | None = None
    real_input_tokens: int | None = None
    k: float = 0.0
    k_baseline: float = 0.0
    saved_by_pass: dict[str, int] = field(default_factory=dict)
    evicted_tokens: int = 0
    prefix_break_at: tuple[int, int] | None = None
    break_reason: str | None = None
    errors: dict[str, int] = field(default_factory=dict)
    last_error: str | None = None
    writer: str = ""  # which process recorded it (rows of two processes on one session never collide)
    model: str | None = None
    output_tokens: int | None = None
    real_cache_write_1h: int | None = None
    cost_usd: float | None = None
    saved_usd: float | None = None
    cold_start: str | None = None
    miss_shape: str | None = None
    uncached_usd: float | None = None

    @property
    def cost_without_usd(self) -> float | None:
        """The call without lightmem2 in USD, priced the same (None without a price)."""
        return _without(self.cost_usd, self.saved_usd)

    @property
    def real_hit_tokens(self) -> int | None:
        """Cached tokens the provider reported (Anthropic cache_read or OpenAI cached_tokens)."""
        if self.real_cache_read is not None:
            return self.real_cache_read
        return self.real_cached_tokens

    @property
    def real_baseline_tokens(self) -> int | None:
        """The call without lightmem2 in the provider's units: what it counted plus what lightmem2
        removed, less what it added (our tools' definitions; both our estimate, the provider never
        sees them), None when it reported no count."""
        if self.real_input_tokens is None:
            return None
        return max(0, self.real_input_tokens + self.baseline_tokens - self.input_tokens)

    @property
    def has_real_usage(self) -> bool:
        """True when the provider reported both the input total and the cached part."""
        return self.real_input_tokens is not None and self.real_hit_tokens is not None

    def hit_rate(self) -> tuple[float, bool]:
        """(hit rate, is_real): the provider's figure when reported, else the simulated one."""
        real_hit = self.real_hit_tokens
        if self.real_input_tokens and real_hit is not None:
            return real_hit / self.real_input_tokens, True
        total = self.hit_tokens + self.miss_tokens + self.write_tokens
        return (self.hit_tokens / total if total else 0.0), False


@dataclass(frozen=True)
class SessionTotals:
    """A session summed over its calls (what ``status`` and ``report`` print)."""

    session_id: str
    calls: int
    mode: str
    input_tokens: int
    baseline_tokens: int
    last_input_tokens: int
    """The newest call's input: the provider's own count when it reported one (see
    :attr:`context_counted_by`), else our estimate of the messages."""
    last_baseline_tokens: int
    """The same call without lightmem2: its input plus what lightmem2 removed (our estimate)."""
    hit_tokens: int
    miss_tokens: int
    write_tokens: int
    real_calls: int
    real_hit_tokens: int
    real_input_tokens: int
    k: float
    k_baseline: float
    saved_by_pass: dict[str, int]
    evicted_tokens: int
    evictions: int
    prefix_breaks: int
    errors: dict[str, int]
    last_error: str | None
    context_counted_by: str = "estimate"
    """``provider`` when :attr:`last_input_tokens` is the provider's figure, else ``estimate``."""
    real_k: float = 0.0
    """K by the provider's own figures, over the :attr:`real_calls` calls that reported them."""
    output_tokens: int = 0
    """Output tokens the provider reported, summed."""
    cost_usd: float | None = None
    """USD as billed over the :attr:`priced_calls` calls that have a price (None: none has)."""
    saved_usd: float | None = None
    """USD lightmem2 saved over the same calls."""
    priced_calls: int = 0
    priced_real_calls: int = 0
    """Of :attr:`priced_calls`, those priced from the provider's own figures."""
    cold: list[tuple[int, str]] = field(default_factory=list)
    """(call index, code) of each call that met a cold provider cache, in call order
    (:func:`lightmem_plugin.eviction.cold_cache.summary` says them in one line)."""
    unpriced_model: str | None = None
    """The model of the newest call without money ('' when the host named none, None for rows older
    than money, or when every call has money): what :func:`~lightmem_plugin.metering.prices.hint`
    names."""

    @property
    def cost_without_usd(self) -> float | None:
        """The same calls without lightmem2 in USD, priced the same."""
        return _without(self.cost_usd, self.saved_usd)

    @property
    def saved_usd_pct(self) -> float | None:
        """:attr:`saved_usd` as a percentage of :attr:`cost_without_usd`."""
        without = self.cost_without_usd
        if without is None or self.saved_usd is None:
            return None
        return 100.0 * self.saved_usd / without if without else 0.0

    @property
    def unpriced_calls(self) -> int:
        """Calls without money (older rows, or a model without a price)."""
        return self.calls - self.priced_calls

    def hit_rate(self) -> tuple[float, bool]:
        """(hit rate, is_real): over the calls that reported usage if any did, else simulated."""
        if self.real_input_tokens:
            return self.real_hit_tokens / self.real_input_tokens, True
        total = self.hit_tokens + self.miss_tokens + self.write_tokens
        return (self.hit_tokens / total if total else 0.0), False

    @property
    def k_saved(self) -> float:
        """K saved against the vanilla estimate (negative when we cost more)."""
        return self.k_baseline - self.k

    @property
    def k_saved_pct(self) -> float:
        """:attr:`k_saved` as a percentage of the vanilla estimate."""
        return 100.0 * self.k_saved / self.k_baseline if self.k_baseline else 0.0


def summarize(session_id: str, calls: list[CallRecord]) -> SessionTotals:
    """Sum ``calls`` (ordered by call index) into one :class:`SessionTotals`."""
    saved: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    last_error: str | None = None
    for c in calls:
        saved.update(c.saved_by_pass)
        errors.update(c.errors)
        if c.errors:
            names = ", ".join(f"{n} x{v}" for n, v in sorted(c.errors.items()))
            last_error = f"call {c.call_index}: {names}" + (f" ({c.last_error})" if c.last_error else "")
    real = [c for c in calls if c.has_real_usage]
    last = calls[-1] if calls else None
    # what the provider counted is what it received (system prompt and tools included, which our
    # estimate of the message list leaves out); the saving on top of it is our estimate
    context, context_by = (last.input_tokens if last else 0), "estimate"
    without = last.baseline_tokens if last else 0
    if last is not None and last.real_input_tokens:
        context, context_by = last.real_input_tokens, "provider"
        without = last.real_baseline_tokens or context
    priced = [c for c in calls if c.cost_usd is not None and c.saved_usd is not None]
    unpriced = [c for c in calls if c.cost_usd is None or c.saved_usd is None]
    return SessionTotals(
        session_id=session_id,
        calls=len(calls),
        mode=last.mode if last else "",
        input_tokens=sum(c.input_tokens for c in calls),
        baseline_tokens=sum(c.baseline_tokens for c in calls),
        last_input_tokens=context,
        last_baseline_tokens=without,
        hit_tokens=sum(c.hit_tokens for c in calls),
        miss_tokens=sum(c.miss_tokens for c in calls),
        write_tokens=sum(c.write_tokens for c in calls),
        real_calls=len(real),
        real_hit_tokens=sum(c.real_hit_tokens or 0 for c in real),
        real_input_tokens=sum(c.real_input_tokens or 0 for c in real),
        k=sum(c.k for c in calls),
        k_baseline=sum(c.k_baseline for c in calls),
        saved_by_pass=dict(sorted(saved.items())),
        evicted_tokens=sum(c.evicted_tokens for c in calls),
        evictions=sum(1 for c in calls if c.evicted_tokens > 0),
        prefix_breaks=sum(1 for c in calls if c.prefix_break_at is not None),
        errors=dict(sorted(errors.items())),
        last_error=last_error,
        context_counted_by=context_by,
        real_k=sum(_real_k(c) for c in real),
        output_tokens=sum(c.output_tokens or 0 for c in calls),
        cost_usd=sum(c.cost_usd or 0.0 for c in priced) if priced else None,
        saved_usd=sum(c.saved_usd or 0.0 for c in priced) if priced else None,
        priced_calls=len(priced),
        priced_real_calls=sum(1 for c in priced if c.has_real_usage),
        unpriced_model=unpriced[-1].model if unpriced else None,
        cold=[(c.call_index, c.cold_start or "") for c in calls if c.cold_start],
    )


def _real_k(c: CallRecord) -> float:
    """K of one call from what the provider reported: cached reads at 0.1x, the rest at 1x, writes 1.25x."""
    hit, total, write = c.real_hit_tokens or 0, c.real_input_tokens or 0, c.real_cache_creation or 0
    return k_cost(hit, max(0, total - hit - write), write)


def _dump(value: dict[str, int]) -> str:
    return json.dumps({str(k): int(v) for k, v in value.items()}, sort_keys=True, separators=(",", ":"))


def _row(rec: CallRecord) -> tuple[Any, ...]:
    brk = rec.prefix_break_at
    values: dict[str, Any] = {
        "break_message": brk[0] if brk else None,
        "break_offset": brk[1] if brk else None,
    }
    for name in _COLUMNS:
        if name in _JSON_COLUMNS:
            values[name] = _dump(getattr(rec, name))
        elif name not in values:
            values[name] = getattr(rec, name)
    return tuple(values[name] for name in _COLUMNS)


def _record(row: Mapping[str, Any] | sqlite3.Row) -> CallRecord:
    values = {name: row[name] for name in _COLUMNS if not name.startswith("break_")}
    for name in _JSON_COLUMNS:
        values[name] = json.loads(row[name])
    brk = None if row["break_message"] is None else (int(row["break_message"]), int(row["break_offset"] or 0))
    return CallRecord(**values, prefix_break_at=brk, break_reason=row["break_reason"])


class LedgerReads:
    """What every ledger backend derives from its rows (the embedded file, PostgreSQL: :mod:`.store`).

    A backend provides ``where``, ``sessions``, ``last_session`` and ``calls``.
    """

    where: str

    def sessions(self) -> list[str]:
        raise NotImplementedError

    def last_session(self) -> str | None:
        raise NotImplementedError

    def calls(self, session_id: str) -> list[CallRecord]:
        raise NotImplementedError

    def totals(self, session_id: str) -> SessionTotals:
        """One session summed over its calls."""
        return summarize(session_id, self.calls(session_id))

    def resolve(self, session_id: str | None) -> str | None:
        """``session_id`` if recorded (UsageError listing the known ids if not); else the last session."""
        if session_id is None:
            return self.last_session()
        known = self.sessions()
        if session_id in known:
            return session_id
        if not known:
            raise UsageError(f'unknown session "{session_id}": no calls recorded yet in {self.where}')
        shown = known[-10:]
        more = f" (and {len(known) - len(shown)} older)" if len(known) > len(shown) else ""
        raise UsageError(
            f'unknown session "{session_id}"; known sessions: {", ".join(shown)}{more}; '
            "pass one of them to --session"
        )


class Ledger(LedgerReads):
    """The ledger file; safe to share between threads, and between processes through SQLite locking."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.where = str(self.path)
        self._lock = threading.Lock()
        self._db = open_private_db(self.path, _STEPS, _SCHEMA_VERSION)
        self._db.row_factory = sqlite3.Row

    @classmethod
    def default(cls) -> Ledger:
        """The ledger in the data dir (``$LIGHTMEM2_HOME/ledger.sqlite3`` when that is set)."""
        return cls(Home.default().ledger_file)

    def close(self) -> None:
        """Close the connection (the data is already committed)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record_call(self, rec: CallRecord) -> None:
        """Store one call in one transaction; recording the same (session, writer, call index) again
        replaces it (the row written before the response, then with the provider's usage)."""
        marks = ", ".join("?" for _ in _COLUMNS)
        sql = f"INSERT OR REPLACE INTO calls ({', '.join(_COLUMNS)}) VALUES ({marks})"
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(sql, _row(_redacted(rec)))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def forget(self, session_id: str) -> int:
        """Delete every row of ``session_id``; returns how many there were."""
        with self._lock:
            cur = self._db.execute("DELETE FROM calls WHERE session_id = ?", (session_id,))
        return int(cur.rowcount)

    def sessions(self) -> list[str]:
        """Session ids, in the order their first call was recorded."""
        with self._lock:
            rows = self._db.execute(
                "SELECT session_id FROM calls GROUP BY session_id ORDER BY MIN(seq)"
            ).fetchall()
        return [r[0] for r in rows]

    def last_session(self) -> str | None:
        """The session of the most recently recorded call, None when the ledger is empty."""
        with self._lock:
            row = self._db.execute("SELECT session_id FROM calls ORDER BY seq DESC LIMIT 1").fetchone()
        return None if row is None else str(row[0])

    def calls(self, session_id: str) -> list[CallRecord]:
        """The calls of one session, by call index (empty for an unknown session)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM calls WHERE session_id = ? ORDER BY call_index, seq", (session_id,)
            ).fetchall()
        return [_record(r) for r in rows]

    def recent_calls(self, limit: int = 200) -> list[CallRecord]:
        """The last ``limit`` calls recorded, across sessions, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM calls ORDER BY seq DESC LIMIT ?", (limit,)).fetchall()
        return [_record(r) for r in reversed(rows)]
