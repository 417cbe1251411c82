"""Stabilizer: placeholders in the head, session block, dynamic tail, restore (DESIGN section 4, I1, I2)."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin.config import StabilizerConfig
from lightmem_plugin.errors import ConfigError, UsageError
from lightmem_plugin.model import Message, Request, TextPart, ToolCallPart, ToolResultPart
from lightmem_plugin.prefix.placeholders import host_blocks, restore_json
from lightmem_plugin.prefix.stabilizer import (
    SESSION_BLOCK_PREFIX,
    TAIL_PREFIX,
    Stabilizer,
    canonical_tools,
    find_tail,
    strip_tail,
)

TRACE = Path(__file__).parent / "data" / "deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz"


def ser(messages: list[Message]) -> str:
    return json.dumps([dataclasses.asdict(m) for m in messages], ensure_ascii=False)


def sys_req(text: str, user: str = "Fix the bug.") -> Request:
    return Request([Message("system", [TextPart(text)]), Message("user", [TextPart(user)])])


def stab(**kw: Any) -> Stabilizer:
    return Stabilizer(StabilizerConfig(**kw))


# -- detection table ------------------------------------------------------------------------------
DETECT = [
    ("Current time: 2026-11-30T05:34:54Z.", "Current time: <TIMESTAMP>.", "<TIMESTAMP>=2026-11-30T05:34:54Z"),
    (
        "now 2026-11-30 05:34:54.123+01:00 ok",
        "now <TIMESTAMP> ok",
        "<TIMESTAMP>=2026-11-30 05:34:54.123+01:00",
    ),
    ("Date: Mon Nov 30 05:34:54 UTC 2026", "Date: <TIMESTAMP>", "<TIMESTAMP>=Mon Nov 30 05:34:54 UTC 2026"),
    (
        "Sent Mon, 30 Nov 2026 05:34:54 +0000",
        "Sent <TIMESTAMP>",
        "<TIMESTAMP>=Mon, 30 Nov 2026 05:34:54 +0000",
    ),
    ("at November 30, 2026, 5:34 AM here", "at <TIMESTAMP> here", "<TIMESTAMP>=November 30, 2026, 5:34 AM"),
    ("local 30/11/2026 05:34", "local <TIMESTAMP>", "<TIMESTAMP>=30/11/2026 05:34"),
    ("Today's date is 2026-11-30.", "Today's date is <CURRENT_DATE>.", "<CURRENT_DATE>=2026-11-30"),
    ("Today: Monday, November 30, 2026", "Today: <CURRENT_DATE>", "<CURRENT_DATE>=Monday, November 30, 2026"),
    ("Datum 30.11.2026", "Datum <CURRENT_DATE>", "<CURRENT_DATE>=30.11.2026"),
    ("Tokens used: 12345", "Tokens used: <LONG_NUMBER>", "<LONG_NUMBER>=12345"),
    ("This is call #17.", "This is call #<LONG_NUMBER>.", "<LONG_NUMBER>=17"),
    (
        "Calls so far: 17. Cost: $0.42",
        "Calls so far: <LONG_NUMBER>. Cost: $<LONG_NUMBER_2>",
        "<LONG_NUMBER_2>=0.42",
    ),
    ("epoch 1764480894123 ms", "epoch <LONG_NUMBER> ms", "<LONG_NUMBER>=1764480894123"),
    ("uptime: 340s, 45% used", "uptime: <LONG_NUMBER>s, 45% used", "<LONG_NUMBER>=340]"),
    (
        "Current time: Monday, November 30th, 2026 — 06:34 (Europe/Berlin)",
        "Current time: <TIMESTAMP> (Europe/Berlin)",
        "<TIMESTAMP>=Monday, November 30th, 2026 — 06:34]",
    ),
    ("Current time: 06:34", "Current time: <TIMESTAMP>", "<TIMESTAMP>=06:34]"),
    ("The time is 5:34 PM.", "The time is <TIMESTAMP>.", "<TIMESTAMP>=5:34 PM]"),
]


@pytest.mark.parametrize(("line", "expected", "tail_has"), DETECT)
def test_per_call_values_become_placeholders_with_a_tail(line: str, expected: str, tail_has: str) -> None:
    out = stab().apply(sys_req(f"You are an agent.\n{line}\nBe brief."))
    assert out.messages[0].parts[0].text == f"You are an agent.\n{expected}\nBe brief."  # type: ignore[union-attr]
    tail = find_tail(out)
    assert tail is not None and tail.startswith(TAIL_PREFIX) and tail_has in tail
    assert len(out.messages[1].parts) == 2  # user text + tail, no session block


SESSION = [
    (
        "Working directory: /home/alice/proj\nsee /home/alice/proj/src",
        "<WORKDIR>\nsee <WORKDIR>/src",
        "<WORKDIR>",
    ),
    (
        "cwd: /srv/app\nHOME=/home/bob\nrc /home/bob/.bashrc",
        "<WORKDIR>\nHOME=<HOME>\nrc <HOME>/.bashrc",
        "<HOME>",
    ),
    ("Your working directory is: /work/x", "Your working directory is: <WORKDIR>", "<WORKDIR>=/work/x"),
    ("Session ID: 3f2a9c1e-1b2c-4d5e-8f90-123456789abc", "Session ID: <SESSION_ID>", "<SESSION_ID>=3f2a9c1e"),
    ("agent_id=agent-7f3k2m9q", "agent_id=<AGENT_ID>", "<AGENT_ID>=agent-7f3k2m9q"),
    ("trace 8d2a9c1e-1b2c-4d5e-8f90-123456789abc.", "trace <UUID>.", "<UUID>=8d2a9c1e-1b2c-4d5e-8f90-"),
    ("files under /Users/carol/code/x", "files under <HOME>/code/x", "<HOME>=/Users/carol"),
]


@pytest.mark.parametrize(("text", "expected_end", "block_has"), SESSION)
def test_session_values_go_to_one_block_after_the_head(text: str, expected_end: str, block_has: str) -> None:
    out = stab().apply(sys_req(text))
    assert out.messages[0].parts[0].text.endswith(expected_end)  # type: ignore[union-attr]
    block = out.messages[-1].parts[-1]
    assert isinstance(block, TextPart) and block.text.startswith(SESSION_BLOCK_PREFIX)
    assert block_has in block.text
    assert find_tail(out) is None  # nothing per-call


STABLE_HEADS = [
    "You are a helpful assistant that can interact with a computer shell.",
    "Model: claude-opus-4-1-20250805, Python 3.11.4, v2.1.332, port 8080, HTTP 404.",
    "Step 1: read the file. agent id: main. Working in /testbed (the working directory).",
    "Use <WORKDIR> literally; tokens are counted; call the tool; 1,234 lines max.",
    "",
]


@pytest.mark.parametrize("text", STABLE_HEADS)
def test_head_without_volatile_values_is_unchanged_byte_for_byte(text: str) -> None:
    req = Request(
        [Message("system", [TextPart(text)]), Message("user", [TextPart("Deadline 2026-12-01, go.")])],
        tools=[{"name": "a"}, {"name": "b"}],
    )
    out = stab().apply(req)
    assert ser(out.messages) == ser(req.messages)
    assert out.tools == req.tools


def test_workdir_does_not_match_inside_a_longer_path() -> None:
    out = stab().apply(sys_req("Working directory: /testbed\nalso /testbed2/x and /testbed/y"))
    assert out.messages[0].parts[0].text == "Working directory: <WORKDIR>\nalso /testbed2/x and <WORKDIR>/y"  # type: ignore[union-attr]


def test_caller_given_workdir_is_used() -> None:
    s = Stabilizer(StabilizerConfig(), known={"WORKDIR": "/testbed"})
    out = s.apply(sys_req("Edit files in /testbed only."))
    assert out.messages[0].parts[0].text == "Edit files in <WORKDIR> only."  # type: ignore[union-attr]
    assert s.restore("cat <WORKDIR>/a.py") == "cat /testbed/a.py"


def test_codex_environment_context_in_a_user_message() -> None:
    env = "<environment_context>\n  <cwd>/Users/dev/repo</cwd>\n  <shell>zsh</shell>\n</environment_context>"
    s = stab()
    out = s.apply(Request([Message("developer", [TextPart("Be safe.")]), Message("user", [TextPart(env)])]))
    assert "<cwd><WORKDIR></cwd>" in out.messages[1].parts[0].text  # type: ignore[union-attr]
    assert s.restore("<WORKDIR>/a") == "/Users/dev/repo/a"


def test_tail_goes_to_the_only_message_when_there_is_no_user_turn() -> None:
    out = stab().apply(Request([Message("system", [TextPart("Now: 2026-11-30T05:34:54Z")])]))
    assert out.messages[0].parts[1].text == TAIL_PREFIX + "<TIMESTAMP>=2026-11-30T05:34:54Z]"  # type: ignore[union-attr]
    assert ser(strip_tail(out).messages) == ser([Message("system", [TextPart("Now: <TIMESTAMP>")])])


def test_user_text_is_content_only_host_blocks_are_scanned() -> None:
    user = (
        "<system-reminder>\nToday's date is 2026-11-30.\n</system-reminder>\n"
        "The log says 2018-03-25 15:27:29,744 failed in /home/kevin/x.py"
    )
    out = stab().apply(Request([Message("user", [TextPart(user)])]))
    text = out.messages[0].parts[0].text  # type: ignore[union-attr]
    assert "Today's date is <CURRENT_DATE>." in text
    assert text.endswith("The log says 2018-03-25 15:27:29,744 failed in /home/kevin/x.py")
    assert host_blocks("a<env>b</env>c<env>d</env>") == ["a<env>", "b", "</env>c<env>", "d", "</env>"]


# -- byte stability, I2, determinism --------------------------------------------------------------
HEADERS = [
    "Current time: {iso}. Calls so far: {n}. Tokens used: {tok}",
    "Today's date is {date}. It is {ctime}.",
    "[runtime] epoch_ms={ms} call #{n} uptime: {n}s",
]


@pytest.mark.parametrize("header", HEADERS)
def test_head_is_byte_stable_when_the_clock_moves(header: str) -> None:
    s = stab()
    heads: set[str] = set()
    tails: set[str] = set()
    history: list[Message] = []
    t0 = datetime(2026, 11, 30, 5, 34, 54, tzinfo=UTC)
    for n in range(6):
        now = t0 + timedelta(hours=7 * n, seconds=n)
        values = {
            "iso": now.isoformat().replace("+00:00", "Z"),
            "date": now.date().isoformat(),
            "ctime": now.strftime("%a %b %d %H:%M:%S UTC %Y"),
            "n": 17 + n,
            "tok": 12345 + 977 * n,
            "ms": int(now.timestamp() * 1000),
        }
        system = Message("system", [TextPart("You are an agent.\n" + header.format(**values) + "\nRules.")])
        req = Request([system, Message("user", [TextPart("Fix it.")]), *history])
        out = s.apply(req)
        heads.add(ser(strip_tail(out).messages[:2]))
        tails.add(find_tail(out) or "")
        history += [Message("assistant", [TextPart(f"step {n}")]), Message("user", [TextPart(f"ok {n}")])]
    assert len(heads) == 1
    assert len(tails) == 6
    assert all(len(t) < 160 for t in tails)


WORDS = st.sampled_from(
    [
        "ok",
        "2026-11-30",
        "05:34:54",
        "3f2a9c1e-1b2c-4d5e-8f90-123456789abc",
        "/home/u/p",
        "1764480894123",
        "x",
    ]
)
TEXT = st.lists(WORDS, max_size=6).map(" ".join)


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[Request], list[str]]:
    """Append-only sessions whose head carries per-call volatile values; tool outputs look volatile too."""
    wd = draw(st.sampled_from(["/home/u/p", "/Users/ann/work dir", "C:\\Users\\bob\\repo", "/srv/x"]))
    uuid = str(draw(st.uuids()))
    tool_role = draw(st.booleans())
    turns = draw(st.lists(st.tuples(TEXT, TEXT), min_size=1, max_size=6))
    reqs: list[Request] = []
    history: list[Message] = []
    base = datetime(2026, 1, 1, tzinfo=UTC)
    for n, (said, output) in enumerate(turns):
        now = base + timedelta(seconds=draw(st.integers(0, 10**8)))
        head = (
            f"Working directory: {wd}\nSession ID: {uuid}\nCurrent time: {now.isoformat()}\n"
            f"Tokens used: {draw(st.integers(0, 10**9))}\nToday's date: {now:%B %d, %Y}"
        )
        msgs = [
            Message("system", [TextPart(head)]),
            Message("user", [TextPart("Task: " + turns[0][0])]),
            *history,
        ]
        reqs.append(Request(msgs, tools=[{"name": "zeta"}, {"name": "alpha"}]))
        call = ToolCallPart(f"c{n}", "bash", json.dumps({"cmd": said}))
        result = ToolResultPart(f"c{n}", [TextPart(output)])
        history = [
            *history,
            Message("assistant", [TextPart(said), call]),
            Message("tool", [result]) if tool_role else Message("user", [result]),
        ]
    return reqs, [wd, uuid]


@settings(max_examples=60, deadline=None)
@given(sessions())
def test_i2_prefix_stability_over_generated_sessions(session: tuple[list[Request], list[str]]) -> None:
    reqs, _ = session
    s = stab()
    prev: str | None = None
    for req in reqs:
        snapshot = ser(req.messages)
        out = s.apply(req)
        assert ser(req.messages) == snapshot  # input not mutated
        cur = ser(strip_tail(out).messages)
        if prev is not None:
            assert cur.startswith(prev[:-1])
        prev = cur
        assert [t["name"] for t in out.tools] == ["alpha", "zeta"]
        # history outside the head is shared, untouched
        assert all(a is b for a, b in zip(out.messages[2:-1], req.messages[2:-1], strict=True))


@settings(max_examples=30, deadline=None)
@given(sessions())
def test_determinism_and_state_round_trip(session: tuple[list[Request], list[str]]) -> None:
    reqs, _ = session
    a, b = stab(), stab()
    outs_a = [ser(a.apply(r).messages) for r in reqs]
    assert outs_a == [ser(b.apply(r).messages) for r in reqs]
    c = stab()
    for i, req in enumerate(reqs):
        state = json.loads(json.dumps(c.state_dict()))
        c = Stabilizer.from_state(StabilizerConfig(), state)
        assert ser(c.apply(req).messages) == outs_a[i]
    assert c.state_dict() == a.state_dict()


def test_uuids_numbered_by_first_appearance_and_kept_for_the_session() -> None:
    u1, u2, u3 = (f"{d}0000000-0000-4000-8000-00000000000{d}" for d in "123")
    s = stab()
    first = s.apply(sys_req(f"a {u2} b {u1} c {u2}")).messages[0].parts[0].text  # type: ignore[union-attr]
    assert first == "a <UUID> b <UUID_2> c <UUID>"
    later = s.apply(sys_req(f"x {u3} y {u1}")).messages[0].parts[0].text  # type: ignore[union-attr]
    assert later == "x <UUID_3> y <UUID_2>"
    assert s.restore("<UUID> <UUID_2> <UUID_3>") == f"{u2} {u1} {u3}"


# -- restore --------------------------------------------------------------------------------------
SEGMENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_.-", min_size=1, max_size=8)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(SEGMENT, min_size=1, max_size=4),
    st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1)),
    st.integers(0, 10**15),
    st.uuids(),
)
def test_restore_inverts_apply(segments: list[str], when: datetime, count: int, uuid: object) -> None:
    wd = "/" + "/".join(segments)
    head = (
        f"Working directory: {wd}\nNow: {when:%Y-%m-%dT%H:%M:%S}Z\nDate: {when:%a %b %d %H:%M:%S UTC %Y}\n"
        f"Calls so far: {count}\nid {uuid} in {wd}/logs"
    )
    s = stab()
    out = s.apply(sys_req(head))
    stable = out.messages[0].parts[0].text  # type: ignore[union-attr]
    assert stable != head
    assert s.restore(stable) == head
    args = json.dumps({"cmd": stable, "n": 1})
    assert json.loads(s.restore_arguments(args)) == {"cmd": head, "n": 1}


RESTORE_JSON = [
    ('{"path": "<WORKDIR>\\\\a"}', {"WORKDIR": "C:\\Users\\bob"}, {"path": "C:\\Users\\bob\\a"}),
    ('{"q": "say <AGENT_ID>"}', {"AGENT_ID": 'he said "hi"'}, {"q": 'say he said "hi"'}),
    ('{"n": <LONG_NUMBER>, "s": "<LONG_NUMBER>"}', {"LONG_NUMBER": "17"}, {"n": 17, "s": "17"}),
    ('{"a": "<UNKNOWN> \\"<UUID_2>\\""}', {"UUID_2": "v"}, {"a": '<UNKNOWN> "v"'}),
    ('{"a": "<UUID_2>\\n<UUID_2>", "b": "unterminated <UUID_2>', {"UUID_2": "\t"}, None),
]


@pytest.mark.parametrize(("args", "values", "expected"), RESTORE_JSON)
def test_restore_json_escapes_inside_strings(args: str, values: dict[str, str], expected: object) -> None:
    out = restore_json(args, values)
    if expected is None:  # a partial stream: restored, still escaped, not parseable yet
        assert out == '{"a": "\\t\\n\\t", "b": "unterminated \\t'
    else:
        assert json.loads(out) == expected


def test_restore_keeps_text_without_placeholders_and_formatting() -> None:
    s = Stabilizer(StabilizerConfig(), known={"WORKDIR": "/w"})
    raw = '{ "cmd" :  "ls <WORKDIR>",\n  "x": 1 }'
    assert s.restore_arguments(raw) == '{ "cmd" :  "ls /w",\n  "x": 1 }'
    assert s.restore("no placeholders <here>") == "no placeholders <here>"


# -- what is and is not touched -------------------------------------------------------------------
def test_dates_in_tool_output_mid_history_are_not_touched() -> None:
    output = Message(
        "tool", [ToolResultPart("c1", [TextPart("built 2026-11-30T05:34:54Z id 1764480894123")])]
    )
    later = Message("tool", [ToolResultPart("c2", [TextPart("done")])])
    call = Message("assistant", [ToolCallPart("c1", "bash", "{}")])
    call2 = Message("assistant", [ToolCallPart("c2", "bash", "{}")])
    req = Request([*sys_req("Current time: 2026-11-30T05:34:54Z").messages, call, output, call2, later])
    out = stab().apply(req)
    assert out.messages[3] is output
    assert ser(out.messages[3:4]) == ser(req.messages[3:4])
    # the tail goes inside the last tool result (OpenAI tool messages hold exactly one result)
    last = out.messages[-1].parts[0]
    assert isinstance(last, ToolResultPart) and last.content[-1].text.startswith(TAIL_PREFIX)  # type: ignore[union-attr]


def test_tail_after_tool_results_in_a_user_message() -> None:
    result = Message("user", [ToolResultPart("c1", [TextPart("ok")])])
    req = Request(
        [*sys_req("Tokens used: 5").messages, Message("assistant", [ToolCallPart("c1", "f", "{}")]), result]
    )
    out = stab().apply(req)
    assert isinstance(out.messages[-1].parts[0], ToolResultPart)
    assert find_tail(out) == out.messages[-1].parts[1].text  # type: ignore[union-attr]
    assert ser(strip_tail(out).messages[2:]) == ser(req.messages[2:])


def test_apply_is_idempotent_and_does_not_mutate() -> None:
    req = sys_req("Working directory: /w/x\nNow 2026-11-30 05:34:54 UTC\nSession ID: s-12345678")
    before = copy.deepcopy(req)
    s = stab()
    once = s.apply(req)
    twice = s.apply(once)
    assert ser(twice.messages) == ser(once.messages)
    assert ser(req.messages) == ser(before.messages)


def test_switches_and_errors() -> None:
    head = "Now 2026-11-30T05:34:54Z id 3f2a9c1e-1b2c-4d5e-8f90-123456789abc"
    only_uuid = stab(placeholders=["UUID"]).apply(sys_req(head)).messages[0].parts[0].text  # type: ignore[union-attr]
    assert only_uuid == "Now 2026-11-30T05:34:54Z id <UUID>"
    off = stab(enabled=False, canonicalToolOrder=False).apply(
        Request(sys_req(head).messages, [{"name": "b"}, {"name": "a"}])
    )
    assert off.messages[0].parts[0].text == head and [t["name"] for t in off.tools] == ["b", "a"]  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="unknown placeholder 'CLOCK'"):
        stab(placeholders=["CLOCK"])
    with pytest.raises(UsageError, match="unknown key 'CWD'"):
        Stabilizer(StabilizerConfig(), known={"CWD": "/x"})
    with pytest.raises(UsageError, match="malformed"):
        Stabilizer.from_state(StabilizerConfig(), {"version": 1})


TOOLS = [
    ([{"name": "b"}, {"name": "a", "cache_control": {"type": "ephemeral"}}], ["a", "b"], 1),
    (
        [{"type": "function", "function": {"name": "z"}}, {"type": "function", "function": {"name": "m"}}],
        ["m", "z"],
        None,
    ),
    ([{"name": "a"}, {"name": "b", "cache_control": {"type": "ephemeral"}}], ["a", "b"], 1),
]


@pytest.mark.parametrize(("tools", "names", "marked"), TOOLS)
def test_canonical_tool_order_keeps_breakpoint_positions(
    tools: list[Any], names: list[str], marked: int | None
) -> None:
    before = copy.deepcopy(tools)
    out = canonical_tools(tools)
    assert [t.get("name") or t["function"]["name"] for t in out] == names
    assert [i for i, t in enumerate(out) if "cache_control" in t] == ([marked] if marked is not None else [])
    assert tools == before
    assert canonical_tools(out) == out


# -- a real trace ---------------------------------------------------------------------------------
def _neutral(m: dict[str, Any]) -> Message:
    if m["role"] == "tool":
        return Message("tool", [ToolResultPart(m["tool_call_id"], [TextPart(m["content"])])])
    parts: list[Any] = [TextPart(m["content"])] if m["content"] else []
    for c in m.get("tool_calls") or []:
        parts.append(ToolCallPart(c["id"], c["function"]["name"], c["function"]["arguments"]))
    return Message(m["role"], parts)


def test_real_trace_with_volatile_header_keeps_system_bytes_identical() -> None:
    trace = json.loads(gzip.decompress(TRACE.read_bytes()))
    messages = [_neutral(m) for m in trace["messages"]]
    s = stab()
    systems: set[str] = set()
    prev = None
    for k, call in enumerate(trace["calls"]):
        tokens = call["prompt_tokens"]
        header = f"Current time: 2026-11-30T05:{k:02d}:54Z. Calls so far: {k + 1}. Tokens used: {tokens}\n"
        msgs = messages[: call["message_index"]]
        system = Message("system", [TextPart(header + messages[0].text())])
        out = s.apply(Request([system, *msgs[1:]]))
        systems.add(ser(out.messages[:1]))
        cur = ser(strip_tail(out).messages)
        assert prev is None or cur.startswith(prev[:-1])
        prev = cur
        assert (
            s.restore("<TIMESTAMP> <LONG_NUMBER_2>") == f"2026-11-30T05:{k:02d}:54Z {call['prompt_tokens']}"
        )
    assert len(trace["calls"]) >= 10 and len(systems) == 1


def test_runtime_call_counter_without_hash_is_a_per_call_value() -> None:
    stab = Stabilizer(StabilizerConfig())
    heads = []
    for i in range(3):
        text = f"Runtime: call {i + 1}, tokens used so far: {i * 999}\n\nIn turn 3 of the plan, do X."
        out = stab.apply(Request([Message("system", [TextPart(text)]), Message("user", [TextPart("go")])]))
        heads.append(out.messages[0].text())
    assert heads[0] == heads[1] == heads[2]
    assert "In turn 3 of the plan" in heads[0]


def test_an_equal_head_made_again_is_the_same_object_as_last_call() -> None:
    """The stabilised head is rebuilt on every call; when it comes out equal, the object of the last
    call is handed on, so the identity memos after it (respelling, the ledger's count) hit."""
    s = stab()
    text = "You are an agent.\nWorking directory: /home/alice/proj\nToday's date: 2025-10-01"
    first = s.apply(sys_req(text))
    again = s.apply(sys_req(text))  # a new parse of the same request: new, equal objects
    assert first.messages[0].parts[0].text != text  # the head was rewritten (placeholders)
    assert again.messages[0] is first.messages[0]
    moved = s.apply(sys_req(text.replace("/proj", "/other")))
    assert moved.messages[0] is not first.messages[0]
    assert moved.messages[0].parts[0].text != first.messages[0].parts[0].text
