"""Shared codec helpers: data URLs, content layouts and the one-line error format."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lightmem_plugin.codecs._common import (
    MISSING,
    canonical_json,
    fail,
    image_from_url,
    image_url,
    pack,
    show,
)
from lightmem_plugin.errors import PayloadError
from lightmem_plugin.model import ImagePart, Part, TextPart


@pytest.mark.parametrize(
    ("url", "media_type", "data"),
    [
        ("data:image/png;base64,iVBORw0KGgo=", "image/png", "iVBORw0KGgo="),
        ("data:image/svg+xml;base64,PHN2Zz4=", "image/svg+xml", "PHN2Zz4="),
        ("data:image/png;charset=utf-8;base64,AA", None, None),  # parameters: keep as a URL
        ("data:;base64,AA", None, None),
        ("data:text/plain,hello", None, None),
        ("https://example.com/a.png", None, None),
    ],
)
def test_data_urls_split_only_when_exact(url: str, media_type: str | None, data: str | None) -> None:
    part = image_from_url(url, {})
    assert (part.media_type, part.data) == (media_type, data)
    assert part.url == (None if data else url)
    assert image_url(part, "p") == url


@given(st.text())
def test_image_url_inverts_image_from_url(url: str) -> None:
    assert image_url(image_from_url(url, {}), "p") == url


@given(st.text(min_size=1).filter(lambda s: ";" not in s and "," not in s), st.text())
def test_inline_images_survive_a_url_round_trip(media_type: str, data: str) -> None:
    part = image_from_url(image_url(ImagePart(media_type=media_type, data=data), "p"), {})
    assert (part.media_type, part.data) == (media_type, data)


def blocks() -> list[dict[str, Any]]:
    return [{"as": "list"}]


@pytest.mark.parametrize(
    ("layout", "parts", "expected"),
    [
        ("string", [TextPart("a"), TextPart("b")], "ab"),
        ("string", [], ""),
        ("string", [TextPart("a", {"cache_control": {}})], [{"as": "list"}]),
        ("list", [TextPart("a")], [{"as": "list"}]),
        ("null", [], None),
        ("absent", [], MISSING),
        ("absent", [TextPart("a")], [{"as": "list"}]),
        (None, [TextPart("a")], "a"),
        (None, [ImagePart(url="u")], [{"as": "list"}]),
    ],
)
def test_pack_keeps_the_layout_while_it_can(layout: str | None, parts: list[Part], expected: object) -> None:
    assert pack(layout, parts, blocks) == expected


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (MISSING, "nothing (the key is missing)"),
        (None, "null"),
        ("é\n", '"é\\n"'),
        ({"a": [1, True]}, '{"a": [1, true]}'),
        ("x" * 100, '"' + "x" * 56 + "..."),
        (object(), "<object>"),
    ],
)
def test_show_is_short_and_one_line(value: object, shown: str) -> None:
    assert show(value) == shown


def test_fail_names_path_value_and_expectation() -> None:
    with pytest.raises(
        PayloadError, match=r'^messages\[2\]\.role: got "bot", expected "user" or "assistant"$'
    ):
        fail("messages[2].role", "bot", '"user" or "assistant"')


def test_canonical_json_is_compact_and_keeps_unicode_and_key_order() -> None:
    assert canonical_json({"b": 1, "a": ["é", None]}) == '{"b":1,"a":["é",null]}'
