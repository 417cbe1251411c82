"""What lightmem2 hands back, and a host's tool catalog, reach the model verbatim at any size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys
from lightmem_plugin.reduction.kinds import ToolCall
from lightmem_plugin.reduction.verbatim import passes_verbatim
from lightmem_plugin.store.registry import Registry

LOG = "".join(
    f"2026-03-01 10:00:{i % 60:02d} INFO worker {i}: processed batch {i * 7} ok\n" for i in range(300)
)


def _shell(command: str) -> ToolCall:
    return ToolCall("Bash", json.dumps({"command": command}))


@pytest.mark.parametrize(
    "call",
    [
        ToolCall("lightmem2_recover", '{"key": "ab"}'),
        ToolCall("mcp__lightmem2__lightmem2_recover", '{"key": "ab"}'),
        ToolCall("mcp__lightmem2__lightmem2_search", '{"query": "x"}'),
        ToolCall("tool_call", '{"id": "openclaw:lightmem2:lightmem2_recover", "args": {"key": "ab"}}'),
        ToolCall("tool_search", '{"query": "recover"}'),
        ToolCall("tool_describe", '{"id": "openclaw:lightmem2:lightmem2_search"}'),
        _shell("lightmem2 recover 0123 --lines 1:40"),
        _shell("cd /repo && /home/u/.venv/bin/lightmem2 search 'KeyError'"),
        _shell("python -m lightmem_plugin.cli recover 0123"),
        ToolCall("exec", json.dumps({"command": "lightmem2 recover 0123"})),
    ],
)
def test_our_own_outputs_and_catalogs_pass_verbatim(call: ToolCall) -> None:
    assert passes_verbatim(call)


@pytest.mark.parametrize(
    "call",
    [
        None,
        ToolCall("Bash", json.dumps({"command": "grep lightmem2 recover.log"})),
        ToolCall("Bash", json.dumps({"command": "cat lightmem2_recover.py"})),
        ToolCall("tool_call", '{"id": "openclaw:core:exec", "args": {"command": "ls"}}'),
        ToolCall("Read", '{"file_path": "lightmem2 recover"}'),
        ToolCall("tool_call", "not json"),
    ],
)
def test_other_outputs_are_reduced_as_usual(call: ToolCall | None) -> None:
    assert not passes_verbatim(call)


def test_a_recovered_original_is_not_turned_back_into_a_stub(tmp_path: Path) -> None:
    """Before: the recovered log came back as "identical to the output of tool call c1 ... KEY"."""
    lm = LightMem(Config(), registry=Registry(tmp_path / "reg"))
    session = lm.session("s")
    stubbed = session.ingest_tool_result("c1", LOG, _shell("./run-batch.sh"))
    (key,) = set(stub_keys(stubbed))
    original = lm.registry.recover(key)
    assert original == LOG
    via_tool = ToolCall("mcp__lightmem2__lightmem2_recover", json.dumps({"key": key}))
    assert session.ingest_tool_result("c2", original, via_tool) == LOG
    assert session.ingest_tool_result("c3", original, _shell(f"lightmem2 recover {key}")) == LOG
    # the same text from an ordinary command is still deduplicated against the first output
    assert session.ingest_tool_result("c4", LOG, _shell("./run-batch.sh")) != LOG


def test_the_proxy_sends_a_recover_result_whole(tmp_path: Path) -> None:
    """On the wire (Claude Code, Codex), the call that produced a result is found in the request."""
    lm = LightMem(Config(), registry=Registry(tmp_path / "reg"))
    session = lm.session("s")
    call = {
        "id": "r1",
        "type": "function",
        "function": {"name": "lightmem2_recover", "arguments": '{"key": "k"}'},
    }
    other = {
        "id": "c1",
        "type": "function",
        "function": {"name": "exec", "arguments": '{"command": "./run-batch.sh"}'},
    }
    sent = session.before_model_call(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [other]},
            {"role": "tool", "tool_call_id": "c1", "content": LOG + "x\n"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "r1", "content": LOG},
        ]
    )
    assert sent[2]["content"] != LOG + "x\n"  # an ordinary output is reduced
    assert sent[4]["content"] == LOG


def test_a_recover_run_from_a_codex_code_mode_script_passes_verbatim() -> None:
    """Codex's default model runs ``lightmem2 recover`` through its JavaScript ``exec`` tool."""
    from lightmem_plugin.reduction.kinds import ToolCall
    from lightmem_plugin.reduction.verbatim import passes_verbatim

    script = 'const r = await tools.exec_command({cmd: "lightmem2 recover ' + "a" * 32 + '"});\ntext(r);\n'
    assert passes_verbatim(ToolCall("exec", script))
    assert not passes_verbatim(ToolCall("exec", 'const r = await tools.exec_command({cmd: "ls"});\ntext(r);'))
