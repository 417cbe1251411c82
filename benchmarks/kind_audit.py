"""Which kinds of output hold the lines the agent later used but no longer had in view: an audit.

For every later use of an earlier tool output in replayed sessions (the retention measure of
``../shared/traces/README.md``), the output it came from is classified like the reduction passes
classify it (:func:`lightmem_plugin.reduction.kinds.classify`, from the call and the content), and
the use is counted as kept when the prompt of the call that used it still held its whole lines
verbatim (``kept lines`` of ``make bench``). Per kind: ``uses`` and ``not_kept`` (only recoverable,
or lost). A kind with a high share not kept is one whose reduction hides what agents use from it.

Run: ``.venv/bin/python benchmarks/kind_audit.py --traces ../shared/traces/swe --mode normal``.
Measured on the swe traces, normal mode, at af20dc2: 35 of the 182 later uses of diffs were out of
view (19%; a diff was cut to ``capChars``, and one piped through ``tail`` was not read as a diff), and
4 of 289 of listings (``find | xargs grep`` results read as a listing); at 0d7889d 0 of 182, and
those results count as searches (0 of 1,662). In aggressive mode diffs went from 52 to 2 of 182. The
largest share left in normal is script prints (``other``, cut by head + tail): 18 of 653.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lightmem_plugin.measure import retention
from lightmem_plugin.measure.replay import replay_paths
from lightmem_plugin.reduction.kinds import ToolCall, classify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from frame_audit import MODES, run_audit

ChatMessage = dict[str, Any]


def call_of(prompt: Sequence[ChatMessage], pos: int) -> ToolCall | None:
    """The tool call whose result is the message at ``pos`` of ``prompt`` (None if none is found)."""
    cid = prompt[pos].get("tool_call_id")
    for message in reversed(prompt[:pos]):
        for call in message.get("tool_calls") or ():
            if call.get("id") == cid:
                fn = call.get("function", {})
                return ToolCall(str(fn.get("name", "")), str(fn.get("arguments", "")))
    return None


@contextmanager
def counting(uses: Counter[str], hidden: Counter[str]) -> Iterator[None]:
    """While inside, every use the retention measure judges is counted by the kind of its source."""
    judge = retention.RetentionTracker.add_call

    def add_call(
        self: retention.RetentionTracker,
        original: Sequence[ChatMessage],
        transformed: Sequence[ChatMessage],
        output: ChatMessage,
        host_prompt: Sequence[ChatMessage] | None = None,
    ) -> list[retention.Use]:
        found = judge(self, original, transformed, output, host_prompt)
        for use in found:
            if not 0 <= use.source < len(original):  # the host no longer sends it (compacted away)
                continue
            text = retention.message_text(original[use.source])
            kind = classify(text, call_of(original, use.source))
            uses[kind] += 1
            hidden[kind] += use.line_verdict != "kept"
        return found

    retention.RetentionTracker.add_call = add_call  # type: ignore[method-assign]
    try:
        yield
    finally:
        retention.RetentionTracker.add_call = judge  # type: ignore[method-assign]


def audit(paths: list[Path], mode: str) -> dict[str, dict[str, float]]:
    """Per output kind, over the sessions under ``paths`` replayed in ``mode``: uses, not kept, share."""
    uses: Counter[str] = Counter()
    hidden: Counter[str] = Counter()
    with counting(uses, hidden):
        replay_paths(paths, mode)
    return {
        kind: {"uses": uses[kind], "not_kept": hidden[kind], "share": round(hidden[kind] / uses[kind], 4)}
        for kind in sorted(uses, key=lambda k: (-hidden[k], k))
    }


def main() -> int:
    return run_audit(__doc__, audit, ("vanilla", *MODES))


if __name__ == "__main__":
    raise SystemExit(main())
