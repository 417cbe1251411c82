"""Retention: whether a transformed history still holds what the agent went on to use.

Why a model-free measure: a reduction that saves tokens but removes what the agent needs later is a
loss, and replaying a session through a model to find out is slow and noisy. The recorded outputs
tell us what the agent used instead (``traces/README.md``, "Retention"):

- A **use** is a span of an earlier tool output that reappears in the output of a later call ``u``
  (its assistant text, or the string values of its tool-call arguments): a substring of 32+ chars,
  or a whole line of 16+ chars (compared without surrounding whitespace).
- Each use is judged by the transformed prompt of call ``u``: **kept** if that prompt contains the
  span verbatim, **recoverable** if a lightmem2 stub in it names an artifact whose content contains
  the span (``lookup(key)`` returns the archived text), **lost** otherwise.

Fast by construction: tool-output lines go in a set, and tool-output text is indexed by 17-char
windows at every 16th offset. Any common substring of 32+ chars contains one aligned window
(17 + 16 - 1 = 32), so scanning each window of the (short) call output finds every candidate; a hit
is then extended both ways to the longest shared span. Each tool output is indexed once, by hash.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import xxhash

from .reduction.base import stub_keys

MIN_LINE_CHARS = 16
MIN_SPAN_CHARS = 32
_STRIDE = 16
_WINDOW = MIN_SPAN_CHARS - _STRIDE + 1
_HITS_PER_WINDOW = 4
_SEP = "\n\x00\n"  # between texts of a prompt, so no span is found across two messages

Verdict = Literal["kept", "recoverable", "lost"]
Lookup = Callable[[str], str | None]
ChatMessage = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Use:
    """One use: the call whose output reused the span, the span, and how the prompt held it."""

    call: int
    span: str
    verdict: Verdict


@dataclass(frozen=True, slots=True)
class Retention:
    """Counts of uses by verdict; fractions are over all uses (a session without uses keeps 100%)."""

    uses: int
    kept: int
    recoverable: int
    lost: int

    @property
    def kept_fraction(self) -> float:
        return self.kept / self.uses if self.uses else 1.0

    @property
    def recoverable_fraction(self) -> float:
        return self.recoverable / self.uses if self.uses else 0.0

    @property
    def lost_fraction(self) -> float:
        return self.lost / self.uses if self.uses else 0.0


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    return ""


def _leaves(value: object) -> Iterator[str]:
    """The string values inside decoded JSON (where an agent puts commands, paths, file text)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)


def _argument_texts(message: ChatMessage) -> Iterator[str]:
    for call in message.get("tool_calls") or ():
        arguments = str(call.get("function", {}).get("arguments", "")) if isinstance(call, Mapping) else ""
        try:
            yield from _leaves(json.loads(arguments))
        except ValueError:
            yield arguments


def output_texts(output: ChatMessage) -> list[str]:
    """The texts of a call's output where a use can appear: assistant text and argument values."""
    texts = [_content_text(output.get("content")), *_argument_texts(output)]
    return [t for t in texts if t]


def message_text(message: ChatMessage) -> str:
    """What one message shows the model, as one searchable string (content and argument values)."""
    return _SEP.join([_content_text(message.get("content")), *_argument_texts(message)])


def prompt_text(prompt: Sequence[ChatMessage], text_of: Callable[[ChatMessage], str] = message_text) -> str:
    """Everything a prompt shows the model, as one searchable string."""
    return _SEP.join(map(text_of, prompt))


class _SpanIndex:
    """Tool-output lines and aligned windows, to find reused spans in a call's output."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.lines: set[str] = set()
        self.windows: dict[str, list[tuple[int, int]]] = {}
        self._seen: set[int] = set()

    def add(self, text: str) -> None:
        key = xxhash.xxh3_64_intdigest(text.encode("utf-8", "surrogatepass"))
        if not text or key in self._seen:
            return
        self._seen.add(key)
        tid = len(self.texts)
        self.texts.append(text)
        for line in text.split("\n"):
            stripped = line.strip()
            if len(stripped) >= MIN_LINE_CHARS:
                self.lines.add(stripped)
        windows = self.windows
        for off in range(0, len(text) - _WINDOW + 1, _STRIDE):
            hits = windows.setdefault(text[off : off + _WINDOW], [])
            if len(hits) < _HITS_PER_WINDOW:
                hits.append((tid, off))

    def _longest(self, out: str, i: int, floor: int, hits: list[tuple[int, int]]) -> tuple[int, int]:
        """The longest span of ``out`` around window ``i`` shared with an indexed text."""
        best = (i, i)
        for tid, off in hits:
            text = self.texts[tid]
            a, b = i, off
            while a > floor and b > 0 and out[a - 1] == text[b - 1]:
                a -= 1
                b -= 1
            c, d = i + _WINDOW, off + _WINDOW
            while c < len(out) and d < len(text) and out[c] == text[d]:
                c += 1
                d += 1
            if c - a > best[1] - best[0]:
                best = (a, c)
        return best

    def spans(self, out: str) -> list[str]:
        """Reused spans in ``out``: maximal shared substrings of 32+ chars, then shared lines."""
        found: list[str] = []
        windows = self.windows
        end = 0
        i = 0
        last = len(out) - _WINDOW
        while i <= last:
            hits = windows.get(out[i : i + _WINDOW])
            if hits:
                a, c = self._longest(out, i, end, hits)
                if c - a >= MIN_SPAN_CHARS:
                    found.append(out[a:c])
                    end = i = c
                    continue
            i += 1
        for line in out.split("\n"):
            stripped = line.strip()
            long_enough = len(stripped) >= MIN_LINE_CHARS
            if long_enough and stripped in self.lines and not any(stripped in span for span in found):
                found.append(stripped)
        return found


class RetentionTracker:
    """Feed it a session call by call; ``result()`` gives the retention over all uses so far.

    ``lookup(key)`` returns the archived text behind a stub key (or None); without it, nothing is
    recoverable. Keep the lost uses for a report in :attr:`lost_uses` (the first 100).
    """

    def __init__(self, lookup: Lookup | None = None) -> None:
        self._lookup = lookup
        self._archived: dict[str, str | None] = {}
        self._index = _SpanIndex()
        self._tool_ids: dict[int, ChatMessage] = {}
        self._texts: dict[int, tuple[ChatMessage, str]] = {}
        self._calls = 0
        self._counts = {"kept": 0, "recoverable": 0, "lost": 0}
        self.lost_uses: list[Use] = []

    def _index_tools(self, prompt: Sequence[ChatMessage]) -> None:
        for message in prompt:
            if message.get("role") != "tool" or id(message) in self._tool_ids:
                continue
            self._tool_ids[id(message)] = message  # holding it keeps the id from being reused
            self._index.add(_content_text(message.get("content")))

    def _text(self, message: ChatMessage) -> str:
        """:func:`message_text`, memoised per message object (prompts share their messages)."""
        hit = self._texts.get(id(message))
        if hit is None:
            hit = self._texts[id(message)] = (message, message_text(message))
        return hit[1]

    def _archived_text(self, key: str) -> str | None:
        if key not in self._archived:
            self._archived[key] = self._lookup(key) if self._lookup else None
        return self._archived[key]

    def add_call(
        self,
        original_prompt: Sequence[ChatMessage],
        transformed_prompt: Sequence[ChatMessage],
        output: ChatMessage,
    ) -> list[Use]:
        """Judge the uses in this call's output; returns them in order of appearance."""
        call = self._calls
        self._calls += 1
        self._index_tools(original_prompt)
        spans: dict[str, None] = {}
        for text in output_texts(output):
            spans.update(dict.fromkeys(self._index.spans(text)))
        if not spans:
            return []
        haystack = prompt_text(transformed_prompt, self._text)
        archives: list[str] | None = None
        uses: list[Use] = []
        for span in spans:
            verdict: Verdict = "kept"
            if span not in haystack:
                if archives is None:
                    keys = dict.fromkeys(stub_keys(haystack))
                    archives = [t for t in map(self._archived_text, keys) if t is not None]
                verdict = "recoverable" if any(span in text for text in archives) else "lost"
            use = Use(call, span, verdict)
            uses.append(use)
            self._counts[verdict] += 1
            if verdict == "lost" and len(self.lost_uses) < 100:
                self.lost_uses.append(use)
        return uses

    def result(self) -> Retention:
        kept, recoverable, lost = (self._counts[k] for k in ("kept", "recoverable", "lost"))
        return Retention(kept + recoverable + lost, kept, recoverable, lost)


def measure_retention(
    calls: Iterable[tuple[Sequence[ChatMessage], Sequence[ChatMessage], ChatMessage]],
    lookup: Lookup | None = None,
) -> Retention:
    """Retention of a whole session given ``(original_prompt, transformed_prompt, output)`` per call."""
    tracker = RetentionTracker(lookup)
    for original, transformed, output in calls:
        tracker.add_call(original, transformed, output)
    return tracker.result()
