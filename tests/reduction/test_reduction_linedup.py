from __future__ import annotations

import re

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
    body, stub, base = out
    assert "[lightmem2 repeat: lines 2:41 as shown in an earlier output]" in body
    # the map from each shown line to the original lines it stands for (the marker: lines 2..41)
    assert base is not None and base.original == again
    marker_at = body.split("\n").index("[lightmem2 repeat: lines 2:41 as shown in an earlier output]")
    assert (base.first[marker_at], base.last[marker_at]) == (1, 40)
    assert (base.first[marker_at + 1], base.last[marker_at + 1]) == (41, 41)
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


def test_a_truncation_after_repeat_markers_names_the_original() -> None:
    """The text passes that cut what the repeat markers left archive the original and number its lines:
    before, their stub named an archive of the intermediate text, markers and all (8 of 241 truncation
    stubs on the swe traces)."""
    from lightmem_plugin.config import ReductionConfig
    from lightmem_plugin.reduction.base import PassContext
    from lightmem_plugin.reduction.dedup import Repeats, apply
    from lightmem_plugin.reduction.reduce import reduce_text
    from lightmem_plugin.registry import content_key

    store: dict[str, bytes] = {}
    cfg = ReductionConfig()
    ctx = PassContext(cfg.table("normal"), cfg, archive_into(store))  # type: ignore[arg-type]
    repeats = Repeats()
    repeats.lines.add(CODE)
    fresh = "".join(f"fresh output line {i}: value {(i * 7919) % 997} was computed\n" for i in range(300))
    text = CODE + "\n" + fresh

    def inner(u: str, base: object = None) -> str:
        from dataclasses import replace

        return reduce_text(u, ctx if base is None else replace(ctx, base=base))  # type: ignore[arg-type]

    shown = apply(repeats, "call_2", text, ctx, inner)
    assert "[lightmem2 repeat: lines 1:40 as shown in an earlier output]" in shown
    keys = set(stub_keys(shown))
    assert keys == {str(content_key(text.encode()))}, shown[-600:]  # every stub: the original
    # the truncation's line range is in the original's numbering (the elided fresh lines)
    ranges = re.findall(r'lines="(\d+):(\d+)"', shown)
    assert ranges, shown[-400:]
    original = text.splitlines()
    for a, b in ranges:
        assert 41 < int(a) <= int(b) <= len(original)
    for line in shown.split("\n"):
        assert line in original or line.startswith("[lightmem2")


def test_two_processes_appending_spellings_at_once_keep_both() -> None:
    """Claude Code runs a PostToolUse hook process per parallel tool call; both load the session's state,
    both append one spelling: before, both wrote log key "0" and the store kept only one of them."""
    from lightmem_plugin.reduction.dedup import DedupIndex

    a, b = DedupIndex(), DedupIndex()
    a.seen("toolu_A")
    b.seen("toolu_B")
    stored = {**a.spellings, **b.spellings}  # what an insert-or-replace store holds after both
    assert len(stored) == 2
    merged = DedupIndex()
    merged.replay(stored)
    assert set(merged.names.values()) == {"toolu_A", "toolu_B"}
    # a store written before (plain sequence keys) still replays in order
    old = DedupIndex()
    old.replay({"0": "call1\x00call_1", "1": "call1\x00call1", "2": "call1\x01"})
    assert old.names == {"call1": "call1"} and old.confirmed == {"call1"}
