"""The e2e wire audit (tests/e2e/wire_audit.py) finds each fault it exists for.

The wire-level end-to-end tests on the real hosts pass only when the audit finds nothing, so the audit
itself must be shown to fail: each case here is a request pair with one planted fault (seen before in
a real host, most of them) and the fault the audit must name.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))

import wire_audit

from lightmem_plugin.reduction.dedup import reference

KEY = "0123456789abcdef0123456789abcdef"
ORIGINAL = "".join(f"row {i}: compiled module ok\n" for i in range(1, 41))
STUB = f"[lightmem2: 1,000 chars archived as {KEY}; recover with lightmem2_recover(key)]"
REDUCED = "row 1: compiled module ok\n" + STUB + "\nrow 40: compiled module ok\n"


def chat(*outputs: tuple[str, str]) -> dict[str, Any]:
    """A chat request: the goal, then per (call id, output) an assistant call and its result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for call_id, text in outputs:
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call_id, "function": {"name": "exec", "arguments": '{"command":"seq"}'}}
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    return {"messages": messages}


def recover(key: str) -> str | None:
    return ORIGINAL if key == KEY else None


def faults(with_lm: list[dict[str, Any]], without: list[dict[str, Any]], **kw: Any) -> list[str]:
    return wire_audit.audit("chat", with_lm, without, recover, **kw).faults


def test_a_run_reduced_with_recoverable_stubs_passes() -> None:
    without = [chat(("c1", ORIGINAL)), chat(("c1", ORIGINAL), ("c2", "small"))]
    with_lm = [chat(("c1", REDUCED)), chat(("c1", REDUCED), ("c2", "small"))]
    result = wire_audit.audit("chat", with_lm, without, recover)
    assert result.faults == []
    assert (result.stubbed, result.verbatim, result.recovered) == (2, 1, 2)


def test_an_output_replaced_by_a_reference_to_itself_is_a_fault() -> None:
    selfref = reference("c1", KEY, 1000)
    found = faults([chat(("c1", selfref))], [chat(("c1", ORIGINAL))])
    assert any("refers to its own call" in f for f in found), found


def test_a_repeat_of_an_earlier_call_passes_and_of_an_unknown_call_fails() -> None:
    repeat = reference("c1", KEY, 1000)
    without = [chat(("c1", ORIGINAL), ("c2", ORIGINAL))]
    assert faults([chat(("c1", ORIGINAL), ("c2", repeat))], without) == []
    ghost = repeat.replace("call c1", "call c9")
    found = faults([chat(("c1", ORIGINAL), ("c2", ghost))], without)
    assert any("not earlier in the request" in f for f in found), found


def test_a_success_shown_as_a_failure_is_a_fault() -> None:
    plain = "Script completed\nExit code: 0\n" + ORIGINAL
    shown = "Script failed\nScript error: " + REDUCED
    found = faults([chat(("c1", shown))], [chat(("c1", plain))])
    assert any("success/failure differs" in f for f in found), found


def test_a_changed_exit_code_is_a_fault() -> None:
    found = faults([chat(("c1", "Exit code: 0\n" + REDUCED))], [chat(("c1", "Exit code: 3\n" + ORIGINAL))])
    assert any("success/failure differs" in f for f in found), found


def test_an_output_changed_without_a_stub_is_a_fault() -> None:
    found = faults([chat(("c1", ORIGINAL[:-40]))], [chat(("c1", ORIGINAL))])
    assert any("changed with no stub" in f for f in found), found


def test_a_kept_line_that_is_not_in_the_output_is_a_fault() -> None:
    altered = REDUCED.replace("row 40: compiled module ok", "row 40: compiled module ok   ".rstrip() + "!")
    found = faults([chat(("c1", altered))], [chat(("c1", ORIGINAL))])
    assert any("kept lines are not lines of the output" in f for f in found), found


def test_a_key_that_recovers_another_text_or_nothing_is_a_fault() -> None:
    other = REDUCED.replace(KEY, "f" * 32)
    found = faults([chat(("c1", other))], [chat(("c1", ORIGINAL))])
    assert any("recovers nothing" in f for f in found), found
    found = faults([chat(("c1", REDUCED))], [chat(("c1", "something else entirely\n" * 50))])
    assert any("not this output" in f for f in found), found


def test_a_request_that_does_not_extend_the_last_is_a_fault_unless_it_is_a_batch() -> None:
    first = chat(("c1", REDUCED))
    second = chat(("c1", REDUCED), ("c2", "small"))
    second["messages"][0]["content"] = "go, changed"
    without = [chat(("c1", ORIGINAL)), chat(("c1", ORIGINAL), ("c2", "small"))]
    found = faults([first, second], without)
    assert any("does not extend request 1 (differs at message 0)" in f for f in found), found
    assert faults([first, second], without, batches=[1]) == []


def test_a_text_block_and_its_string_are_the_same_anthropic_history() -> None:
    """Claude Code sends the message holding a cache breakpoint as one text block, the same message
    as a string on the next call: the provider reads both alike, a changed text is still a break."""

    def body(system: Any, *results: str) -> dict[str, Any]:
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "go"},
            {"role": "system", "content": system},
        ]
        for n, text in enumerate(results):
            call = {"type": "tool_use", "id": f"t{n}", "name": "Bash"}
            result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": text}
            messages += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
        return {"messages": messages}

    marked = [{"type": "text", "text": "env", "cache_control": {"type": "ephemeral"}}]
    first, second = body(marked), body("env", "small")
    assert wire_audit.audit("anthropic", [first, second], [first, second], recover).faults == []
    changed = body("env, changed", "small")
    found = wire_audit.audit("anthropic", [first, changed], [first, changed], recover).faults
    assert any("does not extend request 1 (differs at message 1)" in f for f in found), found


def test_a_transient_last_message_is_left_out_of_the_prefix_check() -> None:
    def with_context(body: dict[str, Any], n: int) -> dict[str, Any]:
        out = copy.deepcopy(body)
        out["messages"].append({"role": "user", "content": f"runtime context {n}"})
        return out

    plain = [chat(("c1", ORIGINAL)), chat(("c1", ORIGINAL), ("c2", "small"))]
    got = [with_context(chat(("c1", REDUCED)), 1), with_context(chat(("c1", REDUCED), ("c2", "small")), 2)]
    assert faults(got, plain, transient_tail=1) == []
    assert any("does not extend" in f for f in faults(got, plain))


def test_a_lost_call_is_a_fault() -> None:
    found = faults([chat(("c1", REDUCED))], [chat(("c1", ORIGINAL)), chat(("c1", ORIGINAL))])
    assert any("1 model calls with lightmem2, 2 without" in f for f in found), found


@pytest.mark.parametrize(
    ("row", "fault"),
    [
        ({"realInputTokens": 1000, "realBaselineTokens": 1500}, None),
        ({"realInputTokens": 1000, "realBaselineTokens": 1529}, None),
        ({"realInputTokens": 999, "realBaselineTokens": 1500}, "tokens sent 999"),
        ({"realInputTokens": 1000, "realBaselineTokens": 1000}, "without lightmem2 1000"),
        ({"realInputTokens": 1000, "realBaselineTokens": None}, "without lightmem2 None"),
    ],
)
def test_the_ledger_audit_holds_each_row_to_the_provider_counts(
    row: dict[str, Any], fault: str | None
) -> None:
    found = wire_audit.audit_ledger([row], [{"prompt": 1000}], [{"prompt": 1500}]).faults
    assert (found == []) if fault is None else any(fault in f for f in found), found


def test_a_missing_ledger_row_is_a_fault() -> None:
    found = wire_audit.audit_ledger([], [{"prompt": 10}], [{"prompt": 20}]).faults
    assert found == ["ledger: 0 rows for 1 model calls"]


def test_tool_outputs_reads_each_wire() -> None:
    anthropic = {
        "messages": [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"c": 1}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": [{"type": "text", "text": "boom"}],
                    }
                ],
            },
        ]
    }
    responses = {
        "input": [
            {"type": "function_call", "call_id": "r1", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "r1", "output": "done"},
        ]
    }
    (a,) = wire_audit.tool_outputs("anthropic", anthropic)
    assert (a.call_id, a.name, a.text, a.is_error) == ("t1", "Bash", "boom", True)
    (r,) = wire_audit.tool_outputs("responses", responses)
    assert (r.call_id, r.name, r.text, r.is_error) == ("r1", "exec_command", "done", None)


def test_the_scripted_session_has_what_the_issue_asks_for() -> None:
    steps = wire_audit.STEPS
    assert len(steps) + 1 >= 10  # model calls: one per tool call, then the final answer
    commands = [s.command for s in steps if s.kind == "shell"]
    assert any(commands.count(c) >= 2 for c in commands)  # one large output repeated identically
    assert any(s.kind == "read" for s in steps)
    # a short output of lines the first listing showed (a marker naming that call, in every host)
    assert wire_audit.HEAD_AGAIN in commands and commands.index(wire_audit.HEAD_AGAIN) > commands.index(
        wire_audit.LISTING
    )
    script = wire_audit.check_script()
    assert "exit 3" in script and len(script) > 4000
    assert len(wire_audit.settings_module()) > 4000


def test_a_line_marker_passes_beside_a_keyed_stub_and_fails_alone() -> None:
    """Seen on OpenClaw: head, tail and error lines kept under one keyed stub, each elided range an
    in-place "[lightmem2: lines A:B elided]" (keyless by design, recovered through that stub)."""
    lines = ORIGINAL.split("\n")
    marked = STUB + "\n" + "\n".join([*lines[:3], "[lightmem2: lines 4:37 elided]", *lines[37:]])
    assert faults([chat(("c1", marked))], [chat(("c1", ORIGINAL))]) == []
    alone = "\n".join([*lines[:3], "[lightmem2: lines 4:37 elided]", *lines[37:]])
    found = faults([chat(("c1", alone))], [chat(("c1", ORIGINAL))])
    assert any("no keyed stub" in f for f in found), found


def test_a_line_marker_that_names_a_call_must_name_an_earlier_one_showing_its_lines() -> None:
    lines = ORIGINAL.split("\n")
    named = (
        STUB
        + "\n"
        + "\n".join(
            [
                "[lightmem2 repeat: lines 1:37 of this output, as shown in the output of tool call c1]",
                *lines[37:],
            ]
        )
    )
    without = [chat(("c1", ORIGINAL), ("c2", ORIGINAL))]
    checked = wire_audit.audit("chat", [chat(("c1", ORIGINAL), ("c2", named))], without, recover)
    assert checked.faults == [] and checked.named_marks == 1
    found = faults([chat(("c1", ORIGINAL), ("c2", named.replace("call c1", "call c2")))], without)
    assert any("names its own call" in f for f in found), found
    found = faults([chat(("c1", ORIGINAL), ("c2", named.replace("call c1", "call c9")))], without)
    assert any("names a call not earlier in the request" in f for f in found), found
    # two calls that together show the rows
    half = "".join(lines[i] + "\n" for i in range(20))
    rest = "".join(lines[i] + "\n" for i in range(20, 40))
    two = named.replace("the output of tool call c1", "the outputs of tool calls c0, c1")
    checked = wire_audit.audit(
        "chat",
        [chat(("c0", half), ("c1", rest), ("c2", two))],
        [chat(("c0", half), ("c1", rest), ("c2", ORIGINAL))],
        recover,
    )
    assert checked.faults == [] and checked.named_marks == 1, checked.faults
    found = faults(
        [chat(("c1", rest), ("c2", two.replace("c0, c1", "c1, c2")))], [chat(("c1", rest), ("c2", ORIGINAL))]
    )
    assert any("names its own call" in f for f in found), found
    # c1 shows only the first rows: the marker says it shows rows 1-37
    partial = "".join(lines[i] + "\n" for i in range(10))
    found = faults([chat(("c1", partial), ("c2", named))], [chat(("c1", partial), ("c2", ORIGINAL))])
    assert any("but that output lacks 'row 11: compiled module ok'" in f for f in found), found


def test_a_repeat_that_names_no_call_must_repeat_an_earlier_output() -> None:
    unnamed = reference(None, KEY, 1000)
    without = [chat(("c1", ORIGINAL), ("c2", ORIGINAL))]
    assert faults([chat(("c1", ORIGINAL), ("c2", unnamed))], without) == []
    assert faults([chat(("c1", REDUCED), ("c2", unnamed))], without) == []  # the first copy reduced: same key
    # the first sighting of an output made a repeat of itself: nothing earlier to point at
    found = faults([chat(("c2", unnamed))], [chat(("c2", ORIGINAL))])
    assert any("a repeat of no earlier output in the request" in f for f in found), found
    found = faults(
        [chat(("c1", "other output"), ("c2", unnamed))], [chat(("c1", "other output"), ("c2", ORIGINAL))]
    )
    assert any("a repeat of no earlier output in the request" in f for f in found), found


# -- Codex: code-mode results, run-to-run noise, the provider's count, lightmem2's footprint -------
def code_mode(call_id: str, exit_code: int, output: str, wall: str = "0.4") -> dict[str, Any]:
    """A Responses request with one Codex code-mode call: the status part, then the result object."""
    result = json.dumps(
        {"chunk_id": f"c{wall}", "wall_time_seconds": float(wall), "exit_code": exit_code, "output": output}
    )
    parts = [{"type": "input_text", "text": f"Script completed\nWall time {wall} seconds\nOutput:\n"}]
    return {
        "input": [
            {"type": "custom_tool_call", "call_id": call_id, "name": "exec", "input": "text(1)"},
            {
                "type": "custom_tool_call_output",
                "call_id": call_id,
                "output": [*parts, {"type": "input_text", "text": result}],
            },
        ]
    }


def test_a_code_mode_result_is_compared_by_its_decoded_output() -> None:
    """The stub sits inside the object's JSON string; its key recovers the decoded text, and a wall
    time or chunk id that differs from run to run is no change."""
    got = [code_mode("c1", 0, REDUCED, wall="0.2")]
    plain = [code_mode("c1", 0, ORIGINAL)]
    result = wire_audit.audit("responses", got, plain, recover)
    assert result.faults == [] and result.recovered == 1
    assert (
        wire_audit.audit(
            "responses", [code_mode("c1", 0, "x", "0.2")], [code_mode("c1", 0, "x")], recover
        ).verbatim
        == 1
    )


def test_a_code_mode_result_with_another_exit_code_or_line_is_still_a_fault() -> None:
    found = wire_audit.audit(
        "responses", [code_mode("c1", 3, REDUCED)], [code_mode("c1", 0, ORIGINAL)], recover
    ).faults
    assert any("success/failure differs" in f for f in found), found
    found = wire_audit.audit(
        "responses",
        [code_mode("c1", 0, REDUCED + "row 41: invented\n")],
        [code_mode("c1", 0, ORIGINAL)],
        recover,
    ).faults
    assert any("not lines of the output" in f for f in found), found


def test_the_provider_count_undoes_json_escapes() -> None:
    """A provider tokenises the strings, not their JSON: a text that holds escapes of its own (a
    code-mode result) counts as the text, not as its rendering."""
    count = wire_audit.o200k_counter()
    text = json.dumps({"exit_code": 0, "output": ORIGINAL})
    from lightmem_plugin.tokens import count_tokens

    assert count(json.dumps(text)) == count_tokens(f'"{text}"') < count_tokens(json.dumps(text))
