"""Helpers every wire-format codec shares.

Why one module: the three codecs must agree on how a bad payload is reported (one-line
:class:`~lightmem_plugin.errors.PayloadError` naming the JSON path, the bad value and what was expected),
on how "content was a plain string" is remembered and restored, and on how a ``data:`` URL maps to an
inline :class:`~lightmem_plugin.model.ImagePart`. Getting any of these subtly different per codec would
break the ``encode(decode(p)) == p`` guarantee in one place only.

Codecs copy dicts one level deep: ``extra`` and ``OpaquePart.raw`` are fresh dicts, but nested values
are shared with the payload they came from, so treat them as read-only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn, TypeVar

from ..errors import PayloadError
from ..model import JSON, ImagePart, Part, Request, TextPart


class _Missing:
    """Sentinel type for "the key is not there" (distinct from an explicit JSON null)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()
T = TypeVar("T")

_SHOW_LIMIT = 60
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)


def show(value: object) -> str:
    """A short one-line rendering of a bad value for an error message."""
    if value is MISSING:
        return "nothing (the key is missing)"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except Exception:  # not JSON at all (or absurdly deep): name its type instead
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _SHOW_LIMIT else text[: _SHOW_LIMIT - 3] + "..."


def fail(path: str, value: object, expected: str) -> NoReturn:
    """Raise the one-line PayloadError every codec uses: where, what was found, what was expected."""
    raise PayloadError(f"{path or 'the payload'}: got {show(value)}, expected {expected}")


def wrap_errors(api: str, func: Callable[[], T]) -> T:
    """Run ``func``, prefixing any PayloadError with the API name so logs say which codec refused."""
    try:
        return func()
    except PayloadError as exc:
        raise PayloadError(f"{api}: {exc}") from None


def at(path: str, key: str | int) -> str:
    """JSON path of ``key`` below ``path`` (``messages[3].content``)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def as_obj(value: object, path: str, expected: str = "a JSON object") -> JSON:
    """``value`` as a dict, or a PayloadError."""
    if not isinstance(value, dict):
        fail(path, value, expected)
    return value


def as_list(value: object, path: str, expected: str) -> list[Any]:
    """``value`` as a list, or a PayloadError."""
    if not isinstance(value, list):
        fail(path, value, expected)
    return value


def req_str(obj: JSON, key: str, path: str, expected: str = "a string") -> str:
    """The string under ``key``; a missing key or any other type is a PayloadError."""
    value = obj.get(key, MISSING)
    if not isinstance(value, str):
        fail(at(path, key), value, expected)
    return value


def rest(obj: JSON, *known: str) -> JSON:
    """A fresh dict of the fields of ``obj`` that a codec does not map (they travel in ``extra``)."""
    return {k: v for k, v in obj.items() if k not in known}


def nest(extra: JSON, key: str, inner: JSON) -> JSON:
    """Keep the unknown fields of a nested object (``image_url``, ``source``) under ``extra[key]``."""
    if inner:
        extra[key] = inner
    return extra


def nested(extra: JSON, key: str) -> tuple[JSON, JSON]:
    """Split ``extra`` into (outer fields, the nested object's fields stored by :func:`nest`)."""
    outer = dict(extra)
    inner = outer.pop(key, None)
    return outer, dict(inner) if isinstance(inner, dict) else {}


def layout_of(value: object, path: str, expected: str, allow: Sequence[str]) -> str:
    """Name the shape of a content value, one of ``allow``: string, list, null or absent."""
    if isinstance(value, str):
        kind = "string"
    elif isinstance(value, list):
        kind = "list"
    elif value is None:
        kind = "null"
    elif value is MISSING:
        kind = "absent"
    else:
        kind = "other"
    if kind not in allow:
        fail(path, value, expected)
    return kind


def plain_text(parts: Sequence[Part]) -> str | None:
    """The joined text when every part is a bare TextPart (so a plain string can carry it), else None."""
    if all(isinstance(p, TextPart) and not p.extra for p in parts):
        return "".join(p.text for p in parts if isinstance(p, TextPart))
    return None


def pack(layout: object, parts: Sequence[Part], blocks: Callable[[], list[JSON]]) -> object:
    """Content value for ``parts`` in the recorded ``layout``; MISSING means "leave the key out".

    A string stays a string while the parts are still plain text; "null"/"absent" stay so while there
    are no parts; anything else (or parts a pass added that a string cannot hold) becomes a list.
    ``layout`` None (a part built by a pass) prefers a string.
    """
    if layout in ("null", "absent") and not parts:
        return None if layout == "null" else MISSING
    if layout in (None, "string"):
        text = plain_text(parts)
        if text is not None:
            return text
    return blocks()


def put(out: JSON, key: str, value: object) -> None:
    """Set ``out[key]`` unless ``value`` is MISSING."""
    if value is not MISSING:
        out[key] = value


def image_from_url(url: str, extra: JSON) -> ImagePart:
    """An ImagePart from a URL: a base64 ``data:`` URL becomes inline data, anything else stays a URL."""
    match = _DATA_URL.fullmatch(url)
    if match:
        return ImagePart(media_type=match.group(1), data=match.group(2), extra=extra)
    return ImagePart(url=url, extra=extra)


def image_url(part: ImagePart, path: str) -> str:
    """The URL form of an ImagePart (inline data as a ``data:`` URL); the inverse of image_from_url."""
    if part.data is not None:
        if not part.media_type:
            fail(at(path, "media_type"), part.media_type, "a media type such as image/png for inline data")
        return f"data:{part.media_type};base64,{part.data}"
    if part.url is None:
        fail(path, None, "an ImagePart with data or url")
    return part.url


def canonical_json(value: object) -> str:
    """Compact JSON text, key order kept: the form tool-call arguments take when built from objects."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def decode_tools(obj: JSON) -> tuple[list[JSON], JSON]:
    """Tool definitions (kept verbatim) and the request hint that says whether the key was present."""
    if "tools" not in obj:
        return [], {}
    tools = as_list(obj["tools"], "tools", "a list of tool definition objects")
    return [dict(as_obj(t, at("tools", i), "a tool definition object")) for i, t in enumerate(tools)], {
        "tools": True
    }


def encode_tools(req: Request, out: JSON) -> None:
    """Write ``tools`` back when there are any or when the payload had the key (even empty)."""
    if req.tools or req.hints.get("tools"):
        out["tools"] = [dict(t) for t in req.tools]


class Reuse:
    """One session's previous request, so a codec decodes and encodes only what changed since.

    Why: a proxy parses each request body anew, and a host resends its whole conversation every call
    (100-200 KB mid-session), so decoding and encoding every message again was a tenth of the proxy's
    work per call under host-like load. Hosts append: an item equal to the one at its position last
    call (compared as parsed JSON, in C) decodes to last call's very message, and a message that is
    last call's very object (the pipeline hands unchanged ones on) encodes to last call's JSON. The
    results are shared between calls: treat them as read-only, as the codecs' output always was.
    Only the previous call is held, per codec and list (bounded by the current request).
    """

    def __init__(self) -> None:
        self._decoded: dict[str, tuple[list[Any], list[Any]]] = {}
        self._encoded: dict[str, tuple[list[Any], list[Any]]] = {}

    def decoded(self, key: str, raw: list[Any], decode: Callable[[Any, str], T], path: str) -> list[T]:
        """``decode(item, path[i])`` for each item of ``raw``, or last call's result for an equal item."""
        last_raw, last = self._decoded.get(key, ((), ()))
        out: list[T] = []
        for i, item in enumerate(raw):
            if i < len(last_raw) and (last_raw[i] is item or last_raw[i] == item):
                out.append(last[i])
            else:
                out.append(decode(item, at(path, i)))
        self._decoded[key] = (raw, out)
        return out

    def encoded(
        self, key: str, items: list[tuple[int, Any]], encode: Callable[[Any, str], T], path: str
    ) -> list[T]:
        """``encode(message, path[i])`` for each ``(i, message)``, or last call's result for the same
        message object at the same position."""
        last_in, last = self._encoded.get(key, ((), ()))
        msgs = [m for _, m in items]
        out = [
            last[n] if n < len(last_in) and last_in[n] is m else encode(m, at(path, i))
            for n, (i, m) in enumerate(items)
        ]
        self._encoded[key] = (msgs, out)
        return out


def decoded_items(
    reuse: Reuse | None, api: str, raw: list[Any], decode: Callable[[Any, str], T], path: str
) -> list[T]:
    """Each item of ``raw`` decoded (through ``reuse`` when the caller keeps one)."""
    if reuse is None:
        return [decode(item, at(path, i)) for i, item in enumerate(raw)]
    return reuse.decoded(f"{api}:{path}", raw, decode, path)


def encoded_items(
    reuse: Reuse | None, api: str, items: list[tuple[int, Any]], encode: Callable[[Any, str], T], path: str
) -> list[T]:
    """Each ``(i, message)`` encoded (through ``reuse`` when the caller keeps one)."""
    if reuse is None:
        return [encode(m, at(path, i)) for i, m in items]
    return reuse.encoded(f"{api}:{path}", items, encode, path)
