"""Chat messages as token-id chunks for the cache models, with the calibrated template overhead.

Why a calibration: traces record the provider's own token counts, while we count with o200k_base
and see only the message texts and tool call ids. On the swe traces (58 sessions, 4655 calls,
DeepSeek) a constant head per request plus a constant per message close the rest of the gap (see
``tests/test_chat_tokens.py``). The template tokens are stand-in negative ids: they never collide
with real token ids, and they are the same for every message of a role, so caching is unaffected.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import xxhash

from ..codecs.memo import PerObject

Encode = Callable[[str], Sequence[int]]
M = TypeVar("M")
H = TypeVar("H", bound=Hashable)

MESSAGE_OVERHEAD_TOKENS = 9
"""Tokens each chat message adds beyond its text and call ids (role markers, tool-call wrapper).

Fitted on the swe traces (4655 calls): DeepSeek's reported ``prompt_tokens`` minus the o200k_base
count of the message texts, tool names, arguments and call ids grows by 8.9 per message (least
squares, with a constant head of 410): the template's markers (tool-call JSON fence and markers on
assistant messages, output markers on tool messages). The call ids are counted as what they are:
8.3% of the recorded prompt tokens. Before they were, the per-message constant was 28.7 and absorbed
them, so a request whose ids were shorter cost the same.
"""

REQUEST_OVERHEAD_TOKENS = 410
"""Tokens a request carries outside its messages (tool definitions, BOS): the fitted constant head."""

_ROLE_MARK = {"system": -1, "developer": -2, "user": -3, "assistant": -4, "tool": -5}
_PAD = -9
_IMAGE = -10
_HEAD = -11


def head_chunk(tokens: int = REQUEST_OVERHEAD_TOKENS) -> list[int]:
    """Stand-in tokens for what a request carries outside its messages (tool definitions, BOS)."""
    return [_HEAD] * tokens


def _image_mark(part: Mapping[str, Any]) -> int:
    """One negative id per distinct non-text part, so a changed image still breaks the prefix."""
    raw = json.dumps(part, sort_keys=True, default=str).encode("utf-8", "surrogatepass")
    return _IMAGE - (xxhash.xxh3_64_intdigest(raw) & 0xFFFFFFF)


def chat_tokens(
    message: Mapping[str, Any],
    encode: Encode,
    overhead: int = MESSAGE_OVERHEAD_TOKENS,
) -> list[int]:
    """One chat-form message as a chunk: marker ids for the template, then its text's token ids.

    The marker ids are negative, so they never collide with real token ids; the first one names the
    role, so equal texts under different roles stay different prefixes. Tool calls count their id, name
    and arguments, a tool message the id it answers; an image counts as one marker (its identity, not its price, matters here).
    """
    role = str(message.get("role", ""))
    ids: list[int] = [_ROLE_MARK.get(role, _PAD)] + [_PAD] * max(0, overhead - 1)
    content = message.get("content")
    if isinstance(content, str):
        ids.extend(encode(content))
    elif isinstance(content, list):
        for part in content:
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "text":
                ids.extend(encode(str(part.get("text", ""))))
            else:
                ids.append(_image_mark(part))
    answers = message.get("tool_call_id")
    if isinstance(answers, str):
        ids.extend(encode(answers))
    for call in message.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        function = call.get("function", {})
        ids.extend(encode(str(call.get("id", ""))))
        ids.extend(encode(str(function.get("name", ""))))
        ids.extend(encode(str(function.get("arguments", ""))))
    return ids


def chat_key(message: Mapping[str, Any]) -> int:
    """A content hash of one chat message: equal keys mean equal messages to the cache models."""
    raw = json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)
    return int(xxhash.xxh3_64_intdigest(raw.encode("utf-8", "surrogatepass")))


class Chunker(Generic[M, H]):
    """Prompt chunks and content keys for one session, one per message, memoised per message object.

    The one chunker of the project: the ledger behind ``status``/``report`` counts neutral messages
    with it and the replay behind ``make bench`` counts chat dicts with it, both through
    :func:`chat_tokens`, so the two give the same figures for the same session. An unchanged message
    (the same object as last call, :class:`~.codecs.memo.PerObject`) yields the very same chunk object, and
    the cache models reuse its block hashes without comparing tokens.
    """

    def __init__(
        self,
        tokens_of: Callable[[M], Sequence[int]],
        key_of: Callable[[M], H],
        head: int = REQUEST_OVERHEAD_TOKENS,
    ) -> None:
        self._memo: PerObject[M, tuple[Sequence[int], H]] = PerObject(lambda m: (tokens_of(m), key_of(m)))
        self._head = head_chunk(head) if head > 0 else None

    def pieces(self, prompt: Sequence[M]) -> tuple[list[Sequence[int]], list[H]]:
        """One chunk and one content key per message (no head)."""
        done = self._memo.map(prompt)
        return [c for c, _ in done], [k for _, k in done]

    def chunks(self, prompt: Sequence[M]) -> list[Sequence[int]]:
        """The head chunk (when ``head > 0``) followed by one chunk per message."""
        body = self.pieces(prompt)[0]
        return [self._head, *body] if self._head is not None else body


class ChatChunker(Chunker[Mapping[str, Any], int]):
    """The :class:`Chunker` of chat-form messages (recorded traces, the Python API's messages)."""

    def __init__(
        self,
        encode: Encode,
        overhead: int = MESSAGE_OVERHEAD_TOKENS,
        head: int = REQUEST_OVERHEAD_TOKENS,
    ) -> None:
        super().__init__(lambda m: chat_tokens(m, encode, overhead), chat_key, head)
