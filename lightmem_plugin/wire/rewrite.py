"""Model output on its way back to the host: placeholders restored, real cache usage picked up.

Why per API: each provider streams text and tool-call arguments in its own event shapes, and each
reports cache figures under its own names. Here is what they share (:class:`StreamRewriter`, the
fail-open event loop; :func:`restore_strings`; :func:`body_usage`); each API's rewriter lives in its
folder's ``stream`` module:

- Anthropic Messages: ``content_block_delta`` (``text_delta.text``, ``input_json_delta.partial_json``),
  a block's held-back tail is released as one more delta before its ``content_block_stop``; usage from
  ``message_start`` and ``message_delta``.
- OpenAI Chat Completions: ``choices[].delta.content`` and ``delta.tool_calls[].function.arguments``;
  a choice's held-back tail joins the chunk that carries its ``finish_reason``; usage from the chunk
  that has it (``stream_options.include_usage``).
- OpenAI Responses: ``response.output_text.delta``, ``response.function_call_arguments.delta``,
  ``response.custom_tool_call_input.delta`` and the matching ``.done`` events (full texts restored);
  a released tail becomes one more delta event, and later ``sequence_number`` values are shifted so
  they stay consecutive; usage from ``response.completed`` (or ``incomplete``/``failed``).

An event we cannot read, or whose restoring fails, is forwarded exactly as received (fail-open, I5);
events we do not change are forwarded byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..faults import guard
from ..prefix.placeholders import restore_text
from .sse import Event, SSEParser

JSON = dict[str, Any]


def obj(value: object) -> JSON:
    """``value`` when it is a JSON object, else an empty one (what every rewriter reads fields from)."""
    return value if isinstance(value, dict) else {}


def restore_strings(value: Any, values: Mapping[str, str]) -> Any:
    """Every string inside a decoded JSON value restored (Anthropic ``tool_use.input`` objects)."""
    if isinstance(value, str):
        return restore_text(value, values)
    if isinstance(value, list):
        return [restore_strings(v, values) for v in value]
    if isinstance(value, dict):
        return {k: restore_strings(v, values) for k, v in value.items()}
    return value


def body_usage(body: JSON) -> JSON | None:
    """The ``usage`` object of a non-streamed body (all three APIs put it at the top)."""
    usage = body.get("usage")
    return usage if isinstance(usage, dict) else None


class StreamRewriter:
    """Base: parse the upstream SSE bytes, rewrite event by event, remember the usage."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = dict(values)
        self.usage: JSON | None = None
        self._parser = SSEParser()
        self.on_error: Callable[[str, BaseException], None] | None = None  # the session's fault report

    def feed(self, chunk: bytes) -> bytes:
        """The bytes to send the client for this upstream chunk."""
        return self._emit(self._parser.feed(chunk))

    def finish(self) -> bytes:
        """The bytes still owed when the upstream stream ended."""
        out = self._emit(self._parser.close())
        with guard("stream restore", on_error=self._failed):
            return out + b"".join(self.end())
        return out  # fail-open: a tail we cannot flush is dropped, never the stream

    def _emit(self, events: list[Event]) -> bytes:
        out: list[bytes] = []
        for ev in events:
            with guard("stream restore", on_error=self._failed) as caught:
                data = ev.json() if ev.data and ev.data != "[DONE]" else None
                out.extend(self.rewrite(ev, data if isinstance(data, dict) else None))
            if caught.error is not None:  # fail-open (I5): forward what the provider sent
                out.append(ev.raw)
        return b"".join(out)

    def _failed(self, step: str, err: BaseException) -> None:
        if self.on_error is not None:
            self.on_error(step, err)

    def rewrite(self, ev: Event, data: JSON | None) -> list[bytes]:
        """Bytes for one event (``data`` is its JSON object, None when it has none)."""
        raise NotImplementedError

    def end(self) -> list[bytes]:
        """Bytes to add when the stream ends without a proper close (held-back tails)."""
        return []
