"""The one fail-open guard and the one error sink that every surface reports into (DESIGN I5).

Why one sink: lightmem2 runs as several processes (``serve`` with its proxy and sidecar routes, a hook
process per host event, an MCP server per host), and each of them must pass the host's payload through
when something of ours fails. A failure that is only counted in the memory of a process that then exits
is invisible: ``doctor`` said "pass errors: none" after a pass raised inside a hook. So every guarded
step writes one row at once into ``faults.sqlite3`` (0600, beside the ledger), naming the *surface*
(where it ran: ``proxy``, ``sidecar``, ``hook``, ``mcp``, ``python``) and the *step* (the pass or stage:
``reduction``, ``codec``, ``eviction``, ...), and ``status`` and ``doctor`` read it from there.

Which surface a failure belongs to is set by the entry point with :func:`on_surface` (a context variable,
so a pass deep in the pipeline needs no extra argument and threads started with the context inherit it).
Messages are redacted and bounded before they are stored: an exception may quote its input.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from .errors import PassError
from .store.home import Home
from .store.sqlite_store import open_private_db

if TYPE_CHECKING:
    from .security.redaction import Redactor

T = TypeVar("T")
SURFACES = ("python", "proxy", "sidecar", "hook", "mcp")
"""Where lightmem2 code runs: the Python API, the proxy and sidecar routes of serve, host hooks, MCP."""
KEEP_ROWS = 2000
MESSAGE_CHARS = 300
_VERSION = 1
_CREATE = (
    "CREATE TABLE IF NOT EXISTS faults (seq INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, "
    "surface TEXT NOT NULL, step TEXT NOT NULL, session_id TEXT, error TEXT NOT NULL);\n"
)
_surface: contextvars.ContextVar[str] = contextvars.ContextVar("lightmem2_surface", default="python")


@contextmanager
def on_surface(name: str) -> Iterator[None]:
    """Attribute failures inside the block to surface ``name`` (one of :data:`SURFACES`)."""
    if name not in SURFACES:
        raise ValueError(f"unknown surface {name!r}; use one of {', '.join(SURFACES)}")
    token = _surface.set(name)
    try:
        yield
    finally:
        _surface.reset(token)


def current_surface() -> str:
    """The surface failures are attributed to right now."""
    return _surface.get()


def describe(err: BaseException) -> str:
    """``Type: message``, redacted and cut to :data:`MESSAGE_CHARS` (what the sink stores)."""
    return _redactor().redact(f"{type(err).__name__}: {err}")[:MESSAGE_CHARS]


@functools.cache
def _redactor() -> Redactor:
    """The built-in rules, compiled once (measured: ~9 ms per failure when built per call, so a stream
    of bodies the codec refuses cost the proxy more in compiling regexes than in everything else)."""
    from .security.redaction import Redactor

    return Redactor()


@dataclass(frozen=True)
class Fault:
    """One (surface, step) with how often it failed and its latest failure."""

    surface: str
    step: str
    count: int
    last_error: str
    last_session: str | None
    last_at: float

    @property
    def where(self) -> str:
        """``surface/step``, as status and doctor print it."""
        return f"{self.surface}/{self.step}"


class FaultSink:
    """The errors table of one data dir; every write is its own transaction, readable at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = open_private_db(path, _CREATE, _VERSION)
        self._lock = threading.Lock()

    @classmethod
    def default(cls) -> FaultSink:
        """The sink in the lightmem2 data dir."""
        return cls(Home.default().faults_file)

    def record(
        self, step: str, error: str, session_id: str | None = None, surface: str | None = None
    ) -> None:
        """Store one failure (the surface defaults to the current one); keeps the newest rows only."""
        with self._lock:
            cur = self._db.execute(
                "INSERT INTO faults (at, surface, step, session_id, error) VALUES (?, ?, ?, ?, ?)",
                (time.time(), surface or current_surface(), step, session_id, error[:MESSAGE_CHARS]),
            )
            seq = cur.lastrowid or 0
            if seq % 100 == 0:
                self._db.execute("DELETE FROM faults WHERE seq <= ?", (seq - KEEP_ROWS,))

    def summary(self) -> list[Fault]:
        """Each (surface, step) that failed, newest failure first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT f.surface, f.step, c.n, f.error, f.session_id, f.at FROM faults f JOIN "
                "(SELECT surface, step, COUNT(*) AS n, MAX(seq) AS last FROM faults GROUP BY surface, step) c "
                "ON f.seq = c.last ORDER BY f.seq DESC"
            ).fetchall()
        return [Fault(str(s), str(p), int(n), str(e), sid, float(at)) for s, p, n, e, sid, at in rows]

    def latest(self, session_id: str | None = None) -> Fault | None:
        """The newest failure (of one session when ``session_id`` is given)."""
        where, args = ("WHERE session_id = ?", (session_id,)) if session_id else ("", ())
        with self._lock:
            row = self._db.execute(
                f"SELECT surface, step, error, session_id, at FROM faults {where} ORDER BY seq DESC LIMIT 1",
                args,
            ).fetchone()
        return None if row is None else Fault(str(row[0]), str(row[1]), 1, str(row[2]), row[3], float(row[4]))

    def clear(self) -> None:
        """Forget every recorded failure (``doctor --fix`` after the cause is fixed)."""
        with self._lock:
            self._db.execute("DELETE FROM faults")

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()


def open_sink() -> FaultSink | None:
    """The default sink, or None when the data dir cannot hold it (the failure is then only counted)."""
    try:
        return FaultSink.default()
    except (OSError, sqlite3.Error):
        return None


def report(
    sink: FaultSink | None,
    step: str,
    err: BaseException,
    session_id: str | None = None,
    surface: str | None = None,
) -> None:
    """Write ``err`` to ``sink``; never raises (reporting must not be what breaks the host)."""
    if sink is None:
        return
    with contextlib.suppress(Exception):  # a full or read-only disk: the in-memory counters still show it
        sink.record(step, describe(err), session_id, surface)


def tool_failure(tool: str, err: BaseException) -> str:
    """The one line the model reads when an agent tool failed unexpectedly (the fault is reported)."""
    return f"lightmem2: {tool} failed ({describe(err)}); the user can run `lightmem2 doctor`"


class Caught:
    """What :func:`guard` caught: ``error`` stays None when the block ran through."""

    error: BaseException | None = None


ErrorHook = Callable[[str, BaseException], None]


@contextmanager
def guard(
    step: str,
    sink: FaultSink | Callable[[], FaultSink | None] | None = None,
    *,
    session_id: str | None = None,
    surface: str | None = None,
    on_error: ErrorHook | None = None,
    catch: type[BaseException] = Exception,
    answers: tuple[type[BaseException], ...] = (),
) -> Iterator[Caught]:
    """The fail-open guard every surface runs its risky steps in (DESIGN I5).

    A failure inside the block is handed to ``on_error`` (a session's counters), written to ``sink``
    under ``step`` and swallowed; the caller reads ``caught.error`` and takes its fallback (the host's
    own bytes, an empty answer, an error the model reads). Why one guard: the proxy, the sidecar, the
    hooks and the MCP server each had their own ``except Exception`` blocks, and some failures reached
    neither ``status`` nor ``doctor``. ``catch`` widens it to ``BaseException`` where even an exit must
    not reach the host (a hook's worker thread); cancellation and interrupts pass through otherwise.
    ``answers`` are exceptions that are the surface's answer, not a fault (an MCP tool's error for the
    model): they pass through unreported. ``sink`` may be a function that opens it, called only when
    something failed (a hook or MCP process opens no database on the path that works).
    """
    caught = Caught()
    try:
        yield caught
    except answers:
        raise
    except catch as err:  # fail-open by design: the host must never break because of us
        caught.error = err
        if on_error is not None:
            with contextlib.suppress(Exception):  # counting must not be what breaks the host
                on_error(step, err)
        with contextlib.suppress(Exception):  # a sink that cannot open: the failure is only counted
            report(sink() if callable(sink) else sink, step, err, session_id, surface)


def safecall(
    step: str,
    fn: Callable[[], T],
    fallback: T,
    sink: FaultSink | None,
    session_id: str | None = None,
    on_error: ErrorHook | None = None,
) -> T:
    """``fn()``, or ``fallback`` when it raised: the failure goes to ``sink`` (and ``on_error``)."""
    with guard(step, sink, session_id=session_id, on_error=on_error):
        return fn()
    return fallback


@dataclass
class PassFailure:
    """The last failure of a pass, for ``doctor``."""

    name: str
    error: str


class FailOpen:
    """A session's view of the fail-open guard: per-step counters for its ledger rows, and the sink.

    Every failure is counted here (the ledger row of the call says which steps failed) and written to
    the plugin's :class:`~.faults.FaultSink` at once, with the surface it ran on, for status and doctor.
    """

    def __init__(self, sink: FaultSink | None = None, session_id: str | None = None) -> None:
        self.errors: Counter[str] = Counter()
        self.last: PassFailure | None = None
        self.sink = sink
        self.session_id = session_id

    def run(self, name: str, fn: Callable[[], T], fallback: T) -> T:
        """``fn()``, or ``fallback`` if it raised (the error is counted under ``name`` and reported)."""
        with guard(name, on_error=self.report):
            return fn()
        return fallback

    def _count(self, name: str, err: BaseException) -> None:
        self.errors[name] += 1
        self.last = PassFailure(name, describe(err))

    def report(self, name: str, err: BaseException) -> None:
        """Count and report a failure that the caller handled; a pass failure names its pass as the
        step (``reduction/html``) in the sink, while the ledger row counts it under ``name``."""
        self._count(name, err)
        step = f"{name}/{err.pass_name}" if isinstance(err, PassError) and err.pass_name else name
        report(self.sink, step, err, self.session_id)
