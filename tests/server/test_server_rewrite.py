"""Per-API stream rewriters and body restoring, on the fake provider's own event streams."""

from __future__ import annotations

import json

import pytest
from client_view import body_view, stream_view
from fake_wire import STREAM, WIRE, Reply, usage_for
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin import wire
from lightmem_plugin.wire.rewrite import restore_strings

VALUES = {"WORKDIR": "/home/alice/proj", "TIMESTAMP": "2026-03-01T10:00:00Z", "HOME": 'C:\\Users\\"bob"'}
REPLY = Reply(
    text="cd <WORKDIR>/src at <TIMESTAMP>; keep <NOT_OURS> and a < b; end <WORK",
    tool_calls=[
        ("bash", json.dumps({"cmd": "ls <WORKDIR>", "home": "<HOME>/x"})),
        ("read", json.dumps({"path": "<WORKDIR>/a.py"})),
    ],
    chunk=3,
)
WANT_TEXT = "cd /home/alice/proj/src at 2026-03-01T10:00:00Z; keep <NOT_OURS> and a < b; end <WORK"
WANT_ARGS = [
    {"cmd": "ls /home/alice/proj", "home": 'C:\\Users\\"bob"/x'},
    {"path": "/home/alice/proj/a.py"},
]
APIS = ["anthropic", "chat", "responses"]


def _raw(api: str, reply: Reply = REPLY) -> bytes:
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True}}
    return b"".join(STREAM[api](reply, usage_for(api, 100, 64, 16, reply), 1, body))


def _rewrite(api: str, raw: bytes, cuts: list[int], values: dict[str, str]) -> bytes:
    points = sorted({min(c, len(raw)) for c in cuts})
    rw = wire.get(api).stream(values)
    out = b"".join(rw.feed(raw[a:b]) for a, b in zip([0, *points], [*points, len(raw)], strict=True))
    return out + rw.finish()


@pytest.mark.parametrize("api", APIS)
@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=20_000), max_size=25))
def test_stream_restored_whatever_the_chunking(api: str, cuts: list[int]) -> None:
    view = stream_view(api, _rewrite(api, _raw(api), cuts, VALUES))
    assert view.done
    assert view.text == WANT_TEXT
    assert [json.loads(a) for a in view.args] == WANT_ARGS
    if api == "responses":
        assert view.seqs == list(range(len(view.seqs)))
        assert WANT_TEXT in view.finals and all("<WORKDIR>" not in f for f in view.finals)


@pytest.mark.parametrize("api", APIS)
def test_stream_usage_is_picked_up(api: str) -> None:
    rw = wire.get(api).stream(VALUES)
    rw.feed(_raw(api))
    rw.finish()
    assert rw.usage is not None
    cached = {
        "anthropic": "cache_read_input_tokens",
        "chat": "prompt_tokens_details",
        "responses": "input_tokens_details",
    }
    assert cached[api] in rw.usage


@pytest.mark.parametrize("api", APIS)
def test_without_values_the_stream_is_byte_identical(api: str) -> None:
    raw = _raw(api)
    assert _rewrite(api, raw, [7, 100, 101, 5000], {}) == raw


@pytest.mark.parametrize("api", APIS)
def test_unreadable_event_is_forwarded_as_is(api: str) -> None:
    raw = b"data: {not json\n\n" + _raw(api)
    out = _rewrite(api, raw, [3], VALUES)
    assert out.startswith(b"data: {not json\n\n")


@pytest.mark.parametrize("api", APIS)
def test_body_restored(api: str) -> None:
    body = WIRE[api](REPLY, usage_for(api, 10, 0, 0, REPLY), 1, "m")
    view = body_view(api, wire.get(api).restore(body, VALUES))
    assert view.text == WANT_TEXT
    assert [json.loads(a) for a in view.args] == WANT_ARGS
    assert wire.get(api).restore(body, {}) is body


def test_tail_released_before_block_end() -> None:
    reply = Reply(text="value is <WORKDIR", chunk=100)
    out = _rewrite("anthropic", _raw("anthropic", reply), [], VALUES)
    view = stream_view("anthropic", out)
    assert view.text == "value is <WORKDIR"
    text = out.decode()
    assert text.index('"text":"<WORKDIR"') < text.index("content_block_stop")


def test_restore_strings_nested() -> None:
    got = restore_strings({"a": ["<WORKDIR>", 3, {"b": "<HOME>"}], "c": None}, VALUES)
    assert got == {"a": ["/home/alice/proj", 3, {"b": VALUES["HOME"]}], "c": None}
