"""Short tool call ids: each host call id respelled in a few tokens, the same way on every call.

Why: a provider's tool call id is a random string, and a request carries each one twice (the call and
its result), re-read on every later call. DeepSeek's ``call_00_4OSig1xtPHgQm7hjajeqP6tY`` is 21
tokens, Anthropic's ``toolu_01QRx5PWxA2o4PEouZuogiWA`` 18; measured on the dev sessions, call ids
were 7.7% of every token the swe sessions sent and 3.7-5.1% of the Claude Code ones. The model uses
an id only to pair a result with its call, so any other spelling that keeps the pairs will do.

The short id is a pure function of the host's id (:func:`short_id`: xxh3-64 in base 36, nine letters
and digits, ~6 tokens): hooks, processes and restarts agree on it without any state, and a history the
host appends to keeps its prefix byte for byte. Nine alphanumerics is also the one form every provider
accepts (Anthropic's ``[a-zA-Z0-9_-]+``, Mistral's exactly nine letters and digits, OpenAI's any string
up to 40). Two distinct host ids of one request whose short ids meet (about once in 10^5 sessions of
a thousand calls) leave that request's ids as the host sent them, rather than pair a result with the
wrong call.

Not respelled: a request whose codec says its call ids are the provider's own records
(:data:`~.model.SERVER_CALL_IDS`: the Responses API, where a ``function_call_output`` may answer a
call the provider holds from an earlier response), and opaque parts (server tools, thinking).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import xxhash

from ..codecs.memo import PerObject
from ..model import CALL_ID_HINTS, SERVER_CALL_IDS, Message, Part, Request, ToolCallPart, ToolResultPart

SHORT_ID_CHARS = 9
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


@functools.lru_cache(maxsize=65_536)
def short_id(host_id: str) -> str:
    """The id the model reads for the host's call id ``host_id`` (nine base-36 letters and digits)."""
    n = xxhash.xxh3_64_intdigest(host_id.encode("utf-8", "surrogatepass"))
    out = []
    for _ in range(SHORT_ID_CHARS):
        n, digit = divmod(n, 36)
        out.append(_DIGITS[digit])
    return "".join(out)


def call_ids(req: Request) -> set[str]:
    """Every tool call id the request's calls and results name."""
    ids: set[str] = set()
    for msg in req.messages:
        for part in msg.parts:
            if isinstance(part, ToolCallPart):
                ids.add(part.id)
            elif isinstance(part, ToolResultPart):
                ids.add(part.tool_call_id)
    return ids


def respellable(req: Request) -> bool:
    """True when the request's call ids may be respelled: its codec does not mark them as the
    provider's own, and no two of them share a short id."""
    if req.hints.get(SERVER_CALL_IDS):
        return False
    ids = call_ids(req)
    return len({short_id(i) for i in ids}) == len(ids)


def _respell_part(part: Part) -> Part:
    if isinstance(part, ToolCallPart):
        return replace(part, id=short_id(part.id))
    if isinstance(part, ToolResultPart):
        return replace(part, tool_call_id=short_id(part.tool_call_id))
    return part


def respell_message(msg: Message) -> Message:
    """``msg`` with its call ids respelled (the very object when it names none); the codec hints
    keyed by call id (:data:`~.model.CALL_ID_HINTS`) follow their ids."""
    if not any(isinstance(p, ToolCallPart | ToolResultPart) for p in msg.parts):
        return msg
    hints = dict(msg.hints)
    for name in CALL_ID_HINTS:
        keyed = hints.get(name)
        if isinstance(keyed, dict):
            hints[name] = {short_id(k): v for k, v in keyed.items()}
    return replace(msg, parts=[_respell_part(p) for p in msg.parts], hints=hints)


class Respeller:
    """Respells a session's requests; a message object seen in the previous call is not redone."""

    def __init__(self) -> None:
        self._messages: PerObject[Message, Message] = PerObject(respell_message)

    def apply(self, req: Request) -> Request:
        """``req`` with every call id short; the caller asked :func:`respellable` first (once per
        request: the pipeline decides before its passes run, so a repeat can name the short id)."""
        return replace(req, messages=self._messages.map(req.messages))
