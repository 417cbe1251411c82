"""Compaction before the host's (eviction.compacting): near the host's threshold, a batch pages out
all but the newest history, losslessly, so the host never summarises the session."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.config import Config
from lightmem_plugin.eviction import compacting
from lightmem_plugin.eviction.state import Compaction, EvictionState
from lightmem_plugin.eviction.thinking import without_thinking
from lightmem_plugin.model import Message, OpaquePart, TextPart, ToolCallPart
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.store.registry import Registry

GOAL = "Read every part of the parser and tell me which one drops the last token."
KEY = re.compile(r"archived as ([0-9a-f]{12,32})(?:;| to).*?lines=\"(\d+):(\d+)\"")


def _output(n: int) -> str:
    """A tool output of about 500 tokens, its lines distinct from every other output's."""
    return "\n".join(f"part{n}.py:{j}: value_{n}_{j} = compute({n * j})  # state" for j in range(40))


def _history(calls: int) -> list[dict[str, Any]]:
    """A user goal, then ``calls`` reads of one part each (one tool call per assistant turn)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    out.append({"role": "user", "content": GOAL})
    for n in range(calls):
        args = json.dumps({"command": f"cat part{n}.py"})
        call = {"id": f"c{n}", "type": "function", "function": {"name": "Bash", "arguments": args}}
        out.append({"role": "assistant", "content": f"Reading part {n}.", "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"c{n}", "content": _output(n)})
    return out


def _session(tmp_path: Path, mode: str = "aggressive", **eviction: Any) -> Any:
    settings = {
        "compactBeforeHost": True,
        "batchTurns": 1,
        "compactAtTokens": 6_000,
        "compactMarginTokens": 1_000,
        **eviction,
    }
    settings.setdefault("compactKeepTokens", 1_500)  # about two outputs
    cfg = Config(mode=mode)
    cfg = cfg.model_copy(update={"eviction": cfg.eviction.model_copy(update=settings)})
    lm = LightMem(config=cfg, registry=Registry(tmp_path / f"reg-{mode}"))
    return lm, lm.session("s")


def _run(session: Any, calls: int) -> list[list[dict[str, Any]]]:
    return [session.before_model_call(_history(n)) for n in range(1, calls + 1)]


def test_past_the_threshold_a_batch_pages_out_all_but_the_recent_work_losslessly(tmp_path: Path) -> None:
    lm, s = _session(tmp_path)
    sent = _run(s, 14)
    done = s.evictor.state.compactions
    assert done, "the context passed compactAtTokens less the margin and nothing compacted"
    first = done[0]
    # it acted before the threshold, at a batch, and brought the context well under it
    assert first.before > 6_000 - 1_000 and first.before <= 6_000 + 600
    assert first.after < first.before / 2
    at = first.call - 1  # the request the compaction was made in
    prompt = sent[at]
    # what the user wrote and the assistant's own words stay; so does the newest work, whole
    assert prompt[1] == {"role": "user", "content": GOAL}
    assert all(m["content"] == f"Reading part {i}." for i, m in enumerate(prompt[2::2]))
    assert prompt[-1]["content"] == _output(first.call - 1)
    # every output before the kept window is a stub whose key and lines bring it back byte-exact
    outputs = [m["content"] for m in prompt if m["role"] == "tool"]  # the output of part n is the n-th
    stubbed = [(n, text) for n, text in enumerate(outputs) if text != _output(n)]
    assert [n for n, _ in stubbed] == list(range(first.outputs)) and first.outputs >= first.call - 3
    for n, text in stubbed:
        key, a, b = KEY.search(text).groups()  # type: ignore[union-attr]
        assert lm.registry.recover(key, (int(a), int(b))) == _output(n) + "\n"  # its lines, each ended
        assert "no longer current" not in text
    # the session record rides on the first stub, and the ledger row says what the compaction did
    assert "[lightmem2 session record]" in stubbed[0][1]
    assert "[lightmem2 session record]" not in stubbed[1][1]
    assert first.describe().startswith("compaction before the host's limit: context ~")
    # the call after sends the same stubs again (the prefix holds until the next batch changes it)
    assert len(done) == 1 or done[1].call > first.call + 1
    assert sent[at + 1][: len(prompt)] == prompt


def test_below_the_threshold_nothing_compacts(tmp_path: Path) -> None:
    _, s = _session(tmp_path, compactAtTokens=60_000)
    sent = _run(s, 14)
    assert s.evictor.state.compactions == []
    assert sent[-1][3]["content"] == _output(0)


@pytest.mark.parametrize("mode", ["normal", "conservative"])
def test_only_aggressive_mode_compacts(tmp_path: Path, mode: str) -> None:
    _, s = _session(tmp_path, mode)
    _run(s, 14)
    assert s.evictor.state.compactions == []


def test_compact_before_host_off_leaves_the_host_to_compact(tmp_path: Path) -> None:
    _, s = _session(tmp_path, compactBeforeHost=False)
    _run(s, 14)
    assert s.evictor.state.compactions == []


def test_the_providers_count_from_the_usage_decides_when(tmp_path: Path) -> None:
    """The provider counts more than lightmem2 does (system prompt, tools, its tokenizer): with its
    usage reported at twice lightmem2's count, the compaction comes at about half the history."""

    def first_compaction(report: bool) -> int:
        _, s = _session(tmp_path / str(report))
        for n in range(1, 15):
            s.before_model_call(_history(n))
            if report:
                s.after_model_call(None, usage={"prompt_tokens": 2 * s.evictor.gauge.sent}, api="chat")
        return s.evictor.state.compactions[0].call

    assert first_compaction(True) < first_compaction(False) - 2


def test_the_threshold_is_the_hosts_unless_set() -> None:
    cfg = Config().eviction
    assert compacting.threshold(cfg, "claude-code") == 167_000
    assert compacting.threshold(cfg, "openclaw") == 180_000
    assert compacting.threshold(cfg, None) == compacting.threshold(cfg, "codex") == 167_000
    assert compacting.threshold(cfg.model_copy(update={"compactAtTokens": 90_000}), "openclaw") == 90_000
    # what the host tells for the request (OpenClaw's budget, from its model's window) before its table
    assert compacting.threshold(cfg, "openclaw", 95_000) == 95_000
    assert (
        compacting.threshold(cfg.model_copy(update={"compactAtTokens": 90_000}), "openclaw", 95_000) == 90_000
    )


def test_the_default_margin_and_window_shrink_with_a_small_threshold_and_a_set_one_stays() -> None:
    cfg = Config().eviction
    # Claude Code's threshold leaves both defaults as they are
    assert compacting.margin(cfg, 167_000) == 67_000 and compacting.keep(cfg, 167_000) == 6_000
    # a 64k model's budget: the margin at 41%, the kept window at 25% of it
    assert compacting.margin(cfg, 40_000) == 16_400 and compacting.keep(cfg, 20_000) == 5_000
    # a value the user set is theirs, whatever the threshold
    mine = cfg.model_copy(update={"compactMarginTokens": 30_000, "compactKeepTokens": 20_000})
    assert compacting.margin(mine, 40_000) == 30_000 and compacting.keep(mine, 40_000) == 20_000


def test_the_estimate_adds_what_the_messages_gained_to_the_provider_s_last_count() -> None:
    """OpenClaw's head (~12,700 provider tokens of system prompt and tools) does not grow with the
    messages: a context measured at 19,200 tokens for 6,600 of messages, grown to 13,200, is ~27,450,
    not the 38,400 the whole ratio (2.9) made of it; the gain is priced at most 1.25 per token."""
    assert compacting.estimate(13_200, (19_200, 6_600)) == 19_200 + round(6_600 * 1.25)
    assert compacting.estimate(13_200, (11_000, 10_000)) == 11_000 + round(3_200 * 1.1)  # a ratio of 1.1
    assert compacting.estimate(2_000, (19_200, 6_600)) < 19_200  # the messages shrank: so does it
    assert compacting.estimate(13_200) == 13_200  # never measured: lightmem2's own count
    # a budget for the messages alone (OpenClaw's) is met by the messages alone, the head left out
    assert compacting.estimate(13_200, (19_200, 6_600), messages=True) == 16_500
    cfg = Config().eviction
    assert compacting.messages_only(cfg, 34_000) and not compacting.messages_only(cfg, None)
    assert not compacting.messages_only(cfg.model_copy(update={"compactAtTokens": 90_000}), 34_000)
    gauge = compacting.Gauge()
    gauge.sent = 6_600
    gauge.usage(19_200)
    assert gauge.measured == (19_200, 6_600) and gauge.ratio is not None


def test_a_compaction_survives_the_session_state() -> None:
    state = EvictionState(measured=(30_000, 20_000))
    state.compactions.append(Compaction(9, 150_000, 40_000, 12, 1_500, 7, 2, "ab" * 6, 167_000))
    again = EvictionState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert again.compactions == state.compactions and again.measured == (30_000, 20_000)
    assert "(the host's limit 167,000)" in again.compactions[0].describe()
    # a state written before the limit was kept still loads, and says nothing of it
    older = Compaction.from_list([9, 150_000, 40_000, 12, 1_500, 7, 2, "ab" * 6])
    assert older.limit == 0 and "host's limit 0" not in older.describe()


def _thinking(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``history`` with each answer's thinking, as a DeepSeek-style chat form carries it."""
    return [
        {**m, "reasoning_content": f"Thinking before message {i}."} if m["role"] == "assistant" else m
        for i, m in enumerate(history)
    ]


@pytest.mark.parametrize("drop", [True, False])
def test_the_answers_a_compaction_left_behind_go_without_their_thinking(tmp_path: Path, drop: bool) -> None:
    _, s = _session(tmp_path, compactThinking=drop)
    sent = [s.before_model_call(_thinking(_history(n))) for n in range(1, 15)]
    first = s.evictor.state.compactions[0]
    before, after = sent[first.call - 2], sent[first.call - 1]
    answers = [i for i, m in enumerate(after) if m["role"] == "assistant"]
    assert all("reasoning_content" in before[i] for i in answers[:-1])  # every answer thought, before
    left = [i for i in answers if i < first.kept_from]
    kept = [i for i in answers if i >= first.kept_from]
    assert left and kept and answers[-1] in kept
    # the answers it kept, the last among them, keep their thinking; the others lose it if so set
    assert all(after[i]["reasoning_content"] == f"Thinking before message {i}." for i in kept)
    assert all(("reasoning_content" not in after[i]) is drop for i in left)
    assert all(after[i]["content"] == before[i]["content"] for i in answers[:-1])  # their words stay
    # later calls send the same bytes for them (the prefix extends), and so does a restarted process
    assert sent[first.call][: len(after)] == after
    newest = max(c.kept_from for c in s.evictor.state.compactions)  # later compactions keep later
    assert s.evictor.state.thinking_before == (newest if drop else 0)
    assert (
        EvictionState.from_dict(s.evictor.state.to_dict()).thinking_before == s.evictor.state.thinking_before
    )


def test_anthropic_thinking_blocks_leave_and_nothing_else_does() -> None:
    signed = OpaquePart({"type": "thinking", "thinking": "t", "signature": "s"})
    redacted = OpaquePart({"type": "redacted_thinking", "data": "d"})
    server = OpaquePart({"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {}})
    answer = Message(
        "assistant", [signed, redacted, TextPart("Reading."), server, ToolCallPart("c", "Bash", "{}")]
    )
    assert without_thinking(answer).parts == [TextPart("Reading."), server, ToolCallPart("c", "Bash", "{}")]
    plain = Message("assistant", [TextPart("Done.")])
    asked = Message("user", [signed])  # never a user's message: only answers carry the model's thinking
    assert without_thinking(plain) is plain and without_thinking(asked) is asked


FAILING = "\n".join(
    [f"tests/test_parser.py::test_{j} PASSED" for j in range(30)]
    + [
        "E   AssertionError: assert parse('a b') == ['a', 'b']",
        "FAILED tests/test_parser.py::test_last_token",
    ]
)


def test_the_newest_run_of_a_failing_command_stays_whole_through_a_compaction(tmp_path: Path) -> None:
    """The agent acts on the error lines of a command's newest run: a compaction that paged them out
    hid 70% of those the agent went on to use (the long dev Claude Code sessions)."""
    _, s = _session(tmp_path)

    def history(calls: int) -> list[dict[str, Any]]:
        out = _history(calls)
        args = json.dumps({"command": "python -m pytest tests/test_parser.py"})
        run = {"id": "run", "type": "function", "function": {"name": "Bash", "arguments": args}}
        return [
            *out[:4],
            {"role": "assistant", "content": "Running the tests.", "tool_calls": [run]},
            {"role": "tool", "tool_call_id": "run", "content": FAILING},
            *out[4:],
        ]

    sent = [s.before_model_call(history(n)) for n in range(2, 15)]
    first = s.evictor.state.compactions[0]
    after = sent[first.call - 1]
    assert first.kept_from > 5 and first.outputs >= 3  # the run lies in what the compaction paged out
    assert after[5]["role"] == "tool" and after[5]["content"] == FAILING
    assert after[3]["content"] != _output(0)  # the read before it did leave


def test_a_compaction_of_the_previous_request_s_last_message_is_a_break_in_the_ledger(
    tmp_path: Path,
) -> None:
    # the ledger lets the previous request's last message differ (it carried the per-call tail), but
    # a batch that pages out only that message (here: call 2 pages out output 0, call 1's last
    # message) broke the prefix there, and its row must say so (found on Claude Code end to end: the
    # compaction's row had no break reason)
    from lightmem_plugin.store.ledger import Ledger

    cfg = Config(mode="aggressive")
    settings = {
        "batchTurns": 1,
        "compactAtTokens": 1_000,
        "compactMarginTokens": 0,
        "compactKeepTokens": 1_000,
    }
    cfg = cfg.model_copy(update={"eviction": cfg.eviction.model_copy(update=settings)})
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        lm = LightMem(config=cfg, registry=Registry(tmp_path / "reg"), ledger=ledger)
        s = lm.session("s")
        sent = _run(s, 2)
        rows = {r.call_index: r for r in ledger.calls("s")}
    (done,) = s.evictor.state.compactions
    assert done.call == 2 and done.outputs == 1, done
    assert sent[1][3]["content"] != _output(0) and sent[1][5]["content"] == _output(1)
    assert sent[1][:3] == sent[0][:3]  # only call 1's last message changed
    assert rows[1].break_reason is None
    assert rows[2].prefix_break_at is not None and rows[2].prefix_break_at[0] >= 2, rows[2]
    assert (rows[2].break_reason or "").startswith("eviction batch: compaction before the host's limit")


def test_the_newest_output_stays_whole_through_a_compaction_unless_it_alone_nears_the_threshold() -> None:
    """The kept window is the newest ``keep`` tokens, stretched back to the newest tool output (the model
    acts on it; paged out as it arrives it would never be seen whole), unless that output and what
    follows it pass ``most`` (a quarter of the threshold: keeping them, no compaction could hold the
    host off)."""
    sizes = [100] * 10
    assert compacting.kept_from(sizes, 1, 250) == 8  # the newest two messages fit 250 tokens
    assert compacting.kept_from(sizes, 1, 250, newest=7, most=400) == 7  # the output before them too
    assert compacting.kept_from(sizes, 1, 250, newest=7, most=250) == 8  # 300 tokens from it: too large
    assert compacting.kept_from(sizes, 1, 250, newest=9, most=400) == 8  # inside the window already
