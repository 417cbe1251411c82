from __future__ import annotations

import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin.reduction.base import stub_keys
from lightmem_plugin.reduction.linedup import LineIndex

CODE = "\n".join(f"    def method_{i}(self, value):  # line {i}" for i in range(40))


def archive_into(store: dict[str, bytes]):  # type: ignore[no-untyped-def]
    def put(data: bytes) -> str:
        key = str(xxhash.xxh3_128_hexdigest(data))
        store[key] = data
        return key

    return put


def test_repeated_run_becomes_marker_and_original_is_archived() -> None:
    idx = LineIndex()
    idx.add(CODE)
    store: dict[str, bytes] = {}
    again = "$ sed -n 1,40p file.py\n" + CODE + "\nnew line that was never shown before"
    out = idx.reduce(again, archive_into(store))
    assert out is not None
    body, stub = out
    assert "[lightmem2 repeat: lines 2:41 as shown in an earlier output]" in body
    assert body.startswith("$ sed -n 1,40p file.py\n")
    assert body.endswith("new line that was never shown before")
    assert store[stub_keys(stub)[0]] == again.encode()


def test_nothing_repeated_or_too_small_gives_none() -> None:
    idx = LineIndex()
    idx.add("short\nlines")
    assert idx.reduce(CODE, archive_into({})) is None
    idx.add("    def method_0(self, value):  # line 0")
    assert idx.reduce(CODE, archive_into({})) is None  # one repeated line is not worth a marker


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(alphabet="abcdefghij \n", min_size=0, max_size=40), min_size=1, max_size=30))
def test_every_kept_line_is_verbatim_and_markers_cover_only_seen_lines(lines: list[str]) -> None:
    idx = LineIndex()
    idx.add("\n".join(lines[::2]))
    text = "\n".join(lines)
    out = idx.reduce(text, archive_into({}))
    if out is None:
        return
    source = text.split("\n")
    for line in out[0].split("\n"):
        assert line in source or line.startswith("[lightmem2 repeat: lines ")
