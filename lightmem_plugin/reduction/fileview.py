"""File views: what the agent asked to see stays in view; a long one is cut by its structure.

Why: on the dev traces, 8.2% of the lines of file views above the normal trigger were later quoted or
edited by the agent (a heredoc rewrite, a ``sed -i`` pattern, the next range it printed), and 83% of
those sat in the middle of the view, where head + tail truncation cut them (the issue's example: a
4 KB config file whose middle held the very lines the task asked to remove). So a view up to
``fileViewChars`` is kept whole. A longer one keeps its outline, the definitions (class, def,
function signatures, decorators) and the imports, then its head and tail under the same budget,
each elided region behind a line-range marker that recovers it, never a blind cut in the middle of
the code. Error lines in a view (a script that ran after the ``cat``) stay too.

A subagent's report (kind ``report``) is read the same way: another agent wrote it for this one, so
it is what this agent asked to see. So are the prints of a script the agent ran (kind ``script``,
``python check_fix.py``): it wrote the script to print them. Cut by head + tail, they were the kind
the agent most often used out of view: on the swe traces 45 of 653 later uses of such outputs in
aggressive mode (18 in normal), e.g. the numbered lines of the module a script printed, used by the
very next edit; the ``Test 3: ...`` headers of a check script. Kept whole, none of the 667 is out
of view in aggressive mode, for 0.8% more K charged (normal: 0.6%). Also when they read as a log:
a check script printing each case's command, exit code and traceback lost its ``Test 2:`` header
and ``Exit code:`` line to the log pass (the same K: the traceback lines it keeps are most of such
an output).

A listing (``ls -la``, ``find ... | head -30``, a ``Glob``) too: the agent acts on the names in it,
and head + tail cut the middle, where an alphabetical listing has the package directory. The
retention measure cannot see such uses (a name is shorter than a quoted span), so they were counted
by name: of the 18 listings on the swe traces that aggressive mode cut, 16 had an elided entry named
by a later call of the agent (``django``, ``astroid``; 8 test directories from ``ls -la tests/``).
Kept whole: K charged +0.3% (normal) and +0.65% (aggressive) on swe, +0.05% on claude-code.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from . import truncate
from .spec import PassSpec
from .work import MARK_COST, Piece, Work, unchanged, with_protected

if TYPE_CHECKING:
    from .base import PassContext

WHAT = "chars of file view (outline, head and tail shown)"
OTHER_WHAT = {
    "script": "chars of script output (head and tail shown)",
    "listing": "chars of listing (head and tail shown)",
}
"""The labels of a cut of the kinds that are no file (a file view's and a report's: :data:`WHAT`)."""
_NUMBER = r"(?:\s*\d+(?:\t| {1,3}|→))?"  # `cat -n` / Read numbering
_DEFINITION = re.compile(
    _NUMBER + r"\s*(?:@\w|(?:async\s+)?def\s|(?:export\s+(?:default\s+)?)?(?:abstract\s+)?class\s"
    r"|(?:export\s+(?:default\s+)?)?(?:async\s+)?function\b|func\s|fun\s"
    r"|(?:export\s+)?(?:const|let)\s+\w+\s*=\s*(?:async\s+)?(?:\([^()\n]*\)|\w+)\s*(?::\s*[^=\n]+)?=>"
    r"|(?:pub(?:\([\w:]+\))?\s+)?(?:async\s+)?fn\s"
    r"|(?:public|private|protected|static)\s[\w<>\[\], ]*\(|(?:export\s+)?(?:interface|enum)\s"
    r"|(?:export\s+)?type\s+\w+(?:<[^>\n]*>)?\s*=|struct\s|impl\s|module\s"
    r"|def(?:p|macrop?|module|impl|protocol|delegate|guard)\s|(?:test|describe)\s+\"|(?:test|describe|it)\(\s*[\"'`])"
)
"""A definition's first line. JavaScript's and TypeScript's as they are written in modules:
``export class``, ``export default function``, ``export const handler = async (req) =>``,
``export interface``/``type``/``enum``, and a test's ``describe("..."``/``it("..."``. Elixir's too (``defp``, ``defmodule``, ``test "..."``): on a Claude Code
trace a 30 KB LiveView module was cut to its ``def``s, and two Edits took their old_string from the
``defp`` heads that were hidden (the only Edits of 77 whose lines vanilla showed and the cut hid)."""
_IMPORT = re.compile(_NUMBER + r"\s*(?:import\s|from\s+\S+\s+import\s|#include\s|use\s|require\()")
S_DEFINITION = 5
S_IMPORT = 3
S_OTHER = 2


def score_lines(lines: list[str]) -> list[int]:
    """Definitions first, then imports, then everything else (nearer the ends first)."""
    return [
        S_DEFINITION if _DEFINITION.match(line) else S_IMPORT if _IMPORT.match(line) else S_OTHER
        for line in lines
    ]


def select(work: Work, ctx: PassContext) -> list[Piece] | None:
    """The whole view when it fits ``fileViewChars``, else its outline, head and tail."""
    if work.origin is None:
        return None
    table = ctx.table
    if work.chars() <= table.fileViewChars:
        return unchanged(work)
    lengths = [len(line) for line in work.lines]
    keep = truncate.select_by_score(lengths, score_lines(work.lines), table.fileViewChars, MARK_COST, True)
    return with_protected(work, keep, OTHER_WHAT.get(work.kind, WHAT), table.keepErrorLines)


PASS = PassSpec(
    "fileview",
    "select",
    False,
    "a file view stays whole, or keeps its outline, head and tail",
    select,
    WHAT,
    kinds=("file_view", "report", "script", "listing"),
    also=tuple(OTHER_WHAT.values()),
)
