"""What the host would have sent without lightmem2: its own request, with our stubs read as their originals.

Why: a host hook (Claude Code's PostToolUse) or the OpenClaw middleware reduces a tool output before
it enters the host's history, so the request the proxy or the sidecar later sees already holds the
stub. Counted as it stands, "without lightmem2" would be the reduced size and every such saving would
show as 0 in ``status`` and ``report``. A tool result whose text names exactly one archived original
(every stub of one output names the same key) and is shorter than it counts as that original here.

Only the accounting reads this: what the model receives is never built from it. Messages without a
stubbed tool result stay the same objects, so the token chunker's memo (by message object) still hits,
and each expansion is read from the archive once per text.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import xxhash

from ..codecs.memo import PerObject
from ..model import ImagePart, Message, OpaquePart, Request, TextPart, ToolResultPart
from ..reduction.base import stub_keys

TEXT_MEMO = 4096  # expanded texts kept (a stubbed output costs one archive read per process)


def _digest(text: str) -> str:
    return str(xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass")))


def decode_archived(raw: bytes) -> str:
    """An archived original as text, the way ``recover`` decodes it."""
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "surrogateescape")


class Baseline:
    """Turns requests into their without-lightmem2 form; one per session (its memos follow the host)."""

    def __init__(self, read: Callable[[str], bytes]) -> None:
        self._read = read  # the registry's peek: verified bytes, no LRU touch
        self._texts: OrderedDict[str, str | None] = OrderedDict()
        self._messages: PerObject[Message, Message] = PerObject(self._message)

    def original_text(self, text: str) -> str | None:
        """The archived original ``text`` stands for, or None when it is not one output's stub form."""
        if "[lightmem2: " not in text:
            return None
        slot = _digest(text)
        if slot in self._texts:
            self._texts.move_to_end(slot)
            return self._texts[slot]
        keys = set(stub_keys(text))
        found: str | None = None
        if len(keys) == 1:
            try:
                found = decode_archived(self._read(keys.pop()))
            except Exception:  # missing or damaged: count the text as it stands
                found = None
            if found is not None and len(found) <= len(text):
                found = None  # not a reduction of it (a quoted stub, a tiny original)
        self._texts[slot] = found
        if len(self._texts) > TEXT_MEMO:
            self._texts.popitem(last=False)
        return found

    def _message(self, msg: Message) -> Message:
        parts = []
        changed = False
        for p in msg.parts:
            if isinstance(p, ToolResultPart):
                content: list[TextPart | ImagePart | OpaquePart] = []
                for sub in p.content:
                    original = self.original_text(sub.text) if isinstance(sub, TextPart) else None
                    if isinstance(sub, TextPart) and original is not None:
                        content.append(TextPart(original, dict(sub.extra)))
                        changed = True
                    else:
                        content.append(sub)
                p = ToolResultPart(p.tool_call_id, content, p.is_error, dict(p.extra))
            parts.append(p)
        return Message(msg.role, parts, dict(msg.extra), dict(msg.hints)) if changed else msg

    def expand(self, req: Request) -> Request:
        """``req`` with every stubbed tool result replaced by its original (``req`` itself if none)."""
        messages = self._messages.map(req.messages)
        if all(a is b for a, b in zip(messages, req.messages, strict=True)):
            return req
        return Request(messages, list(req.tools), dict(req.extra), dict(req.hints))
