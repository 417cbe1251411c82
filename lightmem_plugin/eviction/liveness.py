"""Which tool outputs the agent no longer needs, and the evidence for each (incremental).

Why per output: eviction must only page out what later work made stale, and every such claim needs
evidence an estimator can cite. Each new event can only *kill* earlier ones, so the state grows
monotonically and one pass over new events is enough (O(new events x files they touch)). Signals:

- a read of F is stale once F is written later, or shown again in full;
- the same command run again supersedes the earlier output (a failure it fixes: "succeeded on re-run");
- the same output, or the same error line, appearing again makes the earlier copy redundant;
- a failing test is fixed by a later passing test; a failed install by a later successful one;
- a written file is verified by a later passing test or run;
- with ``probes="runs"`` (default) a run, search or ``git`` output is stale once a source edit followed
  it and a later run passed: the investigation it served concluded; ``probes="reads"`` extends this to
  reads of files nobody changed, after a second edit-and-pass cycle; ``probes="none"`` turns it off.
  Measured on ../shared/traces/swe (evictable share of tool-output chars / share of later uses of an
  output not found elsewhere in the prompt once its chunk is evictable): none 12% / 0.3%, runs 37% /
  1.8%, reads 73% / 5.0%;
- exploration (``ls``/``find``/``grep -r``) is consumed once a file it listed is read or written;
- a successful install is done once anything follows it.
"""

from __future__ import annotations

import posixpath
from typing import Literal

from .signals import ToolEvent

_MIN_REPEAT_CHARS = 80
Probes = Literal["none", "runs", "reads"]


class Liveness:
    """Dead events (seq -> first reason), failures fixed (seq -> fixing seq), files created."""

    def __init__(self, *, probes: Probes = "runs") -> None:
        self.probes = probes
        self.dead: dict[int, str] = {}
        self.fixed: dict[int, int] = {}
        self.created: dict[str, int] = {}
        self.touched: dict[str, int] = {}
        self._reads: dict[str, list[int]] = {}
        self._pending: dict[int, dict[str, None]] = {}
        self._writes: dict[str, list[int]] = {}
        self._by_norm: dict[int, list[int]] = {}
        self._by_hash: dict[int, int] = {}
        self._by_error: dict[str, int] = {}
        self._failed: list[int] = []
        self._explore: list[int] = []
        self._runs: list[int] = []
        self._stale: dict[int, int] = {}
        self._stale_runs: list[int] = []
        self._cooled: set[int] = set()
        self._edits: list[int] = []
        self._installs: list[int] = []
        self._events: list[ToolEvent] = []

    def _kill(self, seq: int, reason: str) -> None:
        if seq not in self.dead:
            self.dead[seq] = reason

    def _fix(self, seq: int, by: ToolEvent, reason: str) -> None:
        self.fixed.setdefault(seq, by.seq)
        self._kill(seq, reason)

    def add(self, e: ToolEvent, output: str, outputs: list[str]) -> None:
        """Take the next event (in order) and kill whatever it makes stale."""
        t = e.call_index
        self._events.append(e)
        for seq in self._installs:
            self._kill(seq, f"install done by turn {t}")
        self._installs.clear()
        self._reruns(e, t)
        if e.output_chars >= _MIN_REPEAT_CHARS:
            earlier = self._by_hash.get(e.output_hash)
            if earlier is not None:
                self._kill(earlier, f"same output again at turn {t}")
            self._by_hash[e.output_hash] = e.seq
        self._consume_exploration(e, t, outputs)
        self._read(e, t)
        self._write(e, t)
        self._outcome(e, t)
        if e.kind == "explore":
            self._explore.append(e.seq)
        if e.kind == "install" and not e.failed:
            self._installs.append(e.seq)
        elif e.kind != "write" and self.probes != "none" and (e.kind != "read" or self.probes == "reads"):
            self._runs.append(e.seq)

    def _reruns(self, e: ToolEvent, t: int) -> None:
        for seq in self._by_norm.get(e.norm, ()):
            if self._events[seq].failed and not e.failed:
                self._fix(seq, e, f"failed; same command succeeded at turn {t}")
            else:
                self._kill(seq, f"re-run at turn {t}")
        self._by_norm[e.norm] = [e.seq]

    def _consume_exploration(self, e: ToolEvent, t: int, outputs: list[str]) -> None:
        files = (*e.reads, *e.writes)
        if not files or not self._explore:
            return
        keep: list[int] = []
        for seq in self._explore:
            out = outputs[seq]
            hit = next((f for f in files if posixpath.basename(f) in out), None)
            if hit is None:
                keep.append(seq)
            else:
                self._kill(seq, f"results followed up: {hit} at turn {t}")
        self._explore = keep

    def _read(self, e: ToolEvent, t: int) -> None:
        for path in e.reads:
            self.touched.setdefault(path, e.seq)
            if path in e.writes:
                continue
            if path in e.full:
                for seq in self._reads.pop(path, []):
                    self._drop(seq, path, f"read of {path} superseded by full re-read at turn {t}")
            self._reads.setdefault(path, []).append(e.seq)
            self._pending.setdefault(e.seq, {})[path] = None

    def _drop(self, seq: int, path: str, reason: str) -> None:
        pending = self._pending.get(seq)
        if pending is None:
            return
        pending.pop(path, None)
        if not pending:
            del self._pending[seq]
            self._kill(seq, reason)

    def _write(self, e: ToolEvent, t: int) -> None:
        source_edit = False
        for path in (*e.writes, *e.deletes):
            if path not in self.touched and path in e.whole:
                self.created[path] = e.seq
            self.touched.setdefault(path, e.seq)
            for seq in self._reads.pop(path, []):
                if seq != e.seq:
                    self._drop(seq, path, f"read of {path} superseded by edit at turn {t}")
            for seq in self._writes.get(path, ()):
                self._kill(seq, f"edit of {path} superseded at turn {t}")
            self._writes[path] = [e.seq]
            source_edit = source_edit or path not in self.created
        if e.writes and e.kind == "write":  # a run that also writes keeps its output: run rules apply
            self._edits.append(e.seq)
        if source_edit:
            for seq in self._runs:
                self._stale[seq] = t
            self._stale_runs.extend(self._runs)
            self._runs = []

    def _outcome(self, e: ToolEvent, t: int) -> None:
        if e.failed:
            earlier = self._by_error.get(e.error_line)
            if earlier is not None and e.error_line:
                self._kill(earlier, f"same error again at turn {t}")
            self._by_error[e.error_line] = e.seq
            self._failed.append(e.seq)
            return
        live_failed: list[int] = []
        for seq in self._failed:
            kind = self._events[seq].kind
            if kind == e.kind and kind in ("test", "install"):
                self._fix(seq, e, f"{'tests pass' if kind == 'test' else 'install succeeded'} at turn {t}")
            elif seq not in self.fixed:
                live_failed.append(seq)
        self._failed = live_failed
        if e.kind not in ("test", "run"):
            return
        for seq in self._edits:
            if seq != e.seq:
                self._kill(seq, f"edit verified by passing run at turn {t}")
        self._edits = [e.seq] if e.seq in self._edits else []
        # reads of files nobody changed cool down for one more edit-and-pass cycle before they go
        cooling = [q for q in self._stale_runs if self._events[q].kind == "read" and q not in self._cooled]
        self._cooled.update(cooling)
        self._runs.extend(cooling)
        for seq in self._stale_runs:
            if seq in cooling:
                continue
            edited = self._stale[seq]
            self._kill(seq, f"investigation concluded: edit at turn {edited}, run passed at turn {t}")
        self._stale_runs = []
