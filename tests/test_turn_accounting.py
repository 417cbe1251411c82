"""The ledger counts every model call a host makes, and "without lightmem2" counts what the host would
have sent: its tool outputs whole, even when a hook or middleware reduced them before we saw the request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightmem_plugin.config import Config
from lightmem_plugin.metering.baseline import Baseline
from lightmem_plugin.model import Message, Request, TextPart, ToolResultPart
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.store.registry import Registry

LOG = "".join(
    f"2026-03-01 10:00:{i % 60:02d} INFO worker {i}: processed batch {i * 7} ok\n" for i in range(400)
)
USAGE_1 = {
    "input_tokens": 40,
    "cache_read_input_tokens": 900,
    "cache_creation_input_tokens": 0,
    "output_tokens": 9,
}
USAGE_2 = {
    "input_tokens": 30,
    "cache_read_input_tokens": 1800,
    "cache_creation_input_tokens": 0,
    "output_tokens": 7,
}


def _plugin(tmp_path: Path) -> tuple[LightMem, Ledger]:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    return LightMem(config=Config(mode="normal"), registry=Registry(tmp_path / "reg"), ledger=ledger), ledger


def _call(cid: str, command: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": cid, "type": "function", "function": {"name": "exec", "arguments": command}}],
    }


def test_a_stub_the_host_already_holds_counts_as_its_original_without_lightmem2(tmp_path: Path) -> None:
    """Claude Code's hook reduced the output; the proxy sees the stub. Before: baseline == sent, saved 0."""
    lm, ledger = _plugin(tmp_path)
    session = lm.session("s")
    stubbed = session.ingest_tool_result("c1", LOG)  # what the hook wrote into the host's history
    assert stubbed != LOG
    history = [
        {"role": "user", "content": "show the log"},
        _call("c1", '{"command": "cat app.log"}'),
        {"role": "tool", "tool_call_id": "c1", "content": stubbed},
    ]
    session.before_model_call(history)
    [row] = ledger.calls("s")
    assert row.baseline_tokens > 3 * row.input_tokens, (row.baseline_tokens, row.input_tokens)
    assert row.k_baseline > row.k


def test_expansion_needs_one_archived_original_longer_than_the_text(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    key = reg.put(LOG.encode())
    other = reg.put(b"x" * 5000)
    base = Baseline(reg.peek)
    assert base.original_text(f"head\n[lightmem2: 9,000 chars archived as {key}; recover ...]\n") == LOG
    assert base.original_text("no stub here") is None
    two = f"[lightmem2: a archived as {key}]\n[lightmem2: b archived as {other}]"
    assert base.original_text(two) is None  # two outputs: not one output's stub form
    missing = "[lightmem2: 9 chars archived as " + "0" * 32 + "]"
    assert base.original_text(missing) is None
    short = reg.put(b"tiny")
    assert base.original_text(f"[lightmem2: quoted stub archived as {short}; recover it]") is None
    msg = Message("user", [TextPart("hi")])
    req = Request([msg], [], {}, {})
    assert base.expand(req) is req  # nothing to expand: the very same request (and message objects)
    result = Message("tool", [ToolResultPart("c1", [TextPart(f"[lightmem2: x archived as {key}]")])])
    out = base.expand(Request([msg, result], [], {}, {}))
    assert out.messages[0] is msg and out.messages[1].parts[0].text() == LOG  # type: ignore[union-attr]


def test_a_whole_turn_gets_one_row_per_model_call_with_its_own_usage(tmp_path: Path) -> None:
    """OpenClaw assembles once per turn and makes the turn's calls itself: 2 calls are 2 rows, not 1."""
    lm, ledger = _plugin(tmp_path)
    session = lm.session("oc")
    history = [{"role": "user", "content": "earlier goal"}, {"role": "assistant", "content": "done before"}]
    session.before_model_call(history, whole_turn=True)
    assert ledger.calls("oc") == []  # kept back until the turn's messages arrive
    reduced = session.ingest_tool_result("c7", LOG)  # the middleware, as the output entered the turn
    turn = [
        {"role": "user", "content": "count the log lines"},
        _call("c7", '{"command": "cat app.log"}'),
        {"role": "tool", "tool_call_id": "c7", "content": reduced},
        {"role": "assistant", "content": "400 lines."},
    ]
    assert session.record_turn(turn, [(1, USAGE_1), (3, USAGE_2)], "anthropic") == 2
    first, second = ledger.calls("oc")
    assert (first.call_index, second.call_index) == (1, 2)
    assert first.real_input_tokens == 940 and second.real_input_tokens == 1830
    assert first.real_cache_read == 900 and second.real_cache_read == 1800
    # call 2 received the tool result: its reduced form in what was sent, its original without us
    assert second.input_tokens > first.input_tokens
    assert second.baseline_tokens - first.baseline_tokens > 3 * (second.input_tokens - first.input_tokens)
    assert second.prefix_break_at is None  # the turn only appends: the prefix extends
    # the next turn's assemble continues the numbering
    session.before_model_call([*history, *turn, {"role": "user", "content": "next"}], whole_turn=True)
    session.record_turn(
        [{"role": "user", "content": "next"}, {"role": "assistant", "content": "ok"}], [(1, USAGE_1)]
    )
    assert [r.call_index for r in ledger.calls("oc")] == [1, 2, 3]


def test_a_turn_that_never_reports_keeps_its_first_call_row(tmp_path: Path) -> None:
    lm, ledger = _plugin(tmp_path)
    session = lm.session("oc")
    session.before_model_call([{"role": "user", "content": "a"}], whole_turn=True)
    session.before_model_call(
        [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], whole_turn=True
    )
    assert [r.call_index for r in ledger.calls("oc")] == [1]  # the first, flushed by the second assemble
    assert session.record_turn([{"role": "user", "content": "b"}], []) == 0  # no model call: the row alone
    assert [r.call_index for r in ledger.calls("oc")] == [1, 2]
    assert session.record_turn([{"role": "user", "content": "c"}], [(1, USAGE_1)]) == 0  # nothing pending
    assert len(ledger.calls("oc")) == 2


def test_a_retried_request_is_one_model_call(tmp_path: Path) -> None:
    """The same request again after one that got no answer (the host's client timed out and resent it):
    one row, as the provider saw one call. Seen in the Claude Code e2e under load: 23 rows, 22 calls."""
    lm, ledger = _plugin(tmp_path)
    session = lm.session("s")
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "more"},
    ]
    session.before_model_call(msgs)
    session.before_model_call(msgs)  # no answer in between: a retry
    assert [r.call_index for r in ledger.calls("s")] == [1]
    session.after_model_call({"role": "assistant", "content": "done"}, usage=USAGE_1)
    assert ledger.calls("s")[0].real_cache_read == 900
    session.before_model_call(
        [*msgs, {"role": "assistant", "content": "done"}, {"role": "user", "content": "x"}]
    )
    session.after_model_call({"role": "assistant", "content": "y"})  # answered, though without usage
    session.before_model_call(
        [*msgs, {"role": "assistant", "content": "done"}, {"role": "user", "content": "x"}]
    )
    assert [r.call_index for r in ledger.calls("s")] == [1, 2, 3]  # an answered call sent again is a new call


def test_a_turn_respelled_by_the_host_at_the_next_assemble_is_no_cache_break(tmp_path: Path) -> None:
    """OpenClaw commits a turn with its runtime's call ids (``toolu_8_0``) and hands the next
    ``assemble()`` the same messages with the ids it sent the provider (``toolu80``). Compared as
    written, each turn boundary was a "message N changed" break in ``report`` and a miss in the
    simulated figures, while the provider hit its cache."""

    def turn_of(cid: str) -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": "count the log lines"},
            _call(cid, '{"command": "wc -l app.log"}'),
            {"role": "tool", "tool_call_id": cid, "content": "400 app.log"},
            {"role": "assistant", "content": "400 lines."},
        ]

    def boundary(respells: bool) -> Any:
        lm, ledger = _plugin(tmp_path / str(respells))
        session = lm.session("oc")
        session.respelled_ids = respells  # what the sidecar sets for OpenClaw
        history = [
            {"role": "user", "content": "earlier goal"},
            {"role": "assistant", "content": "done before"},
        ]
        session.before_model_call(history, whole_turn=True)
        session.record_turn(turn_of("toolu_8_0"), [(1, USAGE_1), (3, USAGE_2)], "anthropic")
        nxt = [*history, *turn_of("toolu80"), {"role": "user", "content": "next"}]
        session.before_model_call(nxt, whole_turn=True)
        session.record_turn([{"role": "user", "content": "next"}], [(1, USAGE_1)], "anthropic")
        return ledger.calls("oc")[-1]

    row = boundary(True)
    assert row.prefix_break_at is None and row.break_reason is None, row.break_reason
    assert row.miss_tokens < row.hit_tokens
    # the same ids compared as written (a host that does not respell) still break there
    assert boundary(False).break_reason == "message 3 changed"


def test_a_whole_turn_tells_the_compaction_gauge_the_provider_s_count(tmp_path: Path) -> None:
    """OpenClaw's usage comes per turn: the turn's first call (the assembled history, the system prompt
    and tools it adds) sets the ratio the compaction before the host's estimates the context with. Before:
    only the proxy's per-call path set it, so on OpenClaw the ratio stayed unknown (1.0), the estimate
    left out the head (~12,000 provider tokens of OpenClaw's system prompt and tools, measured in the
    Gateway e2e test) and OpenClaw compacted first."""
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    lm = LightMem(config=Config(mode="aggressive"), registry=Registry(tmp_path / "reg"), ledger=ledger)
    session = lm.session("oc")
    history = [{"role": "user", "content": "earlier goal"}, {"role": "assistant", "content": "done before"}]
    session.before_model_call(history, whole_turn=True)
    sent = session.evictor.gauge.sent
    assert sent > 0
    turn = [{"role": "user", "content": "go on"}, {"role": "assistant", "content": "ok"}]
    head = {**USAGE_1, "input_tokens": 5 * sent, "cache_read_input_tokens": 0}
    session.record_turn(turn, [(1, head)], "anthropic")
    assert session.evictor.gauge.ratio == 4.0  # the provider's 5x, capped (compacting.MAX_RATIO)
