"""The Headroom peer harness: its pieces without Headroom (fast), and its real proxy in its own venv (slow).

The fast tests drive ``HeadroomPolicy`` with a stand-in driver that speaks the driver's protocol, so
the conversion to Anthropic Messages and back, the head stand-in, the hashes retention finds, the row
merge and the README block are checked without the peer installed. The slow tests build
``benchmarks/.peer-venv-headroom`` with pip (the one step that needs PyPI; skipped where it cannot be
done) and replay a short constructed session through Headroom's real proxy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import run as bench_run  # noqa: E402
from peers.common import PeerError  # noqa: E402
from peers.headroom import (  # noqa: E402
    HEAD,
    ROWS,
    SIGNATURE,
    AnthropicForm,
    HeadroomDriver,
    HeadroomPolicy,
    ensure_venv,
    head_message,
    merge,
    recorded_usage,
    stub_keys,
)
from readme_table import render_peers, render_peers_verdict  # noqa: E402

from lightmem_plugin.measure.replay import replay_trace  # noqa: E402
from lightmem_plugin.measure.traces.base import Trace, TraceCall  # noqa: E402

LOG = (
    "\n".join(
        f"2026-01-01T00:00:{i % 60:02d} INFO worker-{i % 5} processed batch {i} in {i * 13 % 97} ms"
        for i in range(400)
    )
    + "\nERROR worker-3 failed batch 401: timeout\n"
)
DROPPED = "2026-01-01T00:00:05 INFO worker-0 processed batch 5 in 65 ms"


def session(kind: str = "claude-code", thinking: bool = True) -> Trace:
    """A short session: the agent runs a command whose long log it quotes a line of two calls later.
    ``thinking``: its first answer carries thinking (Headroom's default mode then left the log whole)."""
    anthropic = kind == "claude-code"
    user = {"role": "user", "content": "Show me the batch job log."}
    ask = {
        "role": "assistant",
        "content": "",
        **({"reasoning_content": "look at the log"} if thinking else {}),
        "tool_calls": [
            {
                "id": "t1",
                "type": "function",
                "function": {"name": "Bash", "arguments": '{"command": "cat job.log"}'},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": "t1", "content": LOG}
    answer = {"role": "assistant", "content": "Batch 401 timed out."}
    again = {"role": "user", "content": "And the first batches?"}
    quote = {"role": "assistant", "content": f"They ran fine, e.g. {DROPPED}"}
    calls = [
        TraceCall([user], ask, 1000, 0, 10, at=1000.0),
        TraceCall([user, ask, result], answer, 9000, 900, 10, at=1010.0),
        TraceCall([user, ask, result, answer, again], quote, 9100, 8900, 20, at=1020.0),
    ]
    provider = "anthropic" if anthropic else "deepseek"
    model = "claude-sonnet-4-5" if anthropic else "deepseek-chat"
    return Trace(f"constructed-{kind}", "test", provider, calls, kind=kind, model=model)  # type: ignore[arg-type]


# -- without Headroom ----------------------------------------------------------------------------


def test_unchanged_messages_come_back_as_the_very_chat_messages() -> None:
    trace = session()
    prompt = trace.calls[2].prompt
    form = AnthropicForm()
    out = form.to_anthropic(prompt)
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant", "user"]
    assert out[1]["content"][0] == {"type": "thinking", "thinking": "look at the log", "signature": SIGNATURE}
    assert out[1]["content"][-1] == {
        "type": "tool_use",
        "id": "t1",
        "name": "Bash",
        "input": {"command": "cat job.log"},
    }
    assert out[2]["content"] == [{"type": "tool_result", "tool_use_id": "t1", "content": LOG}]
    back = form.to_chat(json.loads(json.dumps(out)))  # as the proxy's JSON hands it back
    assert len(back) == len(prompt) and all(a is b for a, b in zip(back, prompt, strict=True))


def test_a_run_of_tool_results_is_one_user_message_and_a_changed_one_is_converted() -> None:
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}} for i in range(2)
    ]
    prompt = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c0", "content": "first"},
        {"role": "tool", "tool_call_id": "c1", "content": "second"},
    ]
    form = AnthropicForm()
    out = form.to_anthropic(prompt)
    assert len(out) == 3 and [b["tool_use_id"] for b in out[2]["content"]] == ["c0", "c1"]
    out[2]["content"][1] = {"type": "tool_result", "tool_use_id": "c1", "content": "2nd", "cache_control": {}}
    back = form.to_chat(out)
    assert back[:3] == prompt[:3] and back[2] is prompt[2]  # the untouched result is the same object
    assert back[3] == {"role": "tool", "tool_call_id": "c1", "content": "2nd"}
    # a marker on a block (cache_control) alone changes no chat message
    out[1] = {
        **out[1],
        "content": [{**out[1]["content"][0], "cache_control": {"type": "ephemeral"}}, *out[1]["content"][1:]],
    }
    assert form.to_chat(out)[1] == prompt[1]


def test_a_tool_the_proxy_adds_becomes_a_message_before_all_others() -> None:
    bash = {"type": "function", "function": {"name": "bash"}}
    body = {"messages": [], "tools": [bash]}
    assert head_message(body, {"messages": [], "tools": [bash]}) is None
    retrieve = {"name": "headroom_retrieve", "input_schema": {}}
    head = head_message(body, {"messages": [], "tools": [bash, retrieve]})
    assert head is not None and head["role"] == "system" and head["content"].startswith(HEAD)
    assert "headroom_retrieve" in head["content"] and '"bash"' not in head["content"]
    assert head_message({"messages": []}, {"messages": [], "system": "be brief"}) is not None


def test_stub_keys_are_the_hashes_its_markers_show() -> None:
    text = (
        "[402 lines compressed to 5. Retrieve more: hash=908e43ce9fff102d36ee172b]\n"
        "<<ccr:af060c041a1a,json,25KB>> and again hash=908e43ce9fff102d36ee172b; [↑3L same as msg 4: 'x']"
    )
    assert stub_keys(text) == ["908e43ce9fff102d36ee172b", "af060c041a1a"]
    assert stub_keys("hash=xyz and <<ccr:12>>") == []


def test_recorded_usage_is_in_the_form_of_each_api() -> None:
    call = TraceCall([], {}, 1000, 800, 50, cache_read_input_tokens=800, cache_creation_input_tokens=150)
    assert recorded_usage(call, "anthropic") == {
        "input_tokens": 50,
        "cache_read_input_tokens": 800,
        "cache_creation_input_tokens": 150,
        "output_tokens": 50,
    }
    chat = recorded_usage(call, "chat")
    assert chat["prompt_tokens"] == 1000 and chat["prompt_tokens_details"] == {"cached_tokens": 800}


class FakeDriver:
    """Speaks for the Headroom driver: drops the log's INFO lines behind a hash it can give back."""

    def __init__(self) -> None:
        self.store: dict[str, str] = {}
        self.bodies: list[dict[str, Any]] = []
        self.head_changes = 0

    def send(
        self, session: str, api: str, body: dict[str, Any], reply: dict[str, Any], usage: dict[str, Any]
    ) -> dict[str, Any]:
        self.bodies.append(body)
        sent = json.loads(json.dumps(body))
        for message in sent["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else ():
                if block.get("type") == "tool_result" and block["content"] == LOG:
                    self.store["908e43ce9fff102d36ee172b"] = LOG
                    block["content"] = (
                        "ERROR worker-3 failed batch 401: timeout\n[402 lines compressed to 1. Retrieve more: hash=908e43ce9fff102d36ee172b]"
                    )
                    sent["tools"] = [{"name": "headroom_retrieve"}]
        return sent

    def lookup(self, key: str) -> str | None:
        return self.store.get(key)


def test_replay_judges_a_dropped_line_recoverable_by_the_hash_the_prompt_shows() -> None:
    trace = session()
    driver = FakeDriver()
    policy = HeadroomPolicy(driver, trace)  # type: ignore[arg-type]
    res = replay_trace(trace, policy)
    assert driver.bodies[0]["model"] == "claude-sonnet-4-5" and "tools" not in driver.bodies[0]
    assert res.uses >= 1 and res.recoverable >= 1 and res.lost == 0
    assert driver.head_changes == 2  # the retrieve tool, from the call that first compressed on
    # a store that does not give the original back: the same prompts lose the line
    blind = HeadroomPolicy(FakeDriver(), trace)  # type: ignore[arg-type]
    blind.lookup = lambda key: None  # type: ignore[method-assign]
    assert replay_trace(trace, blind).lost >= 1


def test_swe_sessions_go_as_openai_chat_with_the_bash_tool() -> None:
    trace = session("swe")
    policy = HeadroomPolicy(FakeDriver(), trace)  # type: ignore[arg-type]
    body = policy.request(trace.calls[1].prompt)
    assert body["messages"] is trace.calls[1].prompt and body["model"] == "deepseek-chat"
    assert [t["function"]["name"] for t in body["tools"]] == ["bash"] and body["stream"] is False


def _row(k: float, usd: float, **peer: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "K": k,
        "K_charged": k,
        "usd": usd,
        "sessions": 2,
        "calls": 10,
        "hit_rate": 0.9,
        "retention_kept_lines": 0.95,
        "retention_kept": 0.96,
        "retention_recoverable_lines": 0.01,
        "retention_lost_lines": 0.04,
        "task_statement_present": 1.0,
    }
    if peer:
        row["peer"] = {
            "package": "headroom-ai 0.42.0",
            "changes": ["HEADROOM_OFFLINE=1", "Kompress off"],
            **peer,
        }
    return row


def test_merge_puts_the_rows_beside_the_committed_ones_with_their_ratios(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    plain = {"vanilla": _row(100.0, 10.0), "aggressive": _row(80.0, 8.0), "oracle": _row(60.0, 6.0)}
    results.write_text(
        json.dumps({"traces": {"swe": {"plain": plain, "volatile_head": {}}}}), encoding="utf-8"
    )
    merge(results, "swe", {"headroom": _row(90.0, 9.5, variant="default")})
    table = json.loads(results.read_text(encoding="utf-8"))["traces"]["swe"]["plain"]
    assert set(table) == {"vanilla", "aggressive", "oracle", "headroom"}
    assert table["headroom"]["K_vs_vanilla"] == 0.9 and table["headroom"]["way_to_oracle"] == 0.25


def test_the_peers_block_gives_each_peer_row_beside_our_modes_and_what_was_changed() -> None:
    plain = {
        name: _row(k, k / 10) | {"K_vs_vanilla": k / 100, "K_charged_vs_vanilla": k / 100}
        for name, k in (("vanilla", 100.0), ("conservative", 95.0), ("normal", 90.0), ("aggressive", 85.0))
    }
    plain["headroom"] = _row(104.0, 10.4, variant="default") | {
        "K_vs_vanilla": 1.04,
        "K_charged_vs_vanilla": 1.04,
    }
    results = {"traces": {"swe": {"plain": plain}, "claude-code": {"plain": dict(plain)}}}
    block = render_peers(results)
    lines = [line for line in block.splitlines() if line.startswith("| ")]
    assert [line.split(" | ")[0] for line in lines if "headroom" in line] == [
        "| headroom (headroom-ai 0.42.0)"
    ] * 2
    assert "| lightmem2 aggressive | **0.850** | 0.850 |" in block
    assert "| headroom (headroom-ai 0.42.0) | **1.040** | 1.040 | 1.040 | 90.0% |" in block
    assert "headroom-ai 0.42.0, changed to replay offline: HEADROOM_OFFLINE=1; Kompress off." in block
    assert "swe: aggressive 0.850, headroom 1.040; claude-code: aggressive 0.850, headroom 1.040" in (
        render_peers_verdict(results)
    )


def test_a_peer_that_cannot_be_built_is_skipped_with_a_line_not_a_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def unbuildable(path: Path) -> dict[str, dict[str, Any]]:
        raise PeerError("cannot install headroom-ai[proxy]==0.42.0: no network")

    monkeypatch.setattr(bench_run, "PEERS", (("Headroom", unbuildable, ("swe",)),))
    monkeypatch.setattr(bench_run, "BASELINES", {})
    monkeypatch.setattr(bench_run, "MODES", ("vanilla",))
    swe = tmp_path / "swe"
    swe.mkdir()
    (swe / "one.json.gz").symlink_to(
        ROOT / "tests" / "data" / "deepseek_reasoner_dev__pvlib__pvlib-python-1854.json.gz"
    )
    out = bench_run.run_set(swe, quick=False, peers=True)
    assert set(out["plain"]) == {"vanilla"}
    assert "Headroom rows skipped: cannot install headroom-ai" in capsys.readouterr().err


# -- Headroom's real proxy, in its own venv --------------------------------------------------------


@pytest.fixture(scope="module")
def peer_venv() -> Path:
    try:
        ensure_venv()
    except PeerError as err:
        pytest.skip(
            f"Headroom 0.42.0 cannot be installed into its own venv here, so the peer is not tested: {err}"
        )
    return ROOT / "benchmarks" / ".peer-venv-headroom"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["claude-code", "swe"])
def test_headroom_compresses_the_log_and_its_hash_gives_the_original_back(peer_venv: Path, kind: str) -> None:
    trace = session(kind, thinking=False)
    with HeadroomDriver("default", peer_venv) as driver:
        assert driver.version == "0.42.0" and driver.settings["savings_profile"] == "coding"
        assert any("HEADROOM_OFFLINE=1" in change for change in driver.changes)
        policy = HeadroomPolicy(driver, trace)
        prompts = [policy.transform(i, call.prompt) for i, call in enumerate(trace.calls)]
        assert prompts[0][-1] == trace.calls[0].prompt[-1]  # nothing to compress yet: the user turn as sent
        tool = next(m for m in prompts[1] if m.get("role") == "tool")
        assert tool["content"] != LOG and len(tool["content"]) < len(LOG) / 5
        assert "ERROR worker-3 failed batch 401: timeout" in tool["content"]  # the error line stays
        keys = stub_keys(tool["content"])
        assert keys and policy.lookup(keys[0]) == LOG
        assert policy.lookup("0" * 24) is None
        assert any(m["content"].startswith(HEAD) for m in prompts[1] if m["role"] == "system")
    # a fresh proxy: the same requests again would be answered from its response cache, not forwarded
    with HeadroomDriver("default", peer_venv) as driver:
        res = replay_trace(trace, HeadroomPolicy(driver, trace))
    assert res.recoverable >= 1 and res.lost == 0


@pytest.mark.slow
def test_the_driver_gives_the_same_bytes_for_the_same_input(peer_venv: Path) -> None:
    sent = []
    for _ in range(2):
        with HeadroomDriver("agent90", peer_venv) as driver:
            policy = HeadroomPolicy(driver, session())
            sent.append(json.dumps([policy.transform(i, c.prompt) for i, c in enumerate(policy.trace.calls)]))
    assert sent[0] == sent[1]
    assert set(ROWS.values()) == {"default", "agent90"}
