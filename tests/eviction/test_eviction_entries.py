"""The eviction package's turns of a request (eviction.entries): neutral messages, one result each."""

from __future__ import annotations

from lightmem_plugin.eviction.entries import answered_call, entries, of_chat, tool_calls, turn_text
from lightmem_plugin.model import Message, Request, TextPart, ToolCallPart, ToolResultPart


def test_a_message_with_text_and_two_results_gives_three_turns() -> None:
    call = Message(
        "assistant", [TextPart("look"), ToolCallPart("a", "sh", "{}"), ToolCallPart("b", "sh", "{}")]
    )
    both = Message(
        "user",
        [TextPart("here:"), ToolResultPart("a", [TextPart("A")]), ToolResultPart("b", [TextPart("B")])],
    )
    view = entries(Request([Message("developer", [TextPart("rules")]), call, both]))
    assert [(t.role, turn_text(t), answered_call(t)) for t in view.turns] == [
        ("system", "rules", ""),
        ("assistant", "look", ""),
        ("user", "here:", ""),
        ("tool", "A", "a"),
        ("tool", "B", "b"),
    ]
    assert view.ids == [None, None, None, "a", "b"] and view.owners == [0, 1, 2, 2, 2]
    assert view.turns[1] is call  # a message that already is one turn is used as it is
    assert [c.id for c in tool_calls(view.turns[1])] == ["a", "b"]


def test_results_alone_give_no_empty_user_turn() -> None:
    only = Message("user", [ToolResultPart("a", [TextPart("A")])])
    assert [t.role for t in entries(Request([only])).turns] == ["tool"]


def test_chat_transcripts_read_as_turns() -> None:
    turns = of_chat(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command":"ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "a.py"},
        ]
    )
    assert [(t.role, turn_text(t), answered_call(t)) for t in turns] == [
        ("user", "go", ""),
        ("assistant", "", ""),
        ("tool", "a.py", "c"),
    ]
    assert tool_calls(turns[1])[0].arguments == '{"command":"ls"}'


def test_an_archive_document_starts_each_block_of_a_tool_result_on_its_own_line() -> None:
    """Claude Code's Task result is the subagent's report, then a block ``agentId: ...``: joined end to
    end, the report's last line was no line the agent could quote (4d5611e5, lost by line)."""
    from lightmem_plugin.eviction.entries import document_text, turn_text
    from lightmem_plugin.model import Message, TextPart, ToolResultPart

    report = "Files:\n- `assets/app.css` (lines 969-1168)"
    result = ToolResultPart("t1", [TextPart(report), TextPart("agentId: a2898e3"), TextPart("\nend\n")])
    turn = Message("tool", [result])
    assert turn_text(turn) == report + "agentId: a2898e3\nend\n"  # what passes read, unchanged
    assert document_text(turn) == report + "\nagentId: a2898e3\n\nend\n"
    assert "- `assets/app.css` (lines 969-1168)" in document_text(turn).split("\n")
