"""The one identity memo (memo.PerObject) and its users: the one chunker, the chat adapter, the evictor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.codecs.memo import Interned, PerObject
from lightmem_plugin.config import EvictionConfig
from lightmem_plugin.errors import PayloadError
from lightmem_plugin.eviction.evictor import Evictor
from lightmem_plugin.metering.accounting import message_tokens, render
from lightmem_plugin.metering.chat_tokens import ChatChunker, Chunker
from lightmem_plugin.model import Message, Request, TextPart, ToolResultPart
from lightmem_plugin.tokens import TokenCounter
from lightmem_plugin.wire.chat import codec as openai_chat
from lightmem_plugin.wire.chat.adapter import ChatAdapter


def test_the_same_object_reuses_and_an_equal_one_recomputes() -> None:
    runs: list[str] = []
    memo: PerObject[list[str], str] = PerObject(lambda item: runs.append(item[0]) or item[0].upper())
    a, b = ["a"], ["b"]
    assert memo.map([a, b]) == ["A", "B"] and runs == ["a", "b"]
    assert memo.map([a, b, ["c"]]) == ["A", "B", "C"] and runs == ["a", "b", "c"]
    assert memo.map([["a"]]) == ["A"] and runs == ["a", "b", "c", "a"]  # equal, but another object
    assert len(memo) == 1  # only the last call's objects are kept
    memo.forget()
    assert memo.map([a]) == ["A"] and runs[-1] == "a"


CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "list files"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": '{"cmd":"ls"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py\n"},
]


def test_the_ledger_and_the_replay_count_a_session_alike() -> None:
    """One chunker, two inputs: the ledger's neutral messages and the replay's chat dicts."""
    counter = TokenCounter()
    replay = ChatChunker(counter.encode, head=0)
    ledger: Chunker[Message, str] = Chunker(lambda m: message_tokens(m, counter.encode), render, head=0)
    neutral = [openai_chat.chat_to_message(m) for m in CHAT]
    assert [list(c) for c in ledger.pieces(neutral)[0]] == [list(c) for c in replay.chunks(CHAT)]
    again = ledger.pieces(neutral)[0]
    assert all(x is y for x, y in zip(again, ledger.pieces(neutral)[0], strict=True))


def test_the_chat_adapter_decodes_only_what_is_new() -> None:
    adapter = ChatAdapter()
    first = adapter.decode(CHAT[:2], None)
    second = adapter.decode([dict(m) for m in CHAT], None)  # rebuilt dicts, equal content
    assert all(a is b for a, b in zip(first.messages, second.messages[:2], strict=True))
    assert len(second.messages) == 4
    out = adapter.encode(second)
    assert out["messages"] == CHAT
    assert adapter.encode(second)["messages"][3] is out["messages"][3]


def test_the_chat_adapter_names_the_message_it_could_not_read() -> None:
    adapter = ChatAdapter()
    with pytest.raises(PayloadError, match=r"messages\[1\]"):
        adapter.decode([CHAT[0], {"role": 7}], None)
    assert len(adapter.decode(CHAT[:1], None).messages) == 1  # nothing half-decoded was kept


def test_a_second_stub_in_a_message_already_stubbed_is_applied() -> None:
    """One message holding two tool results (Anthropic's form), evicted in two batches."""
    ev = Evictor(EvictionConfig(), lambda raw: "k", TokenCounter())
    msg = Message(
        "user", [ToolResultPart("t1", [TextPart("one " * 50)]), ToolResultPart("t2", [TextPart("two " * 50)])]
    )
    req = Request([msg], [], {}, {})
    ev.state.stubs["t1"] = "[stub 1]"
    ev.state.last_batch_call = 5
    first = ev.apply(req).messages[0]
    assert [p.text() for p in first.parts] == ["[stub 1]", "two " * 50]
    assert ev.apply(req).messages[0] is first  # the same stubbed object call after call
    ev.state.stubs["t2"] = "[stub 2]"
    ev.state.last_batch_call = 9
    assert [p.text() for p in ev.apply(req).messages[0].parts] == ["[stub 1]", "[stub 2]"]


def test_interned_hands_back_the_last_calls_equal_objects_by_position() -> None:
    memo: Interned[list[str]] = Interned()
    a, b = ["a"], ["b"]
    assert memo.map([a, b]) == [a, b]
    a2, b2, c = ["a"], ["B"], ["c"]  # a new parse: equal, changed, new
    out = memo.map([a2, b2, c])
    assert out[0] is a and out[1] is b2 and out[2] is c
    assert memo.map([["c"], ["a"]])[1] is not a  # position by position only, and only the last call
    memo.forget()
    assert memo.map([["c"]])[0] is not c


def test_a_proxied_session_processes_and_counts_only_what_is_new(tmp_path: Path) -> None:
    """The proxy decodes each request body anew (new objects every call): the session maps equal
    messages to the objects it already processed, so the pipeline and the ledger's token count run
    for the new messages only, as they do for an in-process host that hands in the same objects."""
    from lightmem_plugin.config import Config
    from lightmem_plugin.pipeline import LightMem, Session
    from lightmem_plugin.store.ledger import Ledger
    from lightmem_plugin.store.registry import Registry

    lm = LightMem(Config(), Registry(tmp_path / "reg"), ledger=Ledger(tmp_path / "ledger.sqlite3"))
    session = lm.session("s")
    processed: list[Message] = []
    counted: list[Message] = []
    real_process = Session._process_message
    session._processed = PerObject(lambda m: processed.append(m) or real_process(session, m))
    chunker = session.recorder._accountant._base  # type: ignore[union-attr]
    count = chunker._memo._fn
    chunker._memo._fn = lambda m: counted.append(m) or count(m)
    chat = ChatAdapter()
    history = [dict(m) for m in CHAT]
    session.process(chat.decode(history, None))
    assert len(processed) == len(CHAT) and len(counted) == len(CHAT)
    processed.clear(), counted.clear()
    grown = [*[dict(m) for m in CHAT], {"role": "user", "content": "and now the tests"}]
    session.process(ChatAdapter().decode(grown, None))  # a fresh adapter: every object is new
    assert [m.text() for m in processed] == ["and now the tests"]
    assert [m.text() for m in counted] == ["and now the tests"]
