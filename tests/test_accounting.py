from __future__ import annotations

from pathlib import Path

import pytest

from lightmem_plugin.config import Config
from lightmem_plugin.metering.accounting import detect_api, real_usage
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.store.registry import Registry


@pytest.mark.parametrize(
    ("usage", "api", "total", "cached"),
    [
        (
            {"input_tokens": 10, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 90},
            "anthropic",
            1000,
            900,
        ),
        ({"prompt_tokens": 1000, "prompt_tokens_details": {"cached_tokens": 768}}, "chat", 1000, 768),
        ({"input_tokens": 500, "input_tokens_details": {"cached_tokens": 256}}, "responses", 500, 256),
    ],
)
def test_usage_of_each_api_is_normalised(usage: dict[str, object], api: str, total: int, cached: int) -> None:
    assert detect_api(usage) == api
    figures = real_usage(api, usage)
    assert (figures.input_tokens, figures.cached_tokens) == (total, cached)


def test_ledger_rows_show_savings_real_usage_and_head_breaks(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    lm = LightMem(config=Config(mode="normal"), registry=Registry(tmp_path / "reg"), ledger=ledger)
    s = lm.session("acct")
    log = "\n".join(f"tests/test_x.py::test_{i} PASSED" for i in range(300))
    msgs: list[dict[str, object]] = [
        {"role": "system", "content": "agent"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": log},
    ]
    s.before_model_call(msgs)
    s.after_model_call(
        {"role": "assistant", "content": "ok"},
        usage={"prompt_tokens": 700, "prompt_tokens_details": {"cached_tokens": 512}},
    )
    s.before_model_call(
        [{"role": "system", "content": "agent v2"}, *msgs[1:], {"role": "user", "content": "more"}]
    )
    rows = ledger.calls("acct")
    assert len(rows) == 2
    assert rows[0].input_tokens < rows[0].baseline_tokens
    assert (rows[0].real_input_tokens, rows[0].real_cached_tokens) == (700, 512)
    assert rows[1].prefix_break_at is not None and rows[1].prefix_break_at[0] == 0
    assert rows[1].break_reason is not None and "head" in rows[1].break_reason


def test_without_lightmem2_leaves_out_the_tools_the_host_sends_only_because_of_us() -> None:
    """Measured on Codex 0.171.0 (gpt-5.5): with lightmem2's MCP server installed, Codex adds its tools and
    its own three MCP resource tools, ~380 tokens a call, which the ledger counted as "without
    lightmem2" too (the saving overstated by 12% at the last call)."""
    from lightmem_plugin.metering.accounting import Accountant, CallFacts, own_tools
    from lightmem_plugin.model import Message, Request, TextPart
    from lightmem_plugin.tokens import TokenCounter

    shell = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}
    ours = {"type": "namespace", "name": "mcp__lightmem2", "tools": [{"name": "lightmem2_recover"}]}
    resources = [
        {"type": "function", "name": n, "description": "MCP resources"}
        for n in ("list_mcp_resources", "read_mcp_resource")
    ]
    assert own_tools([shell, ours, *resources]) == [ours, *resources]
    other = {"type": "namespace", "name": "mcp__github", "tools": [{"name": "search"}]}
    assert own_tools([shell, ours, other, *resources]) == [ours]  # the resource tools serve github too
    assert own_tools([shell, {"type": "function", "function": {"name": "lightmem2_search"}}]) == [
        {"type": "function", "function": {"name": "lightmem2_search"}}
    ]
    assert own_tools([shell, *resources]) == resources  # Codex + gpt-5.5: our tools behind tool_search

    msgs = [Message("user", [TextPart("hello " * 50)])]
    plain = Accountant(TokenCounter()).account(
        CallFacts("s", 1, "normal"), Request(msgs, [shell]), Request(msgs, [shell])
    )
    tools = [shell, ours, *resources]
    acct = Accountant(TokenCounter())
    rec = acct.account(CallFacts("s", 1, "normal"), Request(msgs, tools), Request(msgs, tools))
    assert acct.footprint(tools) > 20
    assert rec.input_tokens == plain.input_tokens
    assert rec.baseline_tokens == plain.baseline_tokens - acct.footprint(tools)
    from dataclasses import replace

    counted = replace(rec, real_input_tokens=1000)
    assert counted.real_baseline_tokens == 1000 - acct.footprint(tools)  # the provider's count, less ours


@pytest.mark.parametrize("answers", [True, False])
def test_a_simulated_deepseek_call_reads_the_answer_the_previous_call_generated(
    monkeypatch: pytest.MonkeyPatch, answers: bool
) -> None:
    """DeepSeek caches each answer with its prompt (the swe recordings: 86% of calls read exactly
    the previous prompt and answer): the ledger's simulated hit at the next call includes it."""
    from lightmem_plugin.metering.accounting import Accountant, CallFacts
    from lightmem_plugin.metering.cachesim import DeepSeekCache
    from lightmem_plugin.model import Message, Request, TextPart
    from lightmem_plugin.tokens import TokenCounter

    monkeypatch.setattr(DeepSeekCache, "caches_output", answers)
    prompt = [Message("user", [TextPart("Explain the module. " * 100)])]
    answer = Message("assistant", [TextPart("The module reads its config first, then the plugins. " * 40)])
    follow = Message("user", [TextPart("And the plugins?")])
    acct = Accountant(TokenCounter(), "deepseek")
    first = acct.account(CallFacts("s", 1, "normal"), Request(prompt, []), Request(prompt, []))
    second = [*prompt, answer, follow]
    rec = acct.account(CallFacts("s", 2, "normal"), Request(second, []), Request(second, []))
    grown = rec.input_tokens - first.input_tokens  # the answer (~400 tokens) and the follow-up
    assert grown > 300
    if answers:  # all but the follow-up and the last partial 64-token unit
        assert rec.hit_tokens >= rec.input_tokens - 64 - 20
    else:  # the first prompt's whole units only
        assert rec.hit_tokens <= first.input_tokens


def test_without_lightmem2_leaves_out_its_compaction_note_in_the_host_s_text(tmp_path: Path) -> None:
    """After a host's compaction, lightmem2's note rides in the host's own text (Claude Code's additional
    context, a summary): the host alone would not send it, so the baseline does not count it."""
    from lightmem_plugin.eviction.compaction_note import compaction_note

    note = compaction_note("Goal (turn 0): fix the parser.\nFiles read: parser.py", "s1", "ab" * 16, True)
    summary = "This session continues an earlier one. Summary: the parser was fixed."
    baselines = []
    for with_note in (False, True):
        ledger = Ledger(tmp_path / f"ledger{with_note}.sqlite3")
        lm = LightMem(config=Config(mode="conservative"), registry=Registry(tmp_path / "reg"), ledger=ledger)
        s = lm.session("note")
        reminder = "<system-reminder>\nSessionStart hook additional context: " + note + "\n</system-reminder>"
        msgs = [
            {"role": "system", "content": "agent"},
            {"role": "user", "content": summary + ("\n\n" + reminder if with_note else "")},
        ]
        s.before_model_call(msgs)
        s.settle()
        (row,) = ledger.calls("note")
        baselines.append(row.baseline_tokens)
        if with_note:
            assert row.input_tokens - row.baseline_tokens >= 100  # what was sent holds the note
    # the note and the host's wrapper around it leave; the separator before it stays at most
    assert 0 <= baselines[1] - baselines[0] <= 2, baselines
    from lightmem_plugin.metering.accounting import without_note
    from lightmem_plugin.model import Message, TextPart

    ran = "<local-command-stdout>Compacted\nPreCompact [/x/bin/lightmem2 hook claude-code PreCompact] completed successfully</local-command-stdout>"
    assert (
        without_note(Message("user", [TextPart(ran)])).parts[0].text
        == "<local-command-stdout>Compacted</local-command-stdout>"
    )
