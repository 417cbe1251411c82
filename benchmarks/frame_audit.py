"""What the model reads of how each command ended and what failed: an audit of replayed sessions.

For every tool output in the last prompt of each replayed session, compared with the host's output:

- ``status_hidden``: outputs that open with a status line
  (:func:`lightmem_plugin.reduction.error_lines.is_status_line`: mini-swe-agent's ``<returncode>N</returncode>``,
  ``Exit code N``...) whose form the model reads does not open with it;
- ``errors_hidden``: outputs whose form the model reads lacks one of the output's error lines
  (:mod:`lightmem_plugin.reduction.error_lines`);
- ``matches_hidden``: search outputs (``grep``, ``rg``...) whose form the model reads lacks one of
  the lines the search's pattern matches (:mod:`lightmem_plugin.reduction.search_terms`).

And of the in-place markers that stand for lines shown before
(:func:`lightmem_plugin.reduction.linedup.marker`):

- ``repeat_markers``: all of them; ``repeats_unnamed``: those that name no tool call ("as shown in an
  earlier output");
- ``repeats_misnamed``: those whose named calls' outputs, as the same prompt shows them, lack one of
  the lines the marker stands for, or that name their own call or no call of the
  prompt. ``repeats_source_archived``: those whose named call's output was since replaced whole
  (an eviction stub: the lines are recoverable from it, not readable).

``changed_outside_stubs`` is the replay's own count of shown lines that are no line of the original
(:mod:`lightmem_plugin.measure.fidelity`): a frame's closing tag merged onto the last line shows there.

Outputs replaced whole are counted apart (``whole``): a reference to an identical earlier output
(inside the host's frame, which stays), or an eviction stub (aggressive mode). Those name where the
text is and say so.

Run: ``.venv/bin/python benchmarks/frame_audit.py --traces ../shared/traces/swe --mode normal``.
Measured on the swe traces in normal mode at 238e9c2: 484 outputs with the status hidden, 88 with
error lines hidden and 77 of 1,229 searches with a match hidden; now 0, 0 and 0. At 94bae6e every
repeat marker named no call (700 of 700); now each of the 697 names the calls whose outputs show its
lines (445 one call, 161 two, 91 three), none misnamed. In aggressive mode 8 of 661 named a call whose
output an eviction batch archived since (its lines recoverable from it, and from the marker's own
stub), and on the Claude Code sessions 2; at 7704ff5 0 and 0 (an output a later repeat refers to
stays, and a repeat of a paged-out output is shown as it is). Every line a marker stands for is checked, short ones too: at 45bd78e, 11 of 707 markers
(normal) stood for a short line (``        my_id,``, re-indented by the agent's fix) that the named
outputs showed differently; with short lines keyed by the line before them, 0 of 718.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from lightmem_plugin.measure.replay import replay_paths, trace_files
from lightmem_plugin.measure.retention import message_text
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.reduction import envelope
from lightmem_plugin.reduction.error_lines import error_lines, is_status_line
from lightmem_plugin.reduction.kinds import ToolCall
from lightmem_plugin.reduction.linedup import MARKER_RE, marker_calls
from lightmem_plugin.reduction.search_terms import search_patterns

MODES = ("conservative", "normal", "aggressive")
"""The modes that reduce: what an audit replays by default."""

WHOLE = ("[lightmem2: identical to ", "[lightmem2: output of finished work archived as ")


def _body(text: str) -> str:
    """The part of a tool output that the repeat stage reduced: inside the host's frame, if any."""
    bodies: list[str] = []
    envelope.apply(text, lambda body: bodies.append(body) or body)
    return bodies[0]


def audit_markers(before: str, after: str, own: str, shown: dict[str, str], counts: dict[str, int]) -> None:
    """Count the repeat markers of ``after`` (the output ``before`` of call ``own`` as the model reads
    it) into ``counts``; ``shown``: each call id of the prompt and its output as the prompt shows it."""
    body = _body(before).split("\n")
    for m in MARKER_RE.finditer(after):
        counts["repeat_markers"] += 1
        names = marker_calls(m)
        if not names:
            counts["repeats_unnamed"] += 1
            continue
        texts = [shown[name] for name in names if name in shown]
        if own in names or len(texts) < len(names):
            counts["repeats_misnamed"] += 1
            continue
        if any(line.startswith(WHOLE) for t in texts for line in t.split("\n")):
            counts["repeats_source_archived"] += 1
            continue
        lines = {line for t in texts for line in t.split("\n")}
        wanted = body[int(m.group(1)) - 1 : int(m.group(2))]
        if any(x not in lines for x in wanted):
            counts["repeats_misnamed"] += 1


def audit(paths: list[Path], mode: str) -> dict[str, int]:
    """The counts of the module docstring over the sessions under ``paths`` replayed in ``mode``."""
    counts = {"sessions": 0, "outputs": 0, "with_status": 0, "with_errors": 0, "whole": 0}
    counts |= {"searches": 0, "status_hidden": 0, "errors_hidden": 0, "matches_hidden": 0}
    counts |= {"repeat_markers": 0, "repeats_unnamed": 0, "repeats_misnamed": 0, "repeats_source_archived": 0}
    with tempfile.TemporaryDirectory(prefix="lightmem2-frame-audit-") as tmp:
        dumps = Path(tmp)
        results = replay_paths(paths, mode, dump_dir=dumps)
        counts["changed_outside_stubs"] = sum(r.lines_changed_outside_stubs for r in results)
        for path in trace_files(paths):
            trace = load_trace(path)
            dump = dumps / f"{trace.id}.jsonl"
            if not trace.calls or not dump.exists():
                continue
            with dump.open(encoding="utf-8") as f:
                last = json.loads(f.readlines()[-1])["messages"]
            prompt = trace.calls[-1].prompt
            calls = {
                c.get("id"): c.get("function", {})
                for m in prompt
                for c in m.get("tool_calls") or ()
                if isinstance(c, dict)
            }
            originals = [m for m in prompt if m.get("role") == "tool"]
            sent = [m for m in last if m.get("role") == "tool"]
            if len(originals) != len(sent):  # a finished task left as one message: outputs do not pair
                continue
            counts["sessions"] += 1
            shown_by = {str(m.get("tool_call_id")): message_text(m) for m in sent}
            for original, shown in zip(originals, sent, strict=True):
                before, after = message_text(original), message_text(shown)
                audit_markers(before, after, str(shown.get("tool_call_id")), shown_by, counts)
                counts["outputs"] += 1
                first = before.split("\n", 1)[0]
                status = first + "\n" if "\n" in before and is_status_line(first) else None
                errors = error_lines(before)
                counts["with_status"] += status is not None
                counts["with_errors"] += bool(errors)
                if any(line.startswith(WHOLE) for line in after.split("\n")):
                    counts["whole"] += 1
                    continue
                if status is not None and not after.startswith(status):
                    counts["status_hidden"] += 1
                lines = set(after.split("\n"))
                if any(line not in lines for line in errors):
                    counts["errors_hidden"] += 1
                fn = calls.get(original.get("tool_call_id"), {})
                call = ToolCall(str(fn.get("name", "")), str(fn.get("arguments", "")))
                patterns = search_patterns(call)
                if patterns:
                    counts["searches"] += 1
                    body = before.split("\n")
                    if any(line not in lines for line in body if any(p.search(line) for p in patterns)):
                        counts["matches_hidden"] += 1
    return counts


def run_audit(
    doc: str | None, run: Callable[[list[Path], str], object], modes: tuple[str, ...] = MODES
) -> int:
    """The command line of an audit over replayed sessions: ``--traces DIR --mode M``, JSON out."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--traces", default=str(Path(__file__).resolve().parents[2] / "shared" / "traces" / "swe")
    )
    ap.add_argument("--mode", default="normal", choices=modes)
    args = ap.parse_args()
    root = Path(args.traces)
    if not root.exists():
        print(f"no traces at {root}: pass --traces DIR (a directory of recorded sessions)", file=sys.stderr)
        return 2
    print(json.dumps(run([root], args.mode), indent=2))
    return 0


def main() -> int:
    return run_audit(__doc__, audit)


if __name__ == "__main__":
    raise SystemExit(main())
