"""Host envelopes around a command's output: the host's own header stays byte-exact, the body is reduced.

Why: a host wraps what a command printed in a few lines of its own that the model reads as the
tool's result: whether it succeeded, its exit code, wall time, a chunk id. Reducing the whole text
could cut or move them, and replacing the output in a host hook drops them (Codex 0.169 and 0.171
turn a PostToolUse replacement into a failed, header-less result), so the proxy reduces on the wire
and only the body. Four shapes, two from Codex's ``exec_command``:

- text: a few short header lines, then ``Output:`` on its own line, then the body::

      Chunk ID: c23dba
      Wall time: 0.0470 seconds
      Process exited with code 0
      Original token count: 1513
      Output:
      <body>

- code mode (the model's script called ``text(await tools.exec_command(...))``): one JSON object,
  ``{"chunk_id":...,"exit_code":0,...,"output":"<body>"}`` as JavaScript's ``JSON.stringify``
  wrote it. Only the ``output`` string is replaced, in place: every other byte stays as it was
  (numbers such as ``0.000005498`` would not survive a re-serialisation).

- the XML frame of mini-swe-agent's bash tool (and harnesses built like it)::

      <returncode>1</returncode>
      <output>
      <body></output>

  Measured on the swe traces before this frame was known (``benchmarks/frame_audit.py``): in
  normal mode 484 of 4,598 outputs reached the model without their ``<returncode>`` line, most of
  them folded into a ``[lightmem2 repeat: ...]`` marker with the lines around it, so a failed
  command could not be told from one that worked. Claude Code's ``TaskOutput`` (the output of a
  command it runs in the background) has the same shape with more tags, each line apart::

      <retrieval_status>success</retrieval_status>

      <task_id>b7636e2</task_id>

      <task_type>local_bash</task_type>

      <status>completed</status>

      <exit_code>0</exit_code>

      <output>
      <body>
      </output>

  Its six results in the dev Claude Code sessions were reduced as a whole and all fell to head +
  tail: the tags stayed only because a head is kept, and every one of them repeats the tag lines
  of the poll before (the repeat pass folds such runs into a marker). As a frame, the tags stay
  byte-exact and the body alone is read for its kind (three are ``mix test`` runs, now test runs:
  :func:`~.kinds.classify` reads a test summary closing the output).

- a status line on its own as the first line, then the body (Claude Code's failed ``Bash``:
  ``Exit code 2``, and any host that prints ``Process exited with code N`` first;
  :func:`~.reduction.error_lines.is_status_line`). Measured on the dev Claude Code sessions before this
  (``frame_audit.py``, normal mode): 2 of the 11 outputs with a status line reached the model with
  the test-run pass's stub above it, so the result no longer opened with how the command ended.

Inside any of them (or opening an output with no frame, as a code-mode script's printed text) may
come Codex's own notice that it cut the output in the middle before sending it (``codex-rs``
``formatted_truncate_text``; 0.169 and 0.171 print both lines, earlier versions only the second)::

      Warning: truncated output (original token count: 45057)
      Total output lines: 3000

      <head>…35057 tokens truncated…<tail>

The notice is the host's too: it stays byte-exact ahead of the body and is not read as part of it.
Reduced with the body before, a single-file ``grep -n`` (its match lines ``12:...`` name no file, so
the search pass reads every line as a non-match and keeps the first three and the last three) kept
the notice's two lines and its blank line in place of the first three matches.

One frame is left as it is: Claude Code's ``<persisted-output>``, what it sends in place of an
output too large for it (``Output too large (141KB). Full output saved to: PATH``, then ``Preview
(first 2KB):`` and 2 KB of it). The host cut it already and says where the rest is; a cut of ours
inside the preview (the one such output of the dev sessions lost 1,385 of its 2,250 chars in normal
mode) saved little and gave a second way back that returns the preview, not the output.

Anything else is reduced as a whole, as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from json.decoder import scanstring  # type: ignore[attr-defined]  # public, untyped in typeshed

from .error_lines import is_status_line
from .spec import PassSpec

_TEXT = re.compile(r"\A((?:[A-Z][^\n]{0,119}\n){1,8}Output:\n)")  # up to 8 short header lines
_JSON_MARKERS = ("exit_code", "chunk_id", "session_id")
_XML = re.compile(r"\A((?:<([a-z_]+)>[^<\n]{0,200}</\2>\n\n?){1,8}<output>\n)(.*)(</output>\n?)\Z", re.S)
"""One-line tags (``<returncode>1</returncode>``, ``<status>completed</status>``), then the body."""


_KEY = '"output":"'
_CODEX_CUT = re.compile(
    r"\A(?:Warning: truncated output \(original token count: \d+\)\n)?Total output lines: \d+\n\n"
)
"""Codex's notice that it cut the output in the middle (its two lines and a blank line)."""


def _past_notice(body: str, reduce: Callable[[str], str]) -> str:
    """``reduce`` applied to ``body`` after a Codex cut notice opening it; the notice kept as it is."""
    notice = _CODEX_CUT.match(body)
    if notice is None:
        return reduce(body)
    rest = body[notice.end() :]
    new = reduce(rest)
    return body if new == rest else notice.group(0) + new


def _json_frame(text: str) -> tuple[str, str, str] | None:
    """(bytes before the ``output`` string, its value, bytes after) of a Codex result object."""
    if not (text.startswith('{"') and text.endswith("}")) or _KEY not in text:
        return None
    try:
        obj = json.loads(text)
        start = text.rindex(_KEY) + len(_KEY) - 1  # at the opening quote; an escaped key cannot match
        body, end = scanstring(text, start + 1)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("output") != body or not any(k in obj for k in _JSON_MARKERS):
        return None
    return text[:start], body, text[end:]


_HOST_CUT = ("<persisted-output>", "</persisted-output>")


def apply(text: str, reduce: Callable[[str], str]) -> str:
    """``text`` with ``reduce`` applied to the body inside a known envelope, or to all of it."""
    if text.startswith(_HOST_CUT[0]) and text.rstrip().endswith(_HOST_CUT[1]):
        return text  # the host's own preview of an output it saved to a file

    def reduce_body(body: str) -> str:
        return _past_notice(body, reduce)

    head = _TEXT.match(text)
    if head is not None:
        body = text[head.end() :]
        new = reduce_body(body)
        return text if new == body else head.group(1) + new
    xml = _XML.match(text)
    if xml is not None:
        opening, _, body, closing = xml.groups()
        new = reduce_body(body)
        if new == body:
            return text
        if body.endswith("\n") and not new.endswith("\n"):  # the closing tag keeps its own line
            new += "\n"
        return opening + new + closing
    first, nl, body = text.partition("\n")
    if nl and body and is_status_line(first):
        new = reduce_body(body)
        return text if new == body else first + nl + new
    frame = _json_frame(text)
    if frame is not None:
        before, body, after = frame
        new = reduce_body(body)
        return text if new == body else before + json.dumps(new, ensure_ascii=False) + after
    return reduce_body(text)


PASS = PassSpec("envelope", "frame", True, "a host's header around the output stays byte-exact", apply)
