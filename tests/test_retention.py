"""Retention: uses of earlier tool output, judged kept / recoverable / lost by the transformed prompt."""

from __future__ import annotations

import json
import random
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin.measure.retention import (
    Recover,
    Retention,
    RetentionTracker,
    command_key,
    measure_retention,
    newest_outputs,
    output_texts,
    recover_charge,
    touched_lines,
)
from lightmem_plugin.reduction.base import stub

Msg = dict[str, Any]

FILE_VIEW = (
    "<returncode>0</returncode>\n<output>\n"
    "def compute_area(width, height):\n"
    '    """Area of the plot in square meters."""\n'
    "    return width * height * SCALE_FACTOR\n"
    "</output>"
)
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/testbed/app/models.py", line 88, in save\n'
    "ValueError: negative width is not allowed here"
)
KEY = "0123456789abcdef0123456789abcdef"


def call(text: str = "", **args: str) -> Msg:
    message: Msg = {"role": "assistant", "content": text}
    if args:
        message["tool_calls"] = [
            {"id": "c", "type": "function", "function": {"name": "bash", "arguments": json.dumps(args)}}
        ]
    return message


def tool(content: str) -> Msg:
    return {"role": "tool", "tool_call_id": "c", "content": content}


def session() -> tuple[list[list[Msg]], list[Msg]]:
    """Prompts and outputs of a 4-call session that views a file, hits an error, then reuses both."""
    head: list[Msg] = [
        {"role": "system", "content": "You are a coder."},
        {"role": "user", "content": "Fix it."},
    ]
    outputs = [
        call(command="cat app/area.py"),
        call("The function multiplies:", old="    return width * height * SCALE_FACTOR", new="    return 0"),
        call("Running it fails with ValueError: negative width is not allowed here", command="python t.py"),
        call('It still says: File "/testbed/app/models.py", line 88, in save'),
    ]
    prompts = [head]
    history = [*head, outputs[0], tool(FILE_VIEW)]
    prompts.append(history)
    history = [*history, outputs[1], tool(TRACEBACK)]
    prompts.append(history)
    prompts.append([*history, outputs[2], tool("ok")])
    return prompts, outputs


def test_vanilla_session_keeps_every_use() -> None:
    prompts, outputs = session()
    tracker = RetentionTracker()
    uses = [tracker.add_call(p, p, o) for p, o in zip(prompts, outputs, strict=True)]
    assert [len(u) for u in uses] == [0, 1, 1, 1]
    assert uses[1][0].span == "    return width * height * SCALE_FACTOR"  # maximal: indentation too
    assert uses[2][0].span == "ValueError: negative width is not allowed here"
    assert uses[3][0].span == ' File "/testbed/app/models.py", line 88, in save'
    assert tracker.result() == Retention(
        uses=3,
        kept=3,
        recoverable=0,
        lost=0,
        kept_lines=3,
        error_pairs=6,
        error_pairs_kept=6,
        task_uses=3,
        task_kept=3,
        task_kept_lines=3,
    )


def test_kept_recoverable_and_lost() -> None:
    """File view replaced by a stub at call 2 (recoverable), traceback dropped at call 3 (lost)."""
    prompts, outputs = session()
    stubbed = tool(stub(KEY, len(FILE_VIEW)))
    transformed = [
        prompts[0],
        prompts[1],
        [m if m["content"] != FILE_VIEW else stubbed for m in prompts[2]],
        [m for m in prompts[3] if m["content"] != TRACEBACK],
    ]
    calls = list(zip(prompts, transformed, outputs, strict=True))
    tracker = RetentionTracker(lookup={KEY: FILE_VIEW}.get)
    verdicts = [[u.verdict for u in tracker.add_call(*c)] for c in calls]
    assert verdicts == [[], ["kept"], ["kept"], ["lost"]]
    assert tracker.lost_uses[0].call == 3
    result = tracker.result()
    assert result.kept_fraction == pytest.approx(2 / 3)
    assert result.lost_fraction == pytest.approx(1 / 3)

    # Reuse the file view at call 2 as well: now it must come back through the stub.
    outputs2 = [*outputs[:2], call('Its docstring: """Area of the plot in square meters."""'), outputs[3]]
    tracker = RetentionTracker(lookup={KEY: FILE_VIEW}.get)
    verdicts = [
        [u.verdict for u in tracker.add_call(p, t, o)]
        for p, t, o in zip(prompts, transformed, outputs2, strict=True)
    ]
    assert verdicts == [[], ["kept"], ["recoverable"], ["lost"]]
    result = tracker.result()
    assert (result.uses, result.kept, result.recoverable, result.lost) == (3, 1, 1, 1)
    assert (result.kept_lines, result.recoverable_lines, result.lost_lines) == (1, 1, 1)
    # the traceback's three error lines: shown at call 2, dropped at call 3
    assert (result.error_pairs, result.error_pairs_kept) == (6, 3)
    # Without the archive, the stubbed span is lost.
    assert measure_retention(zip(prompts, transformed, outputs2, strict=True)).lost == 2


def test_a_span_from_an_archived_bodys_first_line_is_recoverable() -> None:
    """A heredoc quoting a file view from its first line shares the newline before it with the
    output (``<output>`` then a newline); the archive holds the body alone, which starts at that
    line. The use is recoverable (it read as lost while every byte was in the archive)."""
    prompts, _ = session()
    body = FILE_VIEW.split("<output>\n", 1)[1].rsplit("</output>", 1)[0]
    stubbed = tool(f"<returncode>0</returncode>\n<output>\n{stub(KEY, len(body))}\n</output>")
    transformed = [m if m["content"] != FILE_VIEW else stubbed for m in prompts[2]]
    rewrite = call(command="cat > app/area.py << 'EOF'\n" + body + "EOF")
    tracker = RetentionTracker(lookup={KEY: body}.get)
    tracker.add_call(prompts[0], prompts[0], call(command="cat app/area.py"))
    tracker.add_call(prompts[1], prompts[1], call("Looking."))
    uses = tracker.add_call(prompts[2], transformed, rewrite)
    assert [u.span[0] for u in uses] == ["\n"]  # the span starts at the newline before the body
    assert [u.verdict for u in uses] == ["recoverable"]
    assert uses[0].artifact == KEY
    # no archive named: lost, as before
    assert [u.verdict for u in RetentionTracker().add_call(prompts[2], transformed, rewrite)] == ["lost"]


@pytest.mark.parametrize(
    ("out", "uses"),
    [
        ("return width * height", 0),  # 21 chars, not a whole line: too short
        ("def compute_area(width, height):", 1),  # a whole line of 16+ chars (32 here)
        ("x = 1\ndef compute_area(width, height):\n", 1),
        ('"""Area of the plot in square meters."""', 1),  # whole line, indentation stripped
        ("we compute_area(width, height) here", 0),  # 29 shared chars, not a line
        ('calls compute_area(width, height):\n    """Area of the plot', 1),  # 32+ chars across lines
        ("<returncode>1</returncode>", 0),
    ],
)
def test_what_counts_as_a_use(out: str, uses: int) -> None:
    tracker = RetentionTracker()
    prompt = [tool(FILE_VIEW)]
    assert len(tracker.add_call(prompt, prompt, call(out))) == uses


def test_arguments_are_decoded_before_matching() -> None:
    """A reused span with quotes and newlines is escaped in the JSON arguments; decoding finds it."""
    span = 'def compute_area(width, height):\n    """Area of the plot in square meters."""'
    output = call(old=span)
    assert span in output_texts(output)
    assert span not in output["tool_calls"][0]["function"]["arguments"]
    tracker = RetentionTracker()
    [use] = tracker.add_call([tool(FILE_VIEW)], [tool(FILE_VIEW)], output)
    assert use.span == span


def test_content_parts_and_no_uses() -> None:
    parts_output = {
        "role": "assistant",
        "content": [{"type": "text", "text": "def compute_area(width, height):"}],
    }
    prompt = [tool([{"type": "text", "text": FILE_VIEW}])]  # type: ignore[arg-type]
    tracker = RetentionTracker()
    assert [u.verdict for u in tracker.add_call(prompt, [], parts_output)] == ["lost"]
    empty = RetentionTracker().result()
    assert (empty.uses, empty.kept_fraction, empty.lost_fraction) == (0, 1.0, 0.0)


def test_only_earlier_tool_outputs_count() -> None:
    """A span of the user's message or of a tool output the call has not seen yet is not a use."""
    user = {"role": "user", "content": "Please rename compute_area(width, height) to area_of(width, height)."}
    tracker = RetentionTracker()
    assert (
        tracker.add_call([user], [user], call("rename compute_area(width, height) to area_of(width, height)"))
        == []
    )


texts = st.text(alphabet="abcdefgh ij\n", min_size=40, max_size=300)


@settings(max_examples=80, deadline=None)
@given(
    outputs=st.lists(texts, min_size=1, max_size=4),
    picks=st.lists(st.tuples(st.integers(0, 300), st.integers(32, 80)), max_size=4),
)
def test_vanilla_keeps_stubs_recover_drops_lose(outputs: list[str], picks: list[tuple[int, int]]) -> None:
    """Properties: an unchanged prompt keeps every use; stubbing every output makes every use
    recoverable; dropping them loses every use."""
    tools = [tool(t) for t in outputs]
    joined = "\n".join(outputs)
    quoted = " | ".join(joined[a % len(joined) : a % len(joined) + n] for a, n in picks)
    out = call(quoted)
    keys = {f"{i:032x}": t for i, t in enumerate(outputs)}
    stubs = [tool(stub(k, len(t))) for k, t in keys.items()]
    base = RetentionTracker().add_call(tools, tools, out)
    assert all(u.verdict == "kept" for u in base)
    stubbed = RetentionTracker(keys.get).add_call(tools, stubs, out)
    assert [u.verdict for u in stubbed] == ["recoverable"] * len(base)
    dropped = RetentionTracker().add_call(tools, [], out)
    assert [u.verdict for u in dropped] == ["lost"] * len(base)


@settings(max_examples=80, deadline=None)
@given(
    source=texts,
    noise=st.text(alphabet="xyz", max_size=20),
    start=st.integers(0, 300),
    length=st.integers(1, 60),
)
def test_every_shared_substring_of_32_is_found(source: str, noise: str, start: int, length: int) -> None:
    """The aligned-window index misses no common substring of 32+ chars (checked by brute force)."""
    start %= len(source)
    out = noise + source[start : start + length] + noise
    shared = any(out[i : i + 32] in source for i in range(len(out) - 31))
    lines = any(
        len(x.strip()) >= 16 and x.strip() in {y.strip() for y in source.split("\n")} for x in out.split("\n")
    )
    found = RetentionTracker().add_call([tool(source)], [tool(source)], call(out))
    assert bool(found) == (shared or lines)
    for use in found:
        assert use.span in source and use.span in out


def test_any_offset_of_a_32_char_span_is_found() -> None:
    """The guarantee behind the 17-char windows at stride 16, at every alignment of the span."""
    rng = random.Random(7)
    source = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(400))
    tracker = RetentionTracker()
    tracker.add_call([tool(source)], [], call(""))
    for start in range(0, 48):
        span = source[start : start + 32]
        [use] = tracker.add_call([tool(source)], [tool(source)], call(f"~{span}~"))
        assert use.span == span
        assert tracker.add_call([tool(source)], [], call(f"~{span[:31]}~")) == []


# -- by line, error lines, recovers -------------------------------------------------------------

FRAME = '  File "/testbed/django/db/models/base.py", line 543, in save_base'
LONG_TRACEBACK = "\n".join(
    [
        "<returncode>1</returncode>",
        "<output>",
        "Traceback (most recent call last):",
        *(
            f'  File "/testbed/django/core/handlers/step{i}.py", line {10 + i}, in run\n    step_{i}()'
            for i in range(6)
        ),
        FRAME,
        "    updated = self._save_table(raw, cls, force_insert)",
        '  File "/testbed/django/db/models/sql/compiler.py", line 1428, in execute_sql',
        "    cursor.execute(sql, params)",
        "django.db.utils.IntegrityError: NOT NULL constraint failed: app_item.name",
        "</output>",
    ]
)


def head_tail_cut(text: str, head: int, tail: int, key: str) -> str:
    """A head/tail truncation that may cut inside a line, the way a char budget does."""
    return f"{text[:head]}\n{stub(key, len(text) - head - tail)}\n{text[-tail:]}"


def test_head_tail_cut_frame_is_kept_by_span_but_not_by_line() -> None:
    """The cut keeps ``File ".../base.py", line 5`` of the frame and drops the rest of it: the span the
    agent quotes is in the prompt, the line it acted on (line 543) is not; the frame is an error line
    of the newest output of its command, so error_lines_kept drops below 1."""
    cut = LONG_TRACEBACK.index(FRAME) + FRAME.index(", line 543") + len(", line 5")
    tail = len(LONG_TRACEBACK) - LONG_TRACEBACK.index("django.db.utils.IntegrityError")
    reduced = head_tail_cut(LONG_TRACEBACK, cut, tail, KEY)
    assert '/testbed/django/db/models/base.py", line 5\n[lightmem2: ' in reduced
    head: list[Msg] = [{"role": "user", "content": "Save the item."}]
    first = call(command="python manage.py save_item")
    prompt = [*head, first, tool(LONG_TRACEBACK)]
    shown = [*head, first, tool(reduced)]
    quote = call('The failing frame is File "/testbed/django/db/models/base.py", line 5')
    tracker = RetentionTracker(lookup={KEY: LONG_TRACEBACK}.get)
    tracker.add_call(head, head, first)
    [use] = tracker.add_call(prompt, shown, quote)
    assert use.verdict == "kept"
    assert use.line_verdict == "recoverable"
    assert use.lines == (FRAME,)
    result = tracker.result()
    assert (result.kept, result.kept_lines, result.recoverable_lines) == (1, 0, 1)
    assert result.error_pairs == 10  # the traceback line, 8 frames and the exception
    assert 0 < result.error_lines_kept < 1
    assert result.error_pairs_kept == 8  # all but the cut frame (line 543) and the one after it
    assert tracker.recovers == []  # kept by span: no round trip is charged
    # Without the archive the missing line is lost, by line only.
    [use] = RetentionTracker().add_call(prompt, shown, quote)
    assert (use.verdict, use.line_verdict) == ("kept", "lost")


def test_error_lines_count_only_while_their_output_is_the_newest_of_its_command() -> None:
    """A rerun of the same command supersedes the old traceback: dropping the old one costs nothing;
    a different command's traceback still counts."""
    run, other = call(command="python t.py"), call(command="python u.py")
    fixed = tool("<returncode>0</returncode>\n<output>\nok\n</output>")
    prompt = [run, tool(TRACEBACK), other, tool(TRACEBACK.replace("88", "89")), run, fixed]
    shown = [run, tool("[lightmem2: dropped]"), other, tool(TRACEBACK.replace("88", "89")), run, fixed]
    tracker = RetentionTracker()
    tracker.add_call(prompt, shown, call("next"))
    assert tracker.result().error_pairs == 3
    assert tracker.result().error_lines_kept == 1.0


def test_newest_outputs_by_tool_call_id_and_by_position() -> None:
    cc = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {"name": "Read", "arguments": '{"file_path": "x.py"}'},
            },
            {
                "id": "b",
                "type": "function",
                "function": {"name": "Bash", "arguments": '{"command": "ls", "description": "list"}'},
            },
        ],
    }
    ra = {"role": "tool", "tool_call_id": "a", "content": "x"}
    rb = {"role": "tool", "tool_call_id": "b", "content": "y"}
    newest = newest_outputs([cc, rb, ra])
    assert newest == {'Read\x00{"file_path": "x.py"}': ra, "Bash\x00ls": rb}
    swe = [
        call(command="ls"),
        {"role": "tool", "content": "1"},
        call(command="ls"),
        {"role": "tool", "content": "2"},
    ]
    assert newest_outputs(swe) == {"bash\x00ls": swe[3]}
    assert command_key(cc["tool_calls"][1]) == command_key(
        {"function": {"name": "Bash", "arguments": '{"command": "ls", "description": "other"}'}}
    )


@pytest.mark.parametrize(
    ("start", "length", "first", "lines"),
    [
        (0, 3, 0, ("abc",)),
        (1, 6, 0, ("abc", "defg")),
        (3, 5, 1, ("defg",)),  # a leading newline ends the line before: not touched
        (4, 5, 1, ("defg",)),  # a trailing newline ends the span's own line
        (9, 2, 2, ("hi",)),
    ],
)
def test_touched_lines(start: int, length: int, first: int, lines: tuple[str, ...]) -> None:
    assert touched_lines("abc\ndefg\nhi", start, length) == (first, lines)


@pytest.mark.parametrize(
    ("start", "length", "first", "lines"),
    [
        (0, 17, 0, ("    r = get(q)",)),  # ends in the next line's indentation: that line is not used
        (13, 17, 0, ("    r = get(q)", "           ^^^^^^")),  # a char of each line: both used
        (14, 16, 1, ("           ^^^^^^",)),  # starts at the newline and indentation: one line
        (15, 8, 1, ()),  # nothing but indentation: no line is used
    ],
)
def test_whitespace_at_a_span_end_touches_no_line(
    start: int, length: int, first: int, lines: tuple[str, ...]
) -> None:
    assert touched_lines("    r = get(q)\n           ^^^^^^\n", start, length) == (first, lines)


def test_recoverable_use_is_a_recover_once_per_artifact_and_range() -> None:
    prompts, _ = session()
    stubbed = tool(stub(KEY, len(FILE_VIEW)))
    quote = call('Its docstring: """Area of the plot in square meters."""')
    transformed = [[m if m.get("content") != FILE_VIEW else stubbed for m in p] for p in prompts]
    tracker = RetentionTracker(lookup={KEY: FILE_VIEW}.get)
    for p, t in zip(prompts, transformed, strict=True):
        tracker.add_call(p, t, quote)
    assert tracker.result().recoverable == 3  # calls 1, 2 and 3 each use it
    assert tracker.recovers == [Recover(1, KEY, '    """Area of the plot in square meters."""')]


def test_recover_charge_formula() -> None:
    assert recover_charge([], 10) == 0
    # 40 + 10 tokens at call 2 of 5: paid once as misses, then 0.1 per token on calls 3 and 4
    assert recover_charge([(2, 10)], 5) == pytest.approx(50 * (1 + 0.1 * 2))
    assert recover_charge([(4, 10)], 5) == pytest.approx(50)


def test_a_recover_is_charged_until_it_left_the_context() -> None:
    """A recover made in a task that was later archived whole is re-read only until then."""
    whole = recover_charge([(2, 10)], 20)
    assert recover_charge([(2, 10, None)], 20) == pytest.approx(whole)
    assert recover_charge([(2, 10, 6)], 20) == pytest.approx(50 * (1 + 0.1 * 3))
    assert recover_charge([(2, 10, 6)], 20) < whole
    assert recover_charge([(2, 10, 40)], 20) == pytest.approx(whole)  # never past the session's end
