from __future__ import annotations

import re
from pathlib import Path

import xxhash
from chat_turns import bash_turn
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys
from lightmem_plugin.reduction.linedup import LineIndex
from lightmem_plugin.store.registry import Registry

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
    assert "[lightmem2 repeat: lines 2:41 of this output, as shown in an earlier output]" in body
    # the map from each shown line to the original lines it stands for (the marker: lines 2..41)
    assert base is not None and base.original == again
    marker_at = body.split("\n").index(
        "[lightmem2 repeat: lines 2:41 of this output, as shown in an earlier output]"
    )
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
    shown = set("\n".join(lines[::2]).split("\n"))
    for line in out[0].split("\n"):
        assert line in source or line.startswith("[lightmem2 repeat: lines ")
        m = re.match(r"\[lightmem2 repeat: lines (\d+):(\d+) ", line)
        if m:  # every line a marker stands for, short ones too, was shown
            assert set(source[int(m.group(1)) - 1 : int(m.group(2))]) <= shown


def test_a_short_line_that_changed_is_not_folded_into_a_marker() -> None:
    """sqlfluff-1733: the agent re-printed a file to see whether its fix re-indented ``my_id,``; the
    marker claimed the whole file as shown by the earlier print, which had the old indentation."""
    columns = "".join(f"        column_number_{i},\n" for i in range(12))
    before = f"WITH example AS (\n    SELECT\n         my_id,\n{columns}        one_more\n    FROM\n        my_table\n)\n"
    after = before.replace("         my_id,", "        my_id,")
    idx = LineIndex()
    idx.add("==== fixing violations ====\n1 fixable linting violations found\n" + before, "call_1")
    out = idx.reduce(
        "==== fixing violations ====\n1 fixable linting violations found\n" + after,
        archive_into({}),
        name=lambda source: source,
    )
    assert out is None or "        my_id," in out[0].split("\n")
    # the same file unchanged still folds, short lines included
    same = idx.reduce(
        "==== fixing violations ====\n1 fixable linting violations found\n" + before,
        archive_into({}),
        name=lambda source: source,
    )
    assert same is not None and "         my_id," not in same[0]


def test_a_truncation_after_repeat_markers_names_the_original() -> None:
    """The text passes that cut what the repeat markers left archive the original and number its lines:
    before, their stub named an archive of the intermediate text, markers and all (8 of 241 truncation
    stubs on the swe traces)."""
    from lightmem_plugin.config import ReductionConfig
    from lightmem_plugin.reduction.base import PassContext
    from lightmem_plugin.reduction.dedup import Repeats, apply
    from lightmem_plugin.reduction.reduce import reduce_text
    from lightmem_plugin.store.registry import content_key

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
    assert "[lightmem2 repeat: lines 1:40 of this output, as shown in an earlier output]" in shown
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


def test_no_repeat_points_into_outputs_the_host_compacted_away(tmp_path: Path) -> None:
    """Claude Code's auto-compact drops the oldest outputs: a marker saying "as shown in an earlier
    output" must then not stand for lines only those outputs showed (seen on the dev sessions)."""
    view = "".join(
        f"    {i:4}  def handler_{i}(request, response):  # line of the module\n" for i in range(60)
    )
    lm = LightMem(Config(), registry=Registry(tmp_path / "reg"))
    session = lm.session("s")
    head = [{"role": "user", "content": "fix the handlers"}]
    first = session.before_model_call([*head, *bash_turn("c1", "cat -n app.py", view)])
    again = session.before_model_call(
        [*head, *bash_turn("c1", "cat -n app.py", view), *bash_turn("c2", "cat -n app.py | head -60", view)]
    )
    assert first[2]["content"] == view
    assert "identical to" in again[4]["content"] or "repeat" in again[4]["content"]  # c1 still shows it
    summary = [
        {
            "role": "user",
            "content": "This session is being continued from a previous conversation. Summary: ...",
        }
    ]
    compacted = session.before_model_call([*summary, *bash_turn("c3", "sed -n '1,60p' app.py", view)])
    assert compacted[2]["content"] == view  # c1 and c2 are gone: the lines are shown again, whole
    later = session.before_model_call(
        [*summary, *bash_turn("c3", "sed -n '1,60p' app.py", view), *bash_turn("c4", "cat -n app.py", view)]
    )
    assert later[2]["content"] == view and later[4]["content"] != view  # c3 shows it now: c4 may refer to it


TRACE = (
    "Traceback (most recent call last):\n"
    + "".join(
        f'  File "/testbed/pkg/mod_{i}.py", line {10 + i}, in step_{i}\n    result = step_{i + 1}(value)\n'
        for i in range(6)
    )
    + "AttributeError: 'NoneType' object has no attribute 'shape'"
)


def test_a_rerun_that_fails_the_same_way_keeps_its_traceback_in_place() -> None:
    """A run of repeated lines never stands for an error line or a frame's code line: before, a re-run
    showed "[lightmem2 repeat: lines 2:14 ...]" where its frames and exception were (88 of the 426 swe
    outputs with error lines), which says neither which output nor that the error is still there."""
    from lightmem_plugin.reduction.error_lines import error_lines

    idx = LineIndex()
    setup = "".join(f"setting up fixture number {i} for the run\n" for i in range(12))
    idx.add(setup + TRACE)
    again = setup + TRACE
    out = idx.reduce(again, archive_into({}))
    assert out is not None
    shown = out[0].split("\n")
    assert (
        "[lightmem2 repeat: lines 1:12 of this output, as shown in an earlier output]" in shown
    )  # the setup still folds
    for line in error_lines(again):
        assert line in shown
    for i in range(6):
        assert f"    result = step_{i + 1}(value)" in shown
    # a mode that does not keep error lines folds the traceback too
    loose = idx.reduce(again, archive_into({}), errors=False)
    assert loose is not None and "AttributeError" not in loose[0]


def test_a_status_line_is_never_folded() -> None:
    idx = LineIndex()
    body = "".join(f"compiled module number {i} without warnings\n" for i in range(10))
    for status in ("Process exited with code 1", "<returncode>1</returncode>", "Exit code: 1"):
        idx.add(status + "\n" + body)
        out = idx.reduce(status + "\n" + body, archive_into({}), errors=False)
        assert out is not None and out[0].split("\n")[0] == status, out


def _warning(n: int) -> str:
    return (
        "     warning: using single-quoted strings to represent charlists is deprecated.\n"
        '     Use ~c"" if you indeed want a charlist or use "" instead.\n'
        "     │\n"
        f" {n} │       'abc{n}'\n"
        "     │       ~\n"
        "     │\n"
        f"     └─ lib/decoder.ex:{n}:82\n\n"
    )


def test_a_warning_whose_header_a_marker_stands_for_is_still_a_warning() -> None:
    """Seen on Claude Code: a dependency's compile warnings, shown once, came back in the next build.
    The repeat pass folded the first warning's header into a marker; judged on what was left, the
    warning's ``└─`` place line had no header above it, counted as an error line, and every warning's
    place was kept between stubs. Error lines are judged in the original, where the header is."""
    from dataclasses import replace

    from lightmem_plugin.config import ReductionConfig
    from lightmem_plugin.reduction.base import PassContext
    from lightmem_plugin.reduction.dedup import Repeats, apply
    from lightmem_plugin.reduction.reduce import reduce_text

    cfg = ReductionConfig()
    ctx = PassContext(cfg.table("normal"), cfg, archive_into({}))  # type: ignore[arg-type]
    repeats = Repeats()
    head = "==> toml\nCompiling 10 files (.ex)\n"
    repeats.lines.add(head + _warning(100))
    build = (
        head + "".join(_warning(100 + n) for n in range(60)) + "Generated toml app\n15 tests, 0 failures\n"
    )

    def inner(u: str, base: object = None) -> str:
        return reduce_text(u, ctx if base is None else replace(ctx, base=base))  # type: ignore[arg-type]

    shown = apply(repeats, "call_2", build, ctx, inner)
    assert "[lightmem2 repeat: lines " in shown  # the feature under test: the header went into a marker
    # head and tail, not the place of every warning kept with a stub for each message between them
    assert shown.count("└─ lib/decoder.ex:") <= 10 and "elided]" not in shown, shown
    assert shown.rstrip().endswith("15 tests, 0 failures")


def test_a_copy_of_an_output_that_showed_only_markers_names_the_call_that_shows_the_lines() -> None:
    """Seen in a review of the swe dumps: "identical to the output of tool call X", where X's output
    was only "lines 1:44 as shown in the output of tool call Y": two hops, two numberings. The copy
    now names Y itself; a copy of an output that shows its own lines still names that output."""
    from dataclasses import replace

    from lightmem_plugin.config import ReductionConfig
    from lightmem_plugin.reduction.base import PassContext
    from lightmem_plugin.reduction.dedup import Repeats, apply
    from lightmem_plugin.reduction.reduce import reduce_text

    cfg = ReductionConfig()
    ctx = PassContext(cfg.table("normal"), cfg, archive_into({}))  # type: ignore[arg-type]
    repeats = Repeats()

    def shown(call_id: str, text: str) -> str:
        def inner(u: str, base: object = None) -> str:
            return reduce_text(u, ctx if base is None else replace(ctx, base=base))  # type: ignore[arg-type]

        out = apply(repeats, call_id, text, ctx, inner)
        repeats.lines.add(out, call_id)
        return out

    shown("cally", CODE + "\na line of the first output that no later output has")
    hollow = shown("callx", CODE)
    assert hollow.startswith(
        "[lightmem2 repeat: lines 1:40 of this output, as shown in the output of tool call cally]"
    )
    copy = shown("callz", CODE)
    assert "identical to" not in copy and "as shown in the output of tool call cally]" in copy
    fresh = "\n".join(f"    value_{i} = compute({i}) + offset  # fresh {i}" for i in range(30))
    shown("callw", fresh)
    assert "identical to the output of tool call callw" in shown("callv", fresh)
