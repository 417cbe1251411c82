"""Retention: uses of earlier tool output, judged kept / recoverable / lost by the transformed prompt."""

from __future__ import annotations

import json
import random
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin.reduction.base import stub
from lightmem_plugin.retention import (
    Retention,
    RetentionTracker,
    measure_retention,
    output_texts,
)

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
    assert tracker.result() == Retention(uses=3, kept=3, recoverable=0, lost=0)


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
    assert tracker.result() == Retention(uses=3, kept=1, recoverable=1, lost=1)
    # Without the archive, the stubbed span is lost.
    assert measure_retention(zip(prompts, transformed, outputs2, strict=True)).lost == 2


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
