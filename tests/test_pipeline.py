from __future__ import annotations

import copy
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.prefix.call_ids import short_id
from lightmem_plugin.reduction.base import PassContext, stub_keys
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.store.registry import Registry

LOG = "\n".join(f"tests/test_mod.py::test_case_{i} PASSED [{i}%]" for i in range(200)) + (
    "\nFAILED tests/test_mod.py::test_case_x - AssertionError: expected 3 got 4\n=== 1 failed, 200 passed ==="
)


def plugin(tmp_path: Path, mode: str = "normal") -> LightMem:
    cfg = Config(mode=mode)  # type: ignore[arg-type]
    return LightMem(config=cfg, registry=Registry(tmp_path / "reg"))


def chat_session(outputs: list[str]) -> list[dict[str, object]]:
    msgs: list[dict[str, object]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for i, out in enumerate(outputs):
        call_id = f"call_{i}"
        msgs.append(
            {
                "role": "assistant",
                "content": f"step {i}",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command":"pytest"}'},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": call_id, "content": out})
    return msgs


def test_long_output_is_reduced_and_recoverable_byte_exact(tmp_path: Path) -> None:
    lm = plugin(tmp_path)
    s = lm.session("s1")
    out = s.ingest_tool_result("call_0", LOG)
    assert len(out) < len(LOG)
    keys = stub_keys(out)
    assert keys, out
    assert lm.registry.recover(keys[0]) == LOG


def test_reduce_once_even_after_a_mode_switch(tmp_path: Path) -> None:
    lm = plugin(tmp_path, "normal")
    s = lm.session("s1")
    msgs = chat_session([LOG, "short"])
    first = s.before_model_call(copy.deepcopy(msgs))
    assert lm._fixed is not None
    lm._fixed.mode = "aggressive"
    second = s.before_model_call([*copy.deepcopy(msgs), {"role": "user", "content": "go on"}])
    assert second[: len(first)] == first


def test_fail_open_returns_original_and_counts(tmp_path: Path) -> None:
    lm = plugin(tmp_path)
    s = lm.session("s1")

    def broken(text: str, ctx: PassContext) -> str:
        raise RuntimeError("boom")

    s.passes_override["text"] = broken
    msgs = chat_session([LOG])
    out = s.before_model_call(copy.deepcopy(msgs))
    assert out[3]["content"] == LOG
    assert s.fail.errors["reduction"] == 1
    assert s.fail.last is not None and "boom" in s.fail.last.error


def test_undecodable_payload_passes_through(tmp_path: Path) -> None:
    s = plugin(tmp_path).session("s1")
    bad: list[dict[str, object]] = [{"role": "tool", "content": "no id"}]
    assert s.before_model_call(bad) == bad
    assert s.fail.errors["codec"] == 1


def test_repeated_output_becomes_reference(tmp_path: Path) -> None:
    s = plugin(tmp_path).session("s1")
    same = "x = 1\n" * 100
    out = s.before_model_call(chat_session([same, same]))
    assert out[3]["content"] == same
    first = out[2]["tool_calls"][0]["id"]  # as the model reads it (short call ids)
    assert out[3]["tool_call_id"] == first != "call_0"
    assert f"identical to the output of tool call {first} (" in str(out[5]["content"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(min_size=0, max_size=3000), min_size=1, max_size=4))
def test_determinism_across_fresh_plugins(tmp_path: Path, outputs: list[str]) -> None:
    msgs = chat_session(outputs)
    a = plugin(tmp_path / "a").session("x").before_model_call(copy.deepcopy(msgs))
    b = plugin(tmp_path / "b").session("x").before_model_call(copy.deepcopy(msgs))
    assert a == b


@pytest.mark.parametrize("mode", ["conservative", "normal", "aggressive"])
def test_append_only_history_keeps_prefix_except_at_eviction_batches(tmp_path: Path, mode: str) -> None:
    # keepRecentTurns 1 and a long expected session make the aggressive batch due at call 6 pay: the
    # earlier runs of the same command are stale by then (calls 3 and 6 are the batchTurns=3 checks)
    cfg = Config.model_validate(
        {"mode": mode, "eviction": {"expectedRemainingCalls": 500, "keepRecentTurns": 1}}
    )
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        lm = LightMem(config=cfg, registry=Registry(tmp_path / "reg"), ledger=ledger)
        s = lm.session("s1")
        outs = [LOG, "ok", "y" * 5000, LOG + "\nmore", "ok", "z" * 3000]
        prev: list[dict[str, object]] | None = None
        breaks: list[int] = []
        for t in range(1, len(outs) + 1):
            cur = s.before_model_call(chat_session(outs[:t]))
            if prev is not None and cur[: len(prev)] != prev:
                breaks.append(t)
            prev = cur
        rows = {r.call_index: r for r in ledger.calls("s1")}
    batches = s.evictor.state.batches
    assert len(rows) == len(outs)
    if mode != "aggressive":
        assert breaks == [] and batches == []
        assert all(r.evicted_tokens == 0 and r.prefix_break_at is None for r in rows.values())
        return
    assert [b.call_index for b in batches] == [6], "the eviction batch did not fire"
    assert breaks == [6]  # the prefix is extended on every call except at the batch
    assert rows[6].break_reason == f"eviction batch: 3 outputs (archived as {batches[0].key})"
    assert rows[6].evicted_tokens == batches[0].tokens_saved > 0
    assert all(r.evicted_tokens == 0 and r.prefix_break_at is None for i, r in rows.items() if i != 6)
    assert prev is not None
    by_id = {m.get("tool_call_id"): m for m in prev}
    for cid in batches[0].call_ids:
        keys = stub_keys(str(by_id[short_id(cid)]["content"]))
        original = outs[int(cid.removeprefix("call_"))]
        assert keys and original in lm.registry.recover(keys[0])


@pytest.mark.parametrize(
    ("tools", "hint"),
    [
        (["Bash", "Read"], "run: lightmem2 recover "),  # Claude Code without our MCP server
        (["Bash", "mcp__lightmem2__lightmem2_recover"], "recover with lightmem2_recover(key"),
        (["lightmem2_recover", "exec"], "recover with lightmem2_recover(key"),  # OpenClaw
        # Codex's code mode: one free-form exec tool; our MCP tools only in a deferred namespace (before:
        # the stub named lightmem2_recover(...), which the model's script cannot call)
        (["exec", "mcp__lightmem2"], "run: lightmem2 recover "),
        ([], "recover with lightmem2_recover(key"),
    ],
)
def test_the_stub_names_the_recovery_that_works_in_this_host(tools: list[str], hint: str) -> None:
    from lightmem_plugin.reduction.base import prefers_shell

    session = LightMem(config=Config()).session("hint")
    big = "".join(f"line {i}: some program output that is long enough to matter\n" for i in range(200))
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "./run"}'}}
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": big},
    ]
    defs = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in tools]
    out = session.before_model_call(msgs, tools=defs or None)
    assert hint in out[2]["content"]
    assert prefers_shell(tools) == hint.startswith("run:")


def test_begin_leaves_the_bookkeeping_to_settle_and_nothing_is_lost(tmp_path: Path) -> None:
    """The proxy sends the transformed request first and settles the call's bookkeeping (its ledger
    row, the saved state) while the provider works. Whatever comes next settles the call first: the
    session's next call, the call's own usage, the session leaving memory, the process stopping."""
    from lightmem_plugin.store.session_state import StateStore

    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        states = StateStore(tmp_path / "sessions.sqlite3")
        lm = LightMem(config=Config(), registry=Registry(tmp_path / "reg"), ledger=ledger, states=states)
        s = lm.session("s1")
        msgs = chat_session(["ok"])
        s.begin(s.chat.decode(msgs, None), api="chat")
        assert s.unsettled and ledger.calls("s1") == [] and states.version("s1") == 0
        s.settle()
        assert not s.unsettled and [r.call_index for r in ledger.calls("s1")] == [1]
        assert states.version("s1") == 1
        s.settle()  # once only
        assert len(ledger.calls("s1")) == 1

        msgs = chat_session(["ok", "done"])
        s.begin(s.chat.decode(msgs, None), api="chat")
        s.after_model_call(None, usage={"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 60}})
        rows = ledger.calls("s1")
        assert [r.call_index for r in rows] == [1, 2] and rows[1].real_input_tokens == 100  # its own row

        s.begin(s.chat.decode(chat_session(["ok", "done", "more"]), None), api="chat")
        s.begin(s.chat.decode(chat_session(["ok", "done", "more", "x"]), None), api="chat")
        assert [r.call_index for r in ledger.calls("s1")] == [1, 2, 3]  # the next call settled the last

        lm.max_sessions = 1
        lm.session("other")  # s1 leaves memory: its pending call is written and saved first
        assert [r.call_index for r in ledger.calls("s1")] == [1, 2, 3, 4]
        assert states.version("s1") == 4

        o = lm.session("other")
        o.begin(o.chat.decode(chat_session(["x"]), None), api="chat")
        lm.settle()  # a stopping server settles every session
        assert [r.call_index for r in ledger.calls("other")] == [1]
        states.close()


def test_a_call_indexes_what_it_archived_as_it_settles_redacted(tmp_path: Path) -> None:
    """The search index is fed after the request went upstream (the host does not wait for the
    redaction and the index writes), by the call's settle; what it gets is still redacted, though the
    sealed archive keeps the output byte-exact. Outside a call (a host hook ingesting), at once."""
    import os

    from lightmem_plugin.model import ToolResultPart
    from lightmem_plugin.store.sealing import Sealer
    from lightmem_plugin.store.search_index import SearchIndex, index_hook

    secret = "ghp_" + "Ab3" * 12
    log = LOG + f"\nexport GITHUB_TOKEN={secret}\n"
    registry = Registry(tmp_path / "reg", sealer=Sealer(os.urandom(32)))
    lm = LightMem(config=Config(mode="normal"), registry=registry)
    index = SearchIndex(tmp_path / "search.sqlite3")
    lm.search_index = index
    registry.on_put = index_hook(index, lambda: lm.active_session)
    s = lm.session("s1")
    out = s.begin(s.chat.decode(chat_session([log]), None), api="chat")
    results = [p for m in out.messages for p in m.parts if isinstance(p, ToolResultPart)]
    keys = [k for p in results for k in stub_keys(p.text())]
    assert keys, "the output must have been archived (else this checks nothing)"
    key = registry.resolve(keys[0])
    assert registry.recover(key) == log  # byte-exact, secret and all, in the sealed archive
    assert index.keys() == set()  # not yet: the call has not settled
    s.settle()
    assert index.keys() == {key}
    rows = "\n".join(h.excerpt for h in index.search("GITHUB_TOKEN"))
    assert "GITHUB_TOKEN" in rows and secret not in rows and "[REDACTED" in rows
    assert index.sessions() == ["s1"]

    other = LOG.replace("FAILED", "ERROR") + "\nmore\n"
    hooked = s.ingest_tool_result("call_9", other)  # a host hook, between calls: indexed at once
    hooked_key = registry.resolve(stub_keys(hooked)[0])
    assert index.keys() == {key, hooked_key}
    index.close()
