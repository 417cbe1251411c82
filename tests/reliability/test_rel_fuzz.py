"""Fuzzing: hostile input never escapes the pipeline, and what it cannot reduce it passes through.

Hypothesis drives every reduction pass, the three codecs and ``Session.before_model_call`` with
malformed shapes, invalid UTF-8 and lone surrogates, deep nesting, malformed HTML, corrupt and
truncated images. The invariants: no exception escapes; each pass either returns or the pipeline's
fail-open keeps the original; every tool output that comes back is either the original or carries a
stub whose archive recovers the original (nothing lost). Time and memory bounds for huge inputs are in
``test_rel_bounds.py``.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import io
import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image
from rel_convo import head, tool_output, turn

from lightmem_plugin.config import Config
from lightmem_plugin.errors import PayloadError
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction import diffsum, html, jsonsum, logsum, truncate, whitespace
from lightmem_plugin.reduction.base import PassContext, stub_keys
from lightmem_plugin.reduction.dedup import DedupIndex
from lightmem_plugin.reduction.images import reduce_image
from lightmem_plugin.reduction.reduce import reduce_text
from lightmem_plugin.store.registry import Registry
from lightmem_plugin.wire.anthropic import codec as anthropic
from lightmem_plugin.wire.chat import codec as openai_chat
from lightmem_plugin.wire.responses import codec as openai_responses

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")

# Text the passes look at: HTML tags, JSON punctuation, diff and log markers, ANSI, surrogates, NUL.
FRAGMENTS = [
    "<html>", "</html>", "<body>", "<div>", "</div>", "<p>", "<script>", "<!doctype html>", "<a href='x'>",
    "<pre>", "</pre>", "<!--", "-->", "<", ">", "&amp;", "{", "}", "[", "]", '"', ":", ",", "null", "1e999",
    "NaN", "diff --git a/x b/x\n", "--- a/x\n", "+++ b/x\n", "@@ -1,2 +1,2 @@\n", "+", "-", "ERROR ",
    "Traceback (most recent call last):\n", '  File "x.py", line 1\n', "\x1b[31m", "\x1b]0;t\x07", "\x1b",
    "\r\n", "\n", "\n\n\n", "\t", " ", "\x00", "\ud800", "\udfff", "\u2028", "\ufeff", "é", "漢", "[lightmem2: ",
]  # fmt: skip
hostile_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=30)), max_size=120).map(
    "".join
)
long_text = st.builds(
    lambda unit, n, tail: unit * n + tail,
    st.sampled_from(["a", "x\n", "\n", "<div>", "[", '{"a":', "ab cd\n", "\x1b[0m", "\ud800"]),
    st.integers(1_000, 20_000),
    hostile_text,
)


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> PassContext:
    cfg = Config()
    cfg.reduction.imageBitmapMaxBytes = 1024
    reg = Registry(tmp_path_factory.mktemp("fuzz-registry"))
    return PassContext(cfg.mode_table(), cfg.reduction, reg.put)


@FUZZ
@given(st.one_of(hostile_text, long_text))
def test_every_text_pass_returns_on_hostile_text(text: str) -> None:
    lines = whitespace.split_lines(text)
    cleaned, origin = whitespace.clean(lines)
    assert len(cleaned) == len(origin) and all(0 <= i < len(lines) for i in origin)
    slim = html.slim(text)
    assert slim is None or isinstance(slim, str)
    if jsonsum.parse(text) is not None:
        assert len(jsonsum.score_lines(lines)) == len(lines)
    lengths = [len(line) for line in lines]
    if logsum.is_log(lines):
        scores = logsum.score_lines(lines, 600, 400)
        assert len(truncate.select_by_score(lengths, scores, 1200, 40, True)) == len(lines)
    if diffsum.is_diff(lines):
        assert len(diffsum.score_lines(lines)) == len(lines)
    cut = truncate.head_tail(lengths, 600, 400)
    assert cut is None or cut.head_lines + cut.tail_lines <= len(lines)
    dedup = DedupIndex(2)
    assert dedup.check("a", text) is None


@FUZZ
@given(st.one_of(hostile_text, long_text))
def test_reduce_text_loses_nothing(ctx: PassContext, text: str) -> None:
    out = reduce_text(text, ctx)
    if "[lightmem2: " not in text:  # see test_a_stub_look_alike_does_not_lift_the_hard_cap
        assert len(out) <= ctx.reduction.hardCapChars + 1000
    if out != text:
        keys = stub_keys(out)
        assert keys, "a changed output must name its archive"
        reg_put = ctx.archive
        assert reg_put(text.encode("utf-8", "surrogatepass")) in keys


def test_a_stub_look_alike_does_not_lift_the_hard_cap(ctx: PassContext) -> None:
    text = "ab cd\n" * 100_000 + "grep: [lightmem2: is our marker\n"
    assert len(reduce_text(text, ctx)) <= ctx.reduction.hardCapChars + 1000


def _png(size: tuple[int, int], mode: str = "RGB") -> bytes:
    img = Image.new(mode, size, (10, 200, 30) if mode == "RGB" else 0)
    for x in range(0, size[0], 7):
        img.putpixel((x, x % size[1]), (x % 255, 0, 0) if mode == "RGB" else 255)
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def _corrupt(data: bytes, how: str, where: float) -> bytes:
    at = int(len(data) * where)
    if how == "truncate":
        return data[:at]
    if how == "flip":
        return data[:at] + bytes([data[at % len(data)] ^ 0xFF]) + data[at + 1 :]
    return data[:at] + b"\x00" * 64 + data[at:]


def _bomb_header(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims a huge canvas (the decoder must refuse before allocating)."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 4096, 9)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


IMAGES = [_png((300, 200)), _png((64, 900), "L"), _bomb_header(100_000, 100_000), _bomb_header(1, 2**31 - 1)]


@FUZZ
@given(
    st.sampled_from(range(len(IMAGES))),
    st.sampled_from(["truncate", "flip", "insert"]),
    st.floats(0, 1),
    st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml", "", "x/y"]),
)
def test_image_pass_never_raises_on_corrupt_images(
    ctx: PassContext, which: int, how: str, where: float, mt: str
) -> None:
    data = _corrupt(IMAGES[which], how, where)
    out = reduce_image(data, mt, ctx)
    assert out is None or (isinstance(out[0], bytes) and len(out[0]) < len(data))


@pytest.mark.parametrize("which", [2, 3])
def test_decompression_bomb_headers_are_refused(ctx: PassContext, which: int) -> None:
    assert reduce_image(IMAGES[which] + b"\x00" * 2048, "image/png", ctx) is None


# -- codecs ------------------------------------------------------------------------------------------
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
)


def _nested(depth: int) -> Any:
    value: Any = "leaf \ud800"
    for i in range(depth):
        value = [value] if i % 2 else {"content": value}
    return value


@pytest.mark.parametrize(
    "codec", [anthropic, openai_chat, openai_responses], ids=["anthropic", "chat", "responses"]
)
@pytest.mark.parametrize("depth", [50, 900, 5_000])
def test_codecs_refuse_or_round_trip_deep_nesting(codec: Any, depth: int) -> None:
    deep = _nested(depth)
    for payload in (
        {"model": "m", "messages": [{"role": "user", "content": deep}], "input": deep},
        {"model": "m", "messages": [{"role": "tool", "tool_call_id": "c", "content": "x", "extra": deep}]},
        {"model": "m", "input": [{"type": "message", "role": "user", "content": deep}]},
    ):
        try:
            req = codec.decode_request(payload)
        except PayloadError:
            continue
        try:
            back = codec.encode_request(req)
        except PayloadError:
            continue
        assert back == payload


@FUZZ
@given(json_values, st.sampled_from([anthropic, openai_chat, openai_responses]))
def test_codecs_raise_only_payload_error(value: Any, codec: Any) -> None:
    for payload in (value, {"model": "m", "messages": value, "input": value, "system": value}):
        with contextlib.suppress(PayloadError):
            codec.decode_request(payload)


# -- the whole pipeline ------------------------------------------------------------------------------
def _data_url(data: bytes, mt: str = "image/png") -> str:
    return f"data:{mt};base64,{base64.b64encode(data).decode()}"


bad_message = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "tool", "assistant", "system", "x"]), "content": json_values}
    ),
    st.builds(lambda d: {"role": "user", "content": d}, st.just(_nested(3000))),
)
tool_content = st.one_of(
    hostile_text,
    long_text,
    st.builds(
        lambda which, how, where: [
            {"type": "text", "text": "screenshot:"},
            {"type": "image_url", "image_url": {"url": _data_url(_corrupt(IMAGES[which], how, where))}},
        ],
        st.sampled_from(range(len(IMAGES))),
        st.sampled_from(["truncate", "flip", "insert"]),
        st.floats(0, 1),
    ),
    st.just([{"type": "image_url", "image_url": {"url": "data:image/png;base64,!!!not base64!!!"}}]),
)


def _fresh_session(home: Path) -> Any:
    cfg = Config()
    cfg.registry.dir = str(home / "artifacts")
    cfg.reduction.imageBitmapMaxBytes = 1024
    return LightMem(cfg).session("fuzz")


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return []


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(tool_content, min_size=1, max_size=4), st.lists(bad_message, max_size=2), st.booleans())
def test_before_model_call_never_raises_and_loses_nothing(
    tmp_path_factory: pytest.TempPathFactory, outputs: list[Any], junk: list[Any], junk_first: bool
) -> None:
    s = _fresh_session(tmp_path_factory.mktemp("home"))
    msgs: list[Any] = head("fuzz")
    for i, content in enumerate(outputs):
        msgs += turn("fuzz", i, "x")
        msgs[-1]["content"] = content
    before = copy.deepcopy(msgs)
    mine = msgs
    msgs = (junk + msgs) if junk_first else (msgs + junk)
    out = s.before_model_call(msgs)
    assert mine == before, "the host's messages must not be mutated"
    if s.fail.errors["codec"] or s.fail.errors["pipeline"]:
        assert out is msgs or out == msgs  # fail-open: the original goes out
        return
    assert isinstance(out, list) and len(out) == len(msgs)
    reg = s.plugin.registry
    for sent, orig in zip(out, msgs, strict=True):
        if not (isinstance(orig, dict) and orig.get("role") == "tool"):
            continue
        for new, old in zip(_texts(sent.get("content")), _texts(orig.get("content")), strict=True):
            if new != old:
                assert any(reg.recover(k) == reg.redactor.redact(old) for k in stub_keys(new)) or any(
                    reg.get(k) == reg.redactor.redact_bytes(old.encode("utf-8", "surrogatepass"))
                    for k in stub_keys(new)
                )


def test_a_pass_that_raises_is_counted_and_the_original_goes_out(tmp_path: Path) -> None:
    s = _fresh_session(tmp_path)

    def broken(text: str, ctx: PassContext) -> str:
        raise RecursionError("maximum recursion depth exceeded")

    s.passes_override["text"] = broken
    msgs = head("x") + turn("x", 0, tool_output("x", 0))
    out = s.before_model_call(msgs)[-1]
    assert {**out, "tool_call_id": msgs[-1]["tool_call_id"]} == msgs[-1]  # the output as it was
    assert s.fail.errors["reduction"] == 1 and "RecursionError" in (s.fail.last.error if s.fail.last else "")


def test_surrogates_and_invalid_text_pass_through_the_pipeline(tmp_path: Path) -> None:
    s = _fresh_session(tmp_path)
    weird = ("ok \ud800 \udfff é 漢 \x00 \x1b[31m" + string.printable) * 400
    msgs = head("x") + turn("x", 0, weird)
    out = s.before_model_call(msgs)
    assert not s.fail.errors, s.fail.last
    keys = stub_keys(out[-1]["content"])
    assert keys
    assert s.plugin.registry.get(keys[0]) == weird.encode("utf-8", "surrogatepass")


def test_recover_gives_back_text_with_lone_surrogates(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "r")
    text = "before \ud800 after\n" * 10
    assert reg.recover(reg.put(text.encode("utf-8", "surrogatepass"))) == text


def test_a_deep_request_stays_inside_the_pipeline(tmp_path: Path) -> None:
    """50,000 levels of nesting (far past the recursion limit) in a field we carry but do not read."""
    s = _fresh_session(tmp_path)
    deep = _nested(50_000)
    msgs = (
        head("x") + turn("x", 0, tool_output("x", 0)) + [{"role": "user", "content": "hi", "metadata": deep}]
    )
    out = s.before_model_call(msgs)
    assert out[-1]["metadata"] is deep
    assert stub_keys(out[-2]["content"]), "the rest of the request is still reduced"
    assert json.loads(json.dumps(out[:-1])) == out[:-1]
