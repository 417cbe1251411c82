"""SSE parsing and placeholder restoring across deltas (lightmem_plugin.wire.sse)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin.prefix.placeholders import restore_json, restore_text
from lightmem_plugin.wire.sse import SSEParser, StreamRestorer, encode_event, json_bytes, json_value

VALUES = {"WORKDIR": "/home/alice/proj", "TIMESTAMP": "2026-03-01T10:00:00Z", "UUID": "u-1", "UUID_2": "u-2"}
WIN = {"WORKDIR": 'C:\\Users\\bob\\my "proj"'}

STREAM = (
    b'event: message_start\ndata: {"a": 1}\n\n'
    b": keep-alive comment\n\n"
    b"event: ping\r\ndata: {}\r\n\r\n"
    b"data: line one\ndata: line two\n\n"
    b"id: 7\nretry: 100\ndata:nospace\n\n"
    b"data: [DONE]\n\n"
)


def _parse(chunks: list[bytes]) -> list[tuple[bytes, str | None, str]]:
    parser = SSEParser()
    events = [ev for c in chunks for ev in parser.feed(c)] + parser.close()
    return [(ev.raw, ev.event, ev.data) for ev in events]


def test_parser_fields_and_raw_bytes() -> None:
    got = _parse([STREAM])
    assert [(e, d) for _, e, d in got] == [
        ("message_start", '{"a": 1}'),
        (None, ""),
        ("ping", "{}"),
        (None, "line one\nline two"),
        (None, "nospace"),
        (None, "[DONE]"),
    ]
    assert b"".join(raw for raw, _, _ in got) == STREAM


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_parser_same_events_for_any_chunking(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    assert _parse(chunks) == _parse([STREAM])


@pytest.mark.parametrize(
    ("tail", "expected"),
    [(b"data: last", "last"), (b"event: x\ndata: y\n", "y"), (b"data: crlf\r", "crlf")],
)
def test_parser_delivers_unterminated_last_event(tail: bytes, expected: str) -> None:
    assert _parse([tail])[-1][2] == expected


def test_encode_event_round_trips() -> None:
    raw = encode_event("content_block_delta", '{"x":"a"}\nsecond')
    assert _parse([raw]) == [(raw, "content_block_delta", '{"x":"a"}\nsecond')]


TEXTS = [
    "cd <WORKDIR>/src at <TIMESTAMP>",
    "<WORKDIR>",
    "a < b and <NOT_A_PLACEHOLDER> and <UUID_2> then <UUID>",
    "ends with <WORK",
    "ends with <",
    "<<WORKDIR>>",
    "no placeholders at all",
]


def _pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


@pytest.mark.parametrize("text", TEXTS)
@given(cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=10))
def test_text_restore_independent_of_delta_boundaries(text: str, cuts: list[int]) -> None:
    r = StreamRestorer(VALUES)
    out = "".join(r.push(p) for p in _pieces(text, cuts)) + r.flush()
    assert out == restore_text(text, VALUES)


def test_partial_placeholder_is_held_until_next_delta() -> None:
    r = StreamRestorer(VALUES)
    assert r.push("cd <WORK") == "cd "
    assert r.push("DIR>/src") == "/home/alice/proj/src"
    assert r.push(" <x") == " <x"  # cannot become a known placeholder: not held
    assert r.push(" <UUID") == " "  # could still be <UUID> or <UUID_2>
    assert r.push(">") == "u-1"
    assert r.flush() == ""


def test_no_values_passes_deltas_through() -> None:
    r = StreamRestorer({})
    assert r.push("<WORK") == "<WORK"
    assert r.flush() == ""


@settings(max_examples=60)
@given(
    obj=st.dictionaries(
        st.sampled_from(["path", "cmd", "<WORKDIR>", "note"]),
        st.one_of(
            st.sampled_from(
                ["<WORKDIR>/a.py", 'say "<WORKDIR>"', "back\\slash <WORKDIR>", "plain", "\\<WORKDIR>"]
            ),
            st.integers(),
            st.lists(st.sampled_from(["<WORKDIR>", "x"]), max_size=3),
        ),
        max_size=4,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=120), max_size=12),
)
def test_json_restore_escapes_values_across_boundaries(obj: dict[str, object], cuts: list[int]) -> None:
    text = json.dumps(obj)
    r = StreamRestorer(WIN, json_mode=True)
    out = "".join(r.push(p) for p in _pieces(text, cuts)) + r.flush()
    assert out == restore_json(text, WIN)
    expected = json.loads(json.dumps(obj).replace("<WORKDIR>", json.dumps(WIN["WORKDIR"])[1:-1]))
    assert json.loads(out) == expected


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
@pytest.mark.parametrize("stray", [b"\n\n", b"\r\n\r\n", b"\n", b" \n\n"])
def test_stray_blank_lines_reach_the_host_as_sent(api: str, stray: bytes) -> None:
    """Found by the wire fuzz suite: blank lines between events (no field) were dropped, so a stream
    with nothing to restore did not reach the host byte for byte. They are forwarded as they came."""
    from lightmem_plugin import wire

    raw = b'data: {"a": 1}\n\n' + stray + b'data: {"b": 2}\n\n' + stray
    for cut in range(len(raw) + 1):
        rewriter = wire.get(api).stream({})
        assert rewriter.feed(raw[:cut]) + rewriter.feed(raw[cut:]) + rewriter.finish() == raw


@pytest.mark.parametrize(
    "body",
    [
        b'{"n":123456789012345678901234567890}',  # past 64 bits: orjson would read a float
        b'{"n":-9223372036854775809,"m":18446744073709551616}',
        b'{"s":"\\ud800 lone","t":"\\udc00"}',  # lone surrogate escapes stay escaped
        b'{"a":[1.5,2,-0.0,0.1,"\xc3\xa9\xe2\x82\xac",{"b":null,"c":true}],"d":"\\u0000","e":"\\"/"}',
    ],
)
def test_request_json_reads_and_writes_as_the_json_module_does(body: bytes) -> None:
    """The proxy's fast path (orjson) gives the value ``json`` reads and the bytes ``json`` writes,
    falling back to ``json`` where orjson would change a value or refuse it."""
    value = json_value(body)
    assert value == json.loads(body.decode("utf-8"))
    try:
        expected = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: escaped, as before
        expected = json.dumps(value, separators=(",", ":")).encode("ascii")
    assert json_bytes(value) == expected


def test_numbers_with_an_exponent_keep_their_value() -> None:
    """The one spelling that differs from ``json``: an exponent is written shortest (``1e-7``, not
    ``1e-07``); the value is the same, and the same body always gives the same bytes."""
    value = json_value(b'{"t":1e-07,"u":1.5e+300}')
    assert json_bytes(value) == b'{"t":1e-7,"u":1.5e+300}'
    assert json.loads(json_bytes(value)) == value


@pytest.mark.parametrize(
    "body", [b'{"x":NaN}', b'{"x":-Infinity}', b"\xff{}", b"{", b"[" * 1100 + b"]" * 1100]
)
def test_request_json_refuses_what_no_provider_reads(body: bytes) -> None:
    with pytest.raises((ValueError, UnicodeDecodeError, RecursionError)):
        json_value(body)
