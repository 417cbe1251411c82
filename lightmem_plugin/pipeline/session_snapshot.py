"""A session's decisions as the session store keeps them, and back: the one place that knows the fields.

What a session decided over time, that the next request depends on (DESIGN 3, "restarts change
nothing"): the reduced form of each output under the mode in force when it arrived (``memo``,
``images``), which outputs were repeats and of what (``dedup_*``, ``lines``, the repeat scope), the
stabilizer's placeholders, the eviction decisions with the task and goal registries behind them, the
call count, the last session record rendered and when the provider's cache was last used (a pause
after the session left memory still makes its next call cold). :func:`snapshot` turns them into the store's
insert-only maps and documents; :func:`restore` sets them on a fresh session, all or nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Protocol

from ..config import StabilizerConfig
from ..eviction.evictor import Evictor
from ..eviction.lifecycle import TaskRegistry
from ..eviction.state import EvictionState
from ..prefix.stabilizer import Stabilizer
from ..reduction.dedup import Repeats
from ..store.session_state import STATE_VERSION, StoredSession


class Decisions(Protocol):
    """What of a session is its decisions (a :class:`~.pipeline.Session` is one)."""

    memo: dict[str, str | None]
    image_memo: dict[str, tuple[str, str] | None]
    repeats: Repeats
    stabilizer: Stabilizer
    evictor: Evictor
    calls: int
    last_record_renders: dict[str, str]
    cache_used_at: float | None


def restore(session: Decisions, loaded: StoredSession, stabilizer_config: StabilizerConfig) -> None:
    """Set every decision of ``session`` from ``loaded``; raises (changing nothing) when any part is
    malformed or was saved under another :data:`~.store.session_state.STATE_VERSION`."""
    core, maps = loaded.blobs.get("core") or {}, loaded.maps
    if core.get("version") != STATE_VERSION:
        raise ValueError(f"session state version {core.get('version')!r}, expected {STATE_VERSION}")
    stabilizer = Stabilizer.from_state(stabilizer_config, loaded.blobs["stabilizer"])
    state = EvictionState.from_dict(loaded.blobs.get("eviction") or {})
    tasks = TaskRegistry.from_dict(loaded.blobs["tasks"]) if "tasks" in loaded.blobs else TaskRegistry()
    goals = TaskRegistry.from_dict(loaded.blobs["goals"]) if "goals" in loaded.blobs else TaskRegistry()
    images = {k: (str(v[0]), str(v[1])) if v else None for k, v in maps["images"].items()}
    repeats = {str(k): int(v) for k, v in maps["dedup_repeats"].items()}
    counts: dict[str, int] = {}
    for slot, n in repeats.items():
        digest = slot.split(":", 1)[0]
        counts[digest] = max(counts.get(digest, 0), n)
    # nothing above raised: adopt it all at once
    session.memo = {str(k): (None if v is None else str(v)) for k, v in maps["memo"].items()}
    session.image_memo = images
    outputs = session.repeats.outputs
    outputs.first = {str(k): str(v) for k, v in maps["dedup_first"].items()}
    outputs.repeats, outputs.counts = repeats, counts
    outputs.replay({str(k): str(v) for k, v in maps["dedup_spellings"].items()})
    session.repeats.lines.seen = {
        int(k): None if v is None else sys.intern(str(v)) for k, v in maps["lines"].items()
    }
    session.stabilizer = stabilizer
    session.evictor.state, session.evictor.tasks, session.evictor.goals = state, tasks, goals
    session.calls = max(session.calls, int(core.get("calls", 0)))
    session.repeats.scope = int(core.get("scope", 0))
    session.last_record_renders = {str(k): str(v) for k, v in (core.get("record") or {}).items()}
    used = core.get("cacheUsedAt")  # a time drives the cold-cache decision only, never model text
    session.cache_used_at = float(used) if isinstance(used, (int, float)) else session.cache_used_at


def snapshot(session: Decisions, with_eviction: bool) -> tuple[dict[str, Mapping[Any, Any]], dict[str, Any]]:
    """The session's maps and documents for :meth:`~.store.session_state.Journal.save` (which writes only
    what changed); ``with_eviction``: the eviction documents too (they change only at decisions)."""
    ev = session.evictor
    blobs: dict[str, Any] = {
        "core": {
            "version": STATE_VERSION,
            "calls": session.calls,
            "record": session.last_record_renders,
            "scope": session.repeats.scope,
            "cacheUsedAt": session.cache_used_at,
        },
        "stabilizer": session.stabilizer.state_dict(),
    }
    if with_eviction:
        blobs["eviction"] = ev.state.to_dict()
        if ev.tasks.chunks or ev.tasks.rejected:
            blobs["tasks"] = ev.tasks.to_dict()
        if ev.goals.chunks or ev.goals.rejected:
            blobs["goals"] = ev.goals.to_dict()
    outputs = session.repeats.outputs
    maps: dict[str, Mapping[Any, Any]] = {
        "memo": session.memo,
        "images": session.image_memo,
        "dedup_first": outputs.first,
        "dedup_repeats": outputs.repeats,
        "dedup_spellings": outputs.spellings,
        "lines": session.repeats.lines.seen,
    }
    return maps, blobs
