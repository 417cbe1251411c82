"""The neutral form every trace reader produces, and the file reading they share.

Why one neutral form: replay, report and the retention metric should not care whether a session was
recorded by mini-swe-agent or by Claude Code. A trace is the list of model calls with, for each, the
prompt exactly as the model saw it (OpenAI chat-form messages), the assistant message it produced,
and the usage the provider really reported.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import zstandard

from ...errors import TraceError

ChatMessage = dict[str, Any]
TraceKind = Literal["swe", "claude-code", "openclaw"]


@dataclass(frozen=True, slots=True)
class TraceCall:
    """One recorded model call.

    ``prompt`` is a list of chat-form messages (role ``system``/``user``/``assistant``/``tool``;
    ``content`` a string or a list of parts; ``tool_calls``; ``tool_call_id``). Readers share message
    dicts between calls, so treat them as read-only. ``prompt_tokens`` is all input tokens the
    provider counted and ``cached_tokens`` those read from its cache; the ``*_input_tokens`` fields are
    Anthropic's own split (``None`` for other providers). ``at``: when the call was made, in seconds
    since the epoch, where the recording says (``None`` where it does not: the swe trajectories); a
    cache model with time reads the pauses between calls from it. ``cache_write_1h_tokens``: of the
    cache writes, those the request asked to keep for an hour (Anthropic's ``ephemeral_1h``; the
    rest live five minutes), which sets how long the simulated cache keeps them.
    """

    prompt: list[ChatMessage]
    output: ChatMessage
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int | None = None
    input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    at: float | None = None
    cache_write_1h_tokens: int | None = None
    whole: list[ChatMessage] | None = None
    """The prompt as it would have been had the host not compacted: the history before each recorded
    compaction, then what came after it (the host's summary left out). None where no compaction
    happened before this call, so ``prompt`` is whole."""

    @property
    def uncompacted(self) -> list[ChatMessage]:
        """The prompt without the host's compactions (``whole`` where there was one, else ``prompt``)."""
        return self.prompt if self.whole is None else self.whole


@dataclass(frozen=True, slots=True)
class RecordedCompaction:
    """A compaction the host made in a recorded session.

    ``before_call``: index of the first call that saw the compacted history; ``trigger``: ``auto``
    (the host's threshold) or ``manual`` (the user asked); ``pre_tokens``: the context size the host
    counted when it compacted, where it says; ``summary``: the message that stands for the history in
    the calls after it (the same object those calls' prompts hold).
    """

    before_call: int
    trigger: str
    pre_tokens: int | None
    summary: ChatMessage


@dataclass(frozen=True, slots=True)
class Trace:
    """A recorded session: its id, where it came from, the provider, and its calls in order."""

    id: str
    source: str
    provider: str
    calls: list[TraceCall]
    kind: TraceKind = "swe"
    model: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    compactions: list[RecordedCompaction] = field(default_factory=list)


def unzstd(raw: bytes) -> bytes:
    """zstd data decompressed, every frame of it; raises ``zstandard.ZstdError`` for data that is not
    zstd or ends inside a frame. Why frame by frame: zstandard's readers return what they have at
    the end of the input, so a cut copy would read as a shorter session rather than an error."""
    out: list[bytes] = []
    while raw:
        frame = zstandard.ZstdDecompressor().decompressobj()
        out.append(frame.decompress(raw))
        if not frame.eof:
            raise zstandard.ZstdError("the data ends inside a frame")
        raw = frame.unused_data
    return b"".join(out)


def read_text(path: Path) -> str:
    """The file's text, gunzipped or zstd-decompressed (OpenClaw's ``.jsonl.zst`` archives) by its
    magic bytes, whatever its name. An SQLite file is refused here: a store holds many sessions, and
    only replay's :func:`~lightmem_plugin.measure.replay.trace_files` expands it into them."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise TraceError(f"cannot read trace {path}: {err.strerror or err}; pass an existing file") from None
    if raw[:4] == b"\x28\xb5\x2f\xfd":  # OpenClaw's cold and deleted-session archives (.jsonl.zst)
        try:
            raw = unzstd(raw)
        except zstandard.ZstdError as err:
            raise TraceError(f"trace {path} is a damaged zstd file ({err}); re-copy the file") from None
    if raw[:16] == b"SQLite format 3\x00":  # OpenClaw 2026.9.x keeps its sessions in SQLite
        raise TraceError(
            f"trace {path} is an SQLite database (OpenClaw's session store holds many sessions), not one "
            "session file; pass it to lightmem2 replay, which replays every session in it"
        )
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise TraceError(f"trace {path} is a damaged gzip file ({err}); re-copy the file") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise TraceError(
            f"trace {path} is not UTF-8 text (byte {err.start}); pass a .json/.jsonl file or its .gz"
        ) from None


def as_int(value: object, path: Path, where: str) -> int:
    """A non-negative int from a usage field, or a TraceError naming the field and the value."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TraceError(f"trace {path}: {where} is {value!r}, expected a non-negative integer")
    return value


def epoch_seconds(value: object) -> float | None:
    """Seconds since the epoch from an ISO 8601 time (``2026-02-10T21:11:59.186Z``), else None.

    Why None and not an error: the time of a call only feeds a cache model with time; a recording
    without it is still a good recording of prompts and usage.
    """
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        return None
    if moment.tzinfo is None:  # a naive time would depend on this machine's zone: not deterministic
        return None
    return moment.timestamp()


def chat_content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Chat-form content from text and ``image_url`` parts: the text itself when it is one text part
    (as a host sends a plain message), else the parts."""
    if len(parts) == 1 and parts[0]["type"] == "text":
        return str(parts[0]["text"])
    return parts


def assistant_message(
    content: str | list[dict[str, Any]], thinking: list[str], calls: list[tuple[str, str, str]]
) -> ChatMessage:
    """One model answer in chat form: its content, its thinking as ``reasoning_content`` (the field
    DeepSeek and OpenAI-compatible APIs use; signatures are not kept) and its tool calls, each
    (id, name, arguments as JSON text)."""
    message: ChatMessage = {"role": "assistant", "content": content}
    if thinking:
        message["reasoning_content"] = "\n".join(thinking)
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}
            for cid, name, arguments in calls
        ]
    return message


def appends_to(before: Sequence[Any], after: Sequence[Any]) -> bool:
    """True when prompt ``after`` starts with every message of ``before``: the host only appended
    (messages compared by identity first: readers share message dicts between calls)."""
    return len(after) >= len(before) and all(a is b or a == b for a, b in zip(before, after, strict=False))


def typed_lines(
    lines: Sequence[str], path: Path, fix: str, what: str
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank JSON line, each an object with a ``type`` string, as
    the Claude Code and OpenClaw formats write them; a line that is not raises one :class:`TraceError`
    naming it (``fix``: what to pass instead; ``what``: what a line of the format is)."""
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise TraceError(f"trace {path}: line {n} is not JSON ({err.msg}); {fix}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            raise TraceError(f"trace {path}: line {n} is not {what} (no 'type' string)")
        yield n, obj
