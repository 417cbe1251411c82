"""Codex's envelopes around a command's output: header bytes kept, only the body reduced and archived."""

from __future__ import annotations

import json

import pytest

from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction import envelope
from lightmem_plugin.reduction.base import stub_keys
from lightmem_plugin.reduction.kinds import ToolCall

BODY = "".join(f"row {i}: compiled module ok\n" for i in range(1, 401))
HEADER = "Chunk ID: c23dba\nWall time: 0.0470 seconds\nProcess exited with code 3\nOriginal token count: 1513\nOutput:\n"
# as JavaScript's JSON.stringify writes Codex's code-mode result (a number Python would print as 5.498e-06)
CODE_MODE = (
    '{"chunk_id":"86557f","wall_time_seconds":0.000005498,"exit_code":3,"original_token_count":1513,"output":'
    + json.dumps(BODY)
    + "}"
)

# the model reads the host's call ids (a repeat reference names them; with short call ids, the default,
# an output ingested outside a request names no call: see test_call_ids)
HOST_IDS = Config.model_validate({"stabilizer": {"shortCallIds": False}})


def test_text_header_is_kept_and_the_body_reduced() -> None:
    session = LightMem(Config()).session("s")
    out = session.ingest_tool_result("call_1", HEADER + BODY)
    assert out.startswith(HEADER) and len(out) < len(BODY) // 2
    keys = stub_keys(out)
    assert keys and session.plugin.registry.recover(keys[0]) == BODY


def test_code_mode_json_keeps_every_field_but_output() -> None:
    session = LightMem(Config()).session("s")
    out = session.ingest_tool_result("call_1#1", CODE_MODE)
    prefix = CODE_MODE[: CODE_MODE.index('"output":')]
    assert out.startswith(prefix) and out.endswith('"}') and len(out) < len(CODE_MODE) // 2
    value = json.loads(out)["output"]
    assert value.startswith("row 1: compiled module ok\n")
    assert session.plugin.registry.recover(stub_keys(value)[0]) == BODY


def test_a_repeat_keeps_its_own_header() -> None:
    session = LightMem(HOST_IDS.model_copy(update={"mode": "conservative"})).session("s")
    small = "".join(f"line {i} of the listing\n" for i in range(30))
    session.ingest_tool_result("call_1", HEADER + small)
    again = HEADER.replace("code 3", "code 0") + small
    out = session.ingest_tool_result("call_2", again)
    assert (
        out.startswith(HEADER.replace("code 3", "code 0"))
        and "identical to the output of tool call call_1" in out
    )


@pytest.mark.parametrize(
    "text",
    [
        "Output:\n" + BODY,  # no header line
        "lowercase header\nOutput:\n" + BODY,
        '{"output":' + json.dumps(BODY) + "}",  # no Codex field
        '{"exit_code":0,"output":' + json.dumps(BODY) + "",  # not JSON
        BODY,
    ],
)
def test_other_text_is_reduced_whole(text: str) -> None:
    assert envelope.apply(text, lambda b: "R") == "R"


def test_output_anywhere_in_the_object_is_replaced_in_place() -> None:
    text = '{"exit_code":0,"output":"abc", "x":1.50}'
    assert envelope.apply(text, str.upper) == '{"exit_code":0,"output":"ABC", "x":1.50}'


def test_unchanged_body_returns_the_text_itself() -> None:
    assert envelope.apply(HEADER + "ok\n", lambda b: b) == HEADER + "ok\n"
    assert envelope.apply(CODE_MODE, lambda b: b) == CODE_MODE


def test_a_repeated_code_mode_result_names_the_call_the_model_knows() -> None:
    """A code-mode output is a list of parts (the status line, then the result object), reduced as
    ``call#1``; the repeat must name ``call_1``, the call id in the model's history, not ``call_1#1``."""
    session = LightMem(HOST_IDS).session("s")
    session.ingest_tool_result("call_1", "Script completed\nWall time 0.4 seconds\nOutput:\n")
    session.ingest_tool_result("call_1#1", CODE_MODE)
    again = session.ingest_tool_result("call_2#1", CODE_MODE.replace("86557f", "4087a6"))
    value = json.loads(again)["output"]
    assert value.startswith("[lightmem2: identical to the output of tool call call_1 ("), value
    # the same text in two parts of one call is no repeat: the reference would name the call itself
    twice = "".join(f"line {i} printed twice\n" for i in range(60))
    session.ingest_tool_result("call_3", twice)
    assert "identical to the output" not in session.ingest_tool_result("call_3#1", twice)


# mini-swe-agent's frame around what a bash command printed (the swe traces)
VIEW = "".join(f"    def method_{i}(self, value):  # line {i} of the module\n" for i in range(30))


def _framed(rc: int, body: str) -> str:
    return f"<returncode>{rc}</returncode>\n<output>\n{body}</output>"


def test_xml_frame_keeps_the_return_code_when_the_body_repeats_earlier_lines() -> None:
    """Before, the whole text went to the repeat pass: ``<returncode>1</returncode>`` was a line seen
    many times before, so it was folded into ``[lightmem2 repeat: lines 1:33 ...]`` with the body and
    the model could not tell a failed command from one that worked (484 of 4,598 swe outputs)."""
    from lightmem_plugin.measure.fidelity import changed_lines

    session = LightMem(Config()).session("s")
    session.ingest_tool_result("call_1", _framed(0, "header of the first view\n" + VIEW))
    failed = _framed(1, VIEW + "tail line printed only by the second run\n")
    out = session.ingest_tool_result("call_2", failed)
    assert out.startswith("<returncode>1</returncode>\n<output>\n"), out
    assert "\ntail line printed only by the second run\n[lightmem2: " in out and out.endswith(")]\n</output>")
    assert "[lightmem2 repeat: lines 1:30 of this output, as shown in an earlier output]" in out
    assert changed_lines(failed, out) == []  # no blank line or merged closing tag of ours
    body = failed[len("<returncode>1</returncode>\n<output>\n") : -len("</output>")]
    assert session.plugin.registry.recover(stub_keys(out)[0]) == body  # the body, line break included


def test_xml_frame_reduces_only_the_body() -> None:
    text = _framed(2, BODY)
    assert envelope.apply(text, lambda b: "R") == "<returncode>2</returncode>\n<output>\nR\n</output>"
    assert envelope.apply(text, lambda b: b) == text
    # not the frame: anything before the return code, or no closing tag at the end (then the
    # return code is still a status line of its own, which stays)
    assert envelope.apply("x\n" + text, lambda b: "R") == "R"
    assert envelope.apply(text + "\ntrailer", lambda b: "R") == "<returncode>2</returncode>\nR"


def test_a_leading_status_line_stays_and_only_the_body_is_reduced() -> None:
    """Claude Code's failed Bash result opens with ``Exit code 2``; before, the test-run pass put its
    stub above it (2 of the 11 such outputs of the dev Claude Code sessions, frame_audit.py)."""
    body = "Running tests\n" + "".join(f"  test_{i} ... ok\n" for i in range(200)) + "FAILED (errors=1)"
    seen: list[str] = []
    out = envelope.apply("Exit code 2\n" + body, lambda b: seen.append(b) or "R")
    assert (out, seen) == ("Exit code 2\nR", [body])
    assert envelope.apply("Exit code 2\n" + body, lambda b: b) == "Exit code 2\n" + body
    # a status line alone, or one that is not the first line, is no frame
    assert envelope.apply("Exit code 2", lambda b: "R") == "R"
    assert envelope.apply("x\nExit code 2\nbody", lambda b: "R") == "R"
    assert envelope.apply("Exit code 2 then more\nbody", lambda b: "R") == "R"


TASK_HEADER = (
    "<retrieval_status>success</retrieval_status>\n\n<task_id>b7636e2</task_id>\n\n"
    "<task_type>local_bash</task_type>\n\n<status>completed</status>\n\n<exit_code>1</exit_code>\n\n<output>\n"
)


def test_claude_codes_task_output_keeps_its_tags_and_the_body_is_reduced_by_its_kind() -> None:
    """Claude Code's ``TaskOutput`` (a background command's result) opens with its status and exit code
    as tags; reduced as a whole its body was no known kind (a dev session's ``mix test`` build log went
    to head + tail). Now the tags stay byte-exact and the body is read as what it is: here a test run
    whose failure, in the middle, stays."""
    noise = "".join(f"==> dep_{i}\nCompiling {i} files (.ex)\nGenerated dep_{i} app\n" for i in range(120))
    failure = (
        "  1) test renders the page (SpotterWeb.PageTest)\n     test/page_test.exs:12\n"
        "     ** (RuntimeError) no :secret_key_base configuration found\n"
    )
    body = (
        noise
        + failure
        + "".join(f"  test_{i} ok\n" for i in range(80))
        + "\nFinished in 0.9 seconds\n15 tests, 1 failure\n"
    )
    text = TASK_HEADER + body + "</output>"
    assert envelope.apply(text, lambda b: "R") == TASK_HEADER + "R\n</output>"
    session = LightMem(Config()).session("s")
    out = session.ingest_tool_result("toolu_1", text)
    assert out.startswith(TASK_HEADER) and out.endswith("\n</output>"), out[:300]
    assert "** (RuntimeError) no :secret_key_base configuration found" in out
    assert "15 tests, 1 failure" in out
    assert session.plugin.registry.recover(stub_keys(out)[0]) == body


def test_claude_codes_preview_of_a_saved_output_is_left_as_the_host_cut_it() -> None:
    """Claude Code sends ``<persisted-output>`` (where the full output is saved, then its first 2 KB)
    for an output too large for it; normal mode cut 1,385 chars out of such a preview on a dev
    session, and its stub recovered the preview, not the output the host saved."""
    text = (
        "<persisted-output>\nOutput too large (141KB). Full output saved to: /home/u/.claude/projects/p/s/"
        "tool-results/toolu_019C.txt\n\nPreview (first 2KB):\n"
        + "".join(f"   test/unit_{i}.test.js  ({i} tests) 131ms\n" for i in range(60))
        + "...\n</persisted-output>"
    )
    assert envelope.apply(text, lambda b: "R") == text
    session = LightMem(Config()).session("s")
    assert session.ingest_tool_result("toolu_1", text) == text
    # only the whole frame: the tag inside other text is no preview
    assert envelope.apply("x\n" + text, lambda b: "R") == "R"


# Codex 0.171's exec_command result for `grep -n needle big.py` over a 3,000-line file, as captured on
# the wire (gpt-5.5, no lightmem2): the header, Codex's notice that it cut the output, then the first
# 20,000 and the last 20,000 bytes of grep's output joined by a mid-line marker. This builds it byte
# for byte (the whole output checked against the capture).
GREP_LINES = [f"{2 * i + 2}:    return process(request, option={i})  # needle {i}\n" for i in range(3000)]
GREP_FULL = "".join(GREP_LINES)
CODEX_GREP_HEADER = (
    "Chunk ID: 039879\nWall time: 0.0000 seconds\nProcess exited with code 0\n"
    "Original token count: 45057\nOutput:\n"
)
CODEX_NOTICE = "Warning: truncated output (original token count: 45057)\nTotal output lines: 3000\n\n"
CODEX_GREP_BODY = GREP_FULL[:20000] + "…35057 tokens truncated…" + GREP_FULL[-20000:]
GREP_CALL = ToolCall("exec_command", json.dumps({"cmd": "grep -n needle big.py", "yield_time_ms": 10000}))


@pytest.mark.parametrize(
    "notice",
    [CODEX_NOTICE, "Total output lines: 3000\n\n"],  # 0.169 and 0.171; the second line alone before
)
def test_codex_cut_notice_of_a_single_file_grep_is_header_not_matches(notice: str) -> None:
    """A single-file ``grep -n`` names no file (``12:...``), so the search pass reads each line as a
    non-match and keeps the first three and the last three. Before, Codex's notice was read as the
    first three: its two lines and the blank line took the places of the first matches, which the
    model no longer saw (the stub stood where they were)."""
    session = LightMem(Config()).session("s")
    text = CODEX_GREP_HEADER + notice + CODEX_GREP_BODY
    out = session.ingest_tool_result("call_1", text, GREP_CALL)
    assert out.startswith(CODEX_GREP_HEADER + notice) and len(out) < len(text) // 10
    rest = out[len(CODEX_GREP_HEADER + notice) :].splitlines()
    assert rest[:3] == [line.rstrip("\n") for line in GREP_LINES[:3]], rest[:4]
    assert out.count("Total output lines:") == 1 and out.count("Warning: truncated") == notice.count(
        "Warning"
    )
    assert session.plugin.registry.recover(stub_keys(out)[0]) == CODEX_GREP_BODY


def test_codex_cut_notice_opening_a_frameless_text_stays() -> None:
    """Codex code mode cuts the text a script printed the same way, the notice opening the part."""
    text = "Warning: truncated output (original token count: 45834)\nTotal output lines: 1\n\n" + BODY
    assert envelope.apply(text, lambda b: "R") == text[: -len(BODY)] + "R"
    assert envelope.apply(text, lambda b: b) == text
    # within another frame too, and only at the start of the body
    assert envelope.apply(HEADER + CODEX_NOTICE + BODY, lambda b: "R") == HEADER + CODEX_NOTICE + "R"
    assert envelope.apply(HEADER + "x\n" + CODEX_NOTICE + BODY, lambda b: "R") == HEADER + "R"
