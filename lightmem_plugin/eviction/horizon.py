"""How many more calls a saving will be re-read for: the horizon of the eviction cost rule.

Why from the session and not a constant: the rule evicts ``X`` tokens when ``0.1 * X * remaining``
beats the one-time re-miss of what follows, so ``remaining`` decides everything. A constant 20 never
let a batch pay in sessions of 100-200 calls per task (the continuous-sessions issue). Two horizons:

- **Within a task** a saving lasts until the task ends (then the task leaves whole). The calls left
  in it are estimated from the tasks this session already finished (their median length) and, while
  there are none or the current task already ran longer, from the task's own age: a task that has
  run ``n`` calls is expected to run about ``n / 2`` more (half its age, a cautious Lindy estimate).
- **A finished task** leaves for the rest of the session, at least the current task's expected
  remainder and never less than one call.

``prior`` (``eviction.expectedRemainingCalls``) is the typical task length assumed before any task
finished. Pure functions: the same calls give the same horizon, across restarts.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median


def remaining_in_task(calls_in_task: int, finished_lengths: Sequence[int], prior: int) -> float:
    """Expected calls left in a task that has run ``calls_in_task`` calls so far."""
    typical = float(median(finished_lengths)) if finished_lengths else float(prior)
    return max(typical - calls_in_task, calls_in_task / 2, 1.0)


def remaining_in_session(calls_in_task: int, finished_lengths: Sequence[int], prior: int) -> float:
    """Expected calls left in the session: what a finished task's eviction is re-read for."""
    typical = float(median(finished_lengths)) if finished_lengths else float(prior)
    return max(remaining_in_task(calls_in_task, finished_lengths, prior), typical / 2, 1.0)
