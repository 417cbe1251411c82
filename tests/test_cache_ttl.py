"""The cache TTL the requests ask for (``stabilizer.cacheTtl``, issue #42 item 4): the rewrite on each
wire API, the session that knows the TTL it asked for, and the replay that keeps and bills it."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.commands import report, status
from lightmem_plugin.config import Config
from lightmem_plugin.errors import ConfigError
from lightmem_plugin.eviction.cold_cache import DEFAULT_TTL_S, HOUR_S, OPENAI_EXTENDED_S, requested_ttl
from lightmem_plugin.measure.luck import recorded_luck
from lightmem_plugin.measure.replay import LightMemPolicy, Vanilla, replay_trace
from lightmem_plugin.measure.traces.base import Trace, TraceCall
from lightmem_plugin.metering.cachesim import k_cost
from lightmem_plugin.metering.prices import money_of
from lightmem_plugin.pipeline import LightMem, Session
from lightmem_plugin.prefix import cache_ttl
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.store.registry import Registry
from lightmem_plugin.wire.anthropic.codec import decode_request, encode_request
from lightmem_plugin.wire.chat.codec import decode_request as decode_chat
from lightmem_plugin.wire.chat.codec import encode_request as encode_chat
from lightmem_plugin.wire.responses.codec import decode_request as decode_responses
from lightmem_plugin.wire.responses.codec import encode_request as encode_responses

EPH = {"type": "ephemeral"}


def _body(turns: int) -> dict[str, Any]:
    """A Claude Code-like Messages request: the tools' breakpoint already asks an hour, the system's
    and the last message's the default (a valid mix: longer first), a tool result whose inner block
    is marked, and a thinking block."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the parser."}]
    for i in range(turns):
        messages += [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "look", "signature": "sig"},
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": "ls"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{i}",
                        "content": [{"type": "text", "text": f"out {i}", "cache_control": dict(EPH)}],
                    }
                ],
            },
        ]
    messages[-1]["content"][-1]["cache_control"] = dict(EPH)
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": dict(EPH)}],
        "tools": [{"name": "Bash", "input_schema": {}, "cache_control": {**EPH, "ttl": "1h"}}],
        "messages": messages,
    }


def _marks(body: dict[str, Any]) -> list[str]:
    """Every breakpoint's TTL, in the order the provider reads them (tools, system, messages)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("cache_control"), dict):
                found.append(value["cache_control"].get("ttl", "5m"))
            for key, inner in value.items():
                if key != "cache_control":
                    walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(body.get("tools"))
    walk(body.get("system"))
    walk(body.get("messages"))
    return found


def _valid_order(ttls: list[str]) -> bool:
    """Anthropic's rule: no breakpoint asks for a longer TTL than one before it."""
    rank = {"1h": 1, "5m": 0}
    return all(rank[a] >= rank[b] for a, b in itertools.pairwise(ttls))


@pytest.mark.parametrize(("choice", "ttl"), [("long", "1h"), ("short", "5m")])
def test_every_anthropic_breakpoint_asks_the_chosen_ttl_and_the_order_stays_valid(
    choice: str, ttl: str
) -> None:
    body = _body(3)
    before = copy.deepcopy(body)
    assert _valid_order(_marks(body)) and set(_marks(body)) == {"1h", "5m"}
    out = encode_request(cache_ttl.apply(decode_request(body), choice, "anthropic"))
    assert _marks(out) == [ttl] * len(_marks(body)) and _valid_order(_marks(out))
    assert body == before  # the host's request (shared with the codec's reuse) is never changed
    # nothing else moved: the request without its breakpoints is the host's
    strip = lambda b: json.loads(json.dumps(b).replace(', "ttl": "1h"', ""))  # noqa: E731
    assert strip(out) == strip(body)


def test_the_rewrite_is_idempotent_and_the_same_on_every_call() -> None:
    """Applied twice it changes nothing more (the very request comes back), and a session's later
    call says the same in the prefix it shares with the earlier one: the cached bytes stay stable."""
    once = cache_ttl.apply(decode_request(_body(2)), "long", "anthropic")
    assert cache_ttl.apply(once, "long", "anthropic") is once
    first = encode_request(once)
    second = encode_request(cache_ttl.apply(decode_request(_body(3)), "long", "anthropic"))
    assert second["tools"] == first["tools"] and second["system"] == first["system"]
    head = len(first["messages"]) - 1  # the host moves its last breakpoint; what precedes it is the same
    assert second["messages"][:head] == first["messages"][:head]


def test_the_seconds_of_each_choice_are_the_ones_the_cold_call_verdicts_read() -> None:
    assert cache_ttl.LONG_TTL_S == {"anthropic": HOUR_S, "openai": OPENAI_EXTENDED_S}
    assert {p: DEFAULT_TTL_S[p] for p in cache_ttl.SHORT_TTL_S} == cache_ttl.SHORT_TTL_S
    assert set(cache_ttl.SHORT_TTL_S) == set(cache_ttl.LONG_TTL_S)


def test_host_leaves_the_request_and_an_unknown_choice_says_what_to_use() -> None:
    req = decode_request(_body(1))
    assert cache_ttl.apply(req, "host", "anthropic") is req
    assert cache_ttl.apply(req, "long", "deepseek") is req  # no choice offered: nothing asked
    with pytest.raises(ConfigError, match=r"stabilizer.cacheTtl.*'1h'.*host, short, long"):
        cache_ttl.apply(req, "1h", "anthropic")


def test_openai_requests_ask_for_the_24_hour_retention_on_both_apis() -> None:
    chat = {"model": "gpt-5.1", "messages": [{"role": "user", "content": "hi"}]}
    out = encode_chat(cache_ttl.apply(decode_chat(chat), "long", "openai"))
    assert out == {**chat, "prompt_cache_retention": "24h"}
    responses = {"model": "gpt-5.1", "input": [{"role": "user", "content": "hi"}]}
    out = encode_responses(cache_ttl.apply(decode_responses(responses), "long", "openai"))
    assert out == {**responses, "prompt_cache_retention": "24h"}
    asked = decode_chat({**chat, "prompt_cache_retention": "24h"})
    assert cache_ttl.apply(asked, "long", "openai") is asked
    assert cache_ttl.apply(decode_chat(chat), "short", "openai").extra == decode_chat(chat).extra
    assert requested_ttl(cache_ttl.apply(decode_chat(chat), "long", "openai"), "openai") == OPENAI_EXTENDED_S


def _session(tmp_path: Path, choice: str, name: str = "s") -> Session:
    cfg = Config().model_copy(
        update={"stabilizer": Config().stabilizer.model_copy(update={"cacheTtl": choice})}
    )
    return LightMem(config=cfg, registry=Registry(tmp_path / name)).session(name)


def test_the_session_asks_on_the_wire_the_key_off_sends_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a session on the Anthropic wire API: ``long`` marks every breakpoint; ``host`` sends
    exactly what the chain without the TTL step sends."""
    long = encode_request(_session(tmp_path, "long", "a").process(decode_request(_body(2)), api="anthropic"))
    assert set(_marks(long)) == {"1h"}
    host = encode_request(_session(tmp_path, "host", "b").process(decode_request(_body(2)), api="anthropic"))
    steps = tuple(s for s in Session.STEPS if s[0] != "cache_ttl")
    assert len(steps) == len(Session.STEPS) - 1
    monkeypatch.setattr(Session, "STEPS", steps)
    before = encode_request(
        _session(tmp_path, "host", "c").process(decode_request(_body(2)), api="anthropic")
    )
    assert json.dumps(host) == json.dumps(before) and host != long


def test_the_session_knows_the_ttl_it_asked_for_after_a_30_minute_pause(tmp_path: Path) -> None:
    """A call 30 minutes after the last is cold on the five-minute TTL the host asked for, warm on
    the hour lightmem2 asks for: the cost rule prices the break where the cache really is."""
    for choice, cold in (("host", True), ("long", False)):
        body = _body(1)
        body["tools"][0]["cache_control"] = dict(EPH)  # the host asks the default everywhere
        s = _session(tmp_path, choice, choice)
        s.process(decode_request(body), api="anthropic", now=1_000.0)
        s.process(decode_request(_body(2) | {"tools": body["tools"]}), api="anthropic", now=2_800.0)
        assert s.cold.cold is cold, choice


# -- the replay ------------------------------------------------------------------------------------
SYSTEM = {
    "role": "system",
    "content": "You are an agent. " + " ".join(f"rule {i}: be exact." for i in range(600)),
}
PAUSE_S = 30 * 60.0


def _trace() -> Trace:
    """Five Anthropic calls, 10 s apart but for a 30-minute pause before the fourth; the recorded
    usage is too small to show any luck, so the cache model alone decides."""
    prompt: list[dict[str, Any]] = [SYSTEM]
    calls = []
    at = 0.0
    for i in range(5):
        prompt = [*prompt, {"role": "user", "content": f"step {i}: " + "words " * 300}]
        at += PAUSE_S if i == 3 else 10.0
        out = {"role": "assistant", "content": f"done {i}"}
        calls.append(TraceCall(list(prompt), out, 100, 0, 5, 10, 0, 0, at, 0))
        prompt = [*prompt, out]
    return Trace("ttl", "test", "anthropic", calls, "claude-code", model="claude-sonnet-4-5")


def test_the_replay_with_an_hour_keeps_the_prefix_over_the_pause_and_bills_writes_at_2x() -> None:
    trace = _trace()
    short = replay_trace(trace, Vanilla())
    long = replay_trace(trace, Vanilla(HOUR_S))
    assert (short.cache_ttl_s, long.cache_ttl_s) == (300.0, HOUR_S)
    assert short.cold_starts == 1 and long.cold_starts == 0  # the pause crosses five minutes, not an hour
    assert long.hit_tokens > short.hit_tokens and long.write_tokens < short.write_tokens
    assert (
        pytest.approx(k_cost(long.hit_tokens, long.miss_tokens, long.write_tokens, write_factor=2.0))
        == long.K
    )
    assert pytest.approx(k_cost(short.hit_tokens, short.miss_tokens, short.write_tokens)) == short.K
    hourly = money_of(
        "anthropic",
        trace.model,
        long.hit_tokens,
        long.miss_tokens - long.write_tokens,
        0,
        long.write_tokens,
        long.output_tokens,
    )
    assert long.usd == pytest.approx(hourly)
    assert long.recorded_K == short.recorded_K  # the bill is the recording's, whatever the replay asks


def test_a_mode_with_the_key_on_asks_the_hour_its_session_and_the_cache_both_keep(tmp_path: Path) -> None:
    trace = _trace()
    cfg = Config().model_copy(
        update={"stabilizer": Config().stabilizer.model_copy(update={"cacheTtl": "long"})}
    )
    on = LightMemPolicy(trace, "normal", tmp_path / "on", cfg)
    off = LightMemPolicy(trace, "normal", tmp_path / "off")
    assert on.ttl == HOUR_S and off.ttl is None
    with_key, without = replay_trace(trace, on), replay_trace(trace, off)
    assert with_key.cache_ttl_s == HOUR_S and with_key.session_cold_starts == 0
    assert without.cache_ttl_s == 300.0 and without.session_cold_starts == 1


def test_luck_is_read_with_the_recorded_ttl_whatever_the_replay_asks() -> None:
    """A recorded call after a 10-minute pause read nothing: the recorded five-minute TTL explains it,
    so a replay that asks for an hour keeps the prefix there (no cap carried over as luck)."""
    a, b = {"role": "user", "content": "a"}, {"role": "user", "content": "b"}
    calls = [
        TraceCall([a], {}, 30_000, 0, 5, 10, 0, 30_000, 0.0, 0),
        TraceCall([a, b], {}, 31_000, 0, 5, 10, 0, 31_000, 600.0, 0),
    ]
    trace = Trace("p", "test", "anthropic", calls, "claude-code")
    luck = recorded_luck(trace, "anthropic", HOUR_S)
    assert (luck.ttl, luck.write_factor, luck.recorded_write_factor, luck.caps) == (HOUR_S, 2.0, 1.25, {})


def test_status_and_report_say_the_ttl_asked_and_the_one_the_provider_wrote(tmp_path: Path) -> None:
    """The key's choice (status) and the 1-hour share of the writes the provider reported (both)."""
    cfg = Config.model_validate({"stabilizer": {"cacheTtl": "long"}})
    lm = LightMem(config=cfg, registry=Registry(tmp_path / "reg"), ledger=Ledger(tmp_path / "ledger.sqlite3"))
    s = lm.session("s")
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You code."}]
    for k, hourly in enumerate((1_000, 0)):  # the second call's writes were five-minute ones
        msgs.append({"role": "user", "content": f"step {k}"})
        s.before_model_call(msgs, api="anthropic", now=float(k))
        usage = {"input_tokens": 10, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 1_000}
        usage["cache_creation"] = {
            "ephemeral_1h_input_tokens": hourly,
            "ephemeral_5m_input_tokens": 1_000 - hourly,
        }
        s.after_model_call({"role": "assistant", "content": "ok"}, usage, api="anthropic")
        msgs.append({"role": "assistant", "content": "ok"})
    first = status.run(lm.ledger, lm.registry, lm.config, "s").splitlines()[0]
    assert first.endswith(", eviction off, cache TTL 1 hour)") and len(first) <= 110
    assert json.loads(status.run(lm.ledger, lm.registry, lm.config, "s", as_json=True))["cacheTtl"] == {
        "asked": "long",
        "writeTokens": 2_000,
        "write1hTokens": 1_000,
    }
    assert "cache TTL the provider wrote: 50% 1-hour" in report.run(lm.ledger, "s")
    assert cache_ttl.shown(0, 0) == "cache TTL the provider wrote: no cache writes reported"
    assert cache_ttl.asked_words("host") == "cache TTL as the host asks"
