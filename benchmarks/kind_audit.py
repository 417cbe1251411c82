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

from lightmem_plugin import retention
from lightmem_plugin.reduction.kinds import ToolCall, classify
from lightmem_plugin.replay import replay_paths

sys.path.insert(0, str(Path(__file__).resolve().parent))
from frame_audit import MODES, run_audit

ChatMessage = dict[str, Any]


def source_of(prompt: Sequence[ChatMessage], span: str) -> tuple[str, ToolCall | None] | None:
    """The newest tool output of ``prompt`` that holds ``span`` (what the agent read last), with the
    call that produced it; None when the host no longer sends it (compacted away)."""
    for pos in range(len(prompt) - 1, -1, -1):
        message = prompt[pos]
        if message.get("role") != "tool":
            continue
        text = retention.message_text(message)
        if span not in text:
            continue
        cid = message.get("tool_call_id")
        for earlier in prompt[pos - 1 :: -1] if pos else ():
            for call in earlier.get("tool_calls") or ():
                if call.get("id") == cid:
                    fn = call.get("function", {})
                    return text, ToolCall(str(fn.get("name", "")), str(fn.get("arguments", "")))
        return text, None
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
    ) -> list[retention.Use]:
        found = judge(self, original, transformed, output)
        for use in found:
            source = source_of(original, use.span)
            if source is None:
                continue
            kind = classify(*source)
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
