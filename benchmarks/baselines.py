"""Baseline context policies replayed beside lightmem2, and the oracle that bounds them all.

Each baseline is what a simple agent loop or host does today; they are here to show, on the same
sessions and the same cache model, what each costs and what each loses:

- ``keep_last``: keep the head (system + first user message) and the last N messages.
- ``truncate``: head 600 + tail 400 chars of every tool output above 1400 chars, nothing archived.
- ``periodic_summary``: every k calls, everything but the last k messages is replaced by a fixed-size
  summary placeholder: it rewrites the head, so its cache cost shows.
- ``clear_tool_results``: Anthropic-style clearing: only the 3 most recent tool results keep content.
- ``codex_limit``: Codex-style tool output limit: at most 256 lines / 10 KiB, head and tail halves.
- ``oracle``: keep at ingestion only the lines of each tool output that the agent later uses, the rest
  archived (a stub names it), call ids sent short as lightmem2 sends them (:mod:`~lightmem_plugin.prefix.call_ids`:
  no foresight needed, so the bound has them too): the limit of any policy at full retention.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lightmem_plugin.measure.retention import RetentionTracker
from lightmem_plugin.measure.traces.base import Trace
from lightmem_plugin.prefix.call_ids import short_id
from lightmem_plugin.store.registry import content_key

ChatMessage = dict[str, Any]


class Transform:
    """A baseline as a replay session policy: a pure function of the prompt and call index."""

    def __init__(self, fn: Callable[[int, list[ChatMessage]], list[ChatMessage]]) -> None:
        self._fn = fn
        self.archive: dict[str, str] = {}

    def transform(self, index: int, prompt: list[ChatMessage]) -> list[ChatMessage]:
        return self._fn(index, prompt)

    def lookup(self, key: str) -> str | None:
        return self.archive.get(key)


def _with_content(msg: ChatMessage, content: str) -> ChatMessage:
    return {**msg, "content": content}


def _head_len(prompt: list[ChatMessage]) -> int:
    n = 0
    while n < len(prompt) and prompt[n].get("role") in ("system", "developer"):
        n += 1
    return min(len(prompt), n + 1)


def keep_last(n: int = 20) -> Callable[[Trace], Transform]:
    """Head plus the last ``n`` messages, starting at an assistant message so tool pairs stay whole."""

    def fn(_i: int, prompt: list[ChatMessage]) -> list[ChatMessage]:
        head = _head_len(prompt)
        start = max(head, len(prompt) - n)
        while start < len(prompt) and prompt[start].get("role") == "tool":
            start += 1
        return prompt[:head] + prompt[start:]

    return lambda _trace: Transform(fn)


def _truncated(text: str, head: int, tail: int) -> str:
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} chars truncated ...]\n{text[-tail:]}"


def truncate(trigger: int = 1400, head: int = 600, tail: int = 400) -> Callable[[Trace], Transform]:
    """Head + tail of every long tool output; the middle is gone."""

    def fn(_i: int, prompt: list[ChatMessage]) -> list[ChatMessage]:
        return [
            _with_content(m, _truncated(m["content"], head, tail))
            if m.get("role") == "tool" and isinstance(m.get("content"), str) and len(m["content"]) > trigger
            else m
            for m in prompt
        ]

    return lambda _trace: Transform(fn)


def periodic_summary(k: int = 10, summary_chars: int = 2000) -> Callable[[Trace], Transform]:
    """Every ``k`` calls, fold all but the last ``k`` messages into a fixed-size summary."""

    def fn(i: int, prompt: list[ChatMessage]) -> list[ChatMessage]:
        round_ = i // k
        if round_ == 0:
            return prompt
        head = _head_len(prompt)
        fold_until = max(head, min(len(prompt), round_ * k * 2))
        while fold_until < len(prompt) and prompt[fold_until].get("role") == "tool":
            fold_until += 1
        body = f"Summary #{round_} of the work so far. " * (summary_chars // 32)
        return [*prompt[:head], {"role": "user", "content": body[:summary_chars]}, *prompt[fold_until:]]

    return lambda _trace: Transform(fn)


def clear_tool_results(keep: int = 3) -> Callable[[Trace], Transform]:
    """Only the ``keep`` most recent tool results keep their content."""

    def fn(_i: int, prompt: list[ChatMessage]) -> list[ChatMessage]:
        tools = [j for j, m in enumerate(prompt) if m.get("role") == "tool"]
        old = set(tools[:-keep]) if keep else set(tools)
        return [_with_content(m, "[tool result cleared]") if j in old else m for j, m in enumerate(prompt)]

    return lambda _trace: Transform(fn)


def codex_limit(max_lines: int = 256, max_bytes: int = 10 * 1024) -> Callable[[Trace], Transform]:
    """Codex-style: tool output capped at ``max_lines`` lines and ``max_bytes``, head and tail halves."""

    def cap(text: str) -> str:
        lines = text.splitlines(keepends=True)
        if len(lines) > max_lines:
            half = max_lines // 2
            text = (
                "".join(lines[:half])
                + f"[... {len(lines) - max_lines} lines omitted ...]\n"
                + "".join(lines[-half:])
            )
        if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
            text = _truncated(text, max_bytes // 2, max_bytes // 2)
        return text

    def fn(_i: int, prompt: list[ChatMessage]) -> list[ChatMessage]:
        return [
            _with_content(m, cap(m["content"]))
            if m.get("role") == "tool" and isinstance(m.get("content"), str)
            else m
            for m in prompt
        ]

    return lambda _trace: Transform(fn)


def _used_lines(text: str, spans: list[str]) -> str:
    """The lines of ``text`` that hold (part of) a later-used span, in order."""
    inside = [sp for sp in spans if sp in text]
    kept = []
    for line in text.splitlines(keepends=True):
        s = line.strip()
        if s and any(s in sp or sp in line for sp in inside):
            kept.append(line)
    return "".join(kept)


def _short_ids(m: ChatMessage) -> ChatMessage:
    """``m`` with its call ids as lightmem2 sends them."""
    out = dict(m)
    if isinstance(m.get("tool_call_id"), str):
        out["tool_call_id"] = short_id(m["tool_call_id"])
    if m.get("tool_calls"):
        out["tool_calls"] = [{**c, "id": short_id(c["id"])} if "id" in c else c for c in m["tool_calls"]]
    return out


def oracle() -> Callable[[Trace], Transform]:
    """Keep only the later-used lines of each tool output; archive the original behind a stub."""

    def make(trace: Trace) -> Transform:
        tracker = RetentionTracker()
        spans = sorted(
            {u.span for call in trace.calls for u in tracker.add_call(call.prompt, call.prompt, call.output)}
        )
        reduced: dict[int, tuple[ChatMessage, ChatMessage]] = {}
        policy = Transform(lambda _i, p: p)

        def one(m: ChatMessage) -> ChatMessage:
            hit = reduced.get(id(m))
            if hit is None or hit[0] is not m:
                hit = reduced[id(m)] = (m, _short_ids(reduce(m)))
            return hit[1]

        def reduce(m: ChatMessage) -> ChatMessage:
            text = m.get("content")
            if m.get("role") != "tool" or not isinstance(text, str) or len(text) < 200:
                return m
            key = content_key(text.encode("utf-8", "surrogatepass"))
            policy.archive[key] = text
            stub = (
                f'[lightmem2: {len(text):,} chars archived as {key}; recover with lightmem2_recover("{key}")]'
            )
            return _with_content(m, _used_lines(text, spans) + stub)

        policy._fn = lambda _i, prompt: [one(m) for m in prompt]
        return policy

    return make


BASELINES: dict[str, Callable[[], Callable[[Trace], Transform]]] = {
    "keep_last_20": lambda: keep_last(20),
    "truncate_600_400": truncate,
    "periodic_summary_10": periodic_summary,
    "clear_tool_results_3": clear_tool_results,
    "codex_limit": codex_limit,
    "oracle": oracle,
}
