"""Answering a host's hook: ``lightmem2 hook claude-code|codex EVENT`` (and ``python -m
lightmem_plugin.hooks``) reads the host's hook JSON on stdin, runs the host's handler (its ``hooks``
module, :mod:`lightmem_plugin.hooks`) and answers with hook JSON on stdout.

Events (both hosts use the same JSON shapes for these three):

==================  ============================================================================
``PostToolUse``      reduce a large tool output once, as it enters the history (the original is
                     archived; the stub names its key)
``UserPromptSubmit`` answer ``/lightmem2 ...`` locally, with no model call
``SessionStart``     make sure ``lightmem2 serve`` is running (started detached when it is not);
                     remember the host's transcript path for ``report``/``replay``; after the
                     host compacted, answer the session record and how to search the archive
``PreCompact``       (Claude Code) archive what the compaction will summarise away, for search
==================  ============================================================================

Why the watchdog: a hook sits in the host's critical path. Whatever goes wrong on our side (a crash,
unreadable stdin, a slow disk, a stdin that never closes) the host must go on with the original tool
output, so every failure, and anything that runs past the budget, ends as exit code 0 with nothing
printed (DESIGN I5). Errors go to one line in ``hooks.log`` in the data dir, never to the host.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, NoReturn

from ..faults import guard, on_surface, open_sink, report
from ..hookspec import EVENTS
from ..store.home import Home
from . import get

if TYPE_CHECKING:
    from ..hookspec import Handler, LineRunner

__all__ = ["EVENTS", "budget_s", "exit_with", "main", "run", "run_stream"]

DEFAULT_BUDGET_S = {"SessionStart": 8.0, "PostToolUse": 5.0, "UserPromptSubmit": 5.0, "PreCompact": 45.0}
BUDGET_ENV = "LIGHTMEM2_HOOK_BUDGET_S"
LOG_MAX_BYTES = 256 * 1024


def budget_s(event: str) -> float:
    """Seconds a hook may take before we give up and let the host go on (env override for tests)."""
    raw = os.environ.get(BUDGET_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_BUDGET_S.get(event, 5.0)
    except ValueError:
        value = DEFAULT_BUDGET_S.get(event, 5.0)
    return max(0.01, value)


def _handler(host: str) -> Handler | None:
    """The host's hook handler, from the registry."""
    found = get(host)
    return None if found is None else found.handle


def _log(host: str, event: str, what: str) -> None:
    """One line in ``<data dir>/hooks.log`` (best effort, bounded; the host never sees it)."""
    try:
        path = Home.default().hooks_log
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
            path.replace(path.with_suffix(".log.1"))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(f"{host} {event}: {what[:300]}\n")
    except Exception:  # logging must never be the reason a hook fails
        pass


def _answer(host: str, event: str, stdin_text: str, run_line: LineRunner | None) -> str:
    handler = _handler(host)
    if handler is None or event not in EVENTS:
        return ""
    payload = json.loads(stdin_text) if stdin_text.strip() else {}
    if not isinstance(payload, dict):
        return ""
    out = handler(event, payload, run_line)
    return json.dumps(out, ensure_ascii=False) if out else ""


def _guarded(host: str, event: str, work: Callable[[], str], budget: float | None) -> tuple[str, int]:
    """``work()`` in a daemon thread: its text, or "" when it raised or ran past the budget."""
    box: list[str] = []

    def logged(step: str, err: BaseException) -> None:
        _log(host, event, f"{type(err).__name__}: {err}")
        report(open_sink(), step, err)  # opened only when something failed

    def target() -> None:
        # fail-open (I5): whatever the handler raises, an exit included, the host goes on with the original
        with on_surface("hook"), guard(f"{host} {event}", on_error=logged, catch=BaseException):
            box.append(work())

    thread = threading.Thread(target=target, name=f"lightmem2-hook-{event}", daemon=True)
    thread.start()
    thread.join(budget_s(event) if budget is None else budget)
    if thread.is_alive():
        _log(host, event, "timed out; the host continues with the original")
        late = TimeoutError(f"no answer within the {event} budget")
        report(open_sink(), f"{host} {event}", late, surface="hook")
        return "", 0
    return (box[0] if box else ""), 0


def run(
    host: str, event: str, stdin_text: str, budget: float | None = None, run_line: LineRunner | None = None
) -> tuple[str, int]:
    """The hook's stdout text and exit code (always 0) for one host hook call; ``run_line`` answers
    ``/lightmem2 ...`` prompts (without it they say the command table is not wired in)."""
    return _guarded(host, event, lambda: _answer(host, event, stdin_text, run_line), budget)


def run_stream(
    host: str, event: str, stream: IO[bytes], budget: float | None = None, run_line: LineRunner | None = None
) -> tuple[str, int]:
    """Like :func:`run`, reading stdin inside the watchdog (a stdin that never closes is a timeout)."""

    def work() -> str:
        return _answer(host, event, stream.read().decode("utf-8", "surrogateescape"), run_line)

    return _guarded(host, event, work, budget)


def main(argv: list[str] | None = None, run_line: LineRunner | None = None) -> int:
    """``python -m lightmem_plugin.hooks HOST EVENT``: the same as ``lightmem2 hook HOST EVENT``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        return 0  # a miswired hook must not block the host either
    text, code = run_stream(args[0], args[1], sys.stdin.buffer, run_line=run_line)
    if text:
        try:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
        except Exception:
            return 0
    return code


def exit_with(host: str, event: str, run_line: LineRunner | None = None) -> NoReturn:
    """Run the hook on this process's stdin/stdout and end the process with exit code 0.

    Why ``os._exit``: after a timeout the reader thread may still block on stdin, and a normal
    interpreter shutdown can abort on the lock that thread holds; the answer is flushed first.
    """
    code = main([host, event], run_line)
    try:
        sys.stdout.flush()
    finally:
        os._exit(code)
