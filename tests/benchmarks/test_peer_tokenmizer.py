"""The TokenMizer peer harness on one short recorded session, through its real proxy in its own venv.

The peer environment (``benchmarks/.peer-venv``) is built on first use with pip, the one step that
needs PyPI; where that cannot be done the test is skipped and says why. Everything after it runs
offline: the provider SDK is a capturing stub inside the driver.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from peers.task_probe import TaskProbe  # noqa: E402
from peers.tokenmizer import (  # noqa: E402
    ROWS,
    PeerError,
    TokenMizerDriver,
    TokenMizerPolicy,
    Variant,
    ensure_venv,
    peer_rows,
    replay_tokenmizer,
)

from lightmem_plugin.measure.replay import replay_paths, summarize  # noqa: E402
from lightmem_plugin.measure.traces import load_trace  # noqa: E402

TRACE = ROOT / "tests" / "data" / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz"


@pytest.fixture(scope="module")
def peer_venv() -> Path:
    try:
        ensure_venv()
    except PeerError as err:
        pytest.skip(
            f"TokenMizer 0.6.1 cannot be installed into its own venv here, so the peer is not tested: {err}"
        )
    return ROOT / "benchmarks" / ".peer-venv"


@pytest.fixture(scope="module")
def captured(peer_venv: Path) -> dict[Variant, tuple[list[list[dict[str, Any]]], TokenMizerDriver]]:
    """Every call of the session through each variant: the captured prompts and the (closed) driver."""
    trace = load_trace(TRACE)
    out: dict[Variant, tuple[list[list[dict[str, Any]]], TokenMizerDriver]] = {}
    for variant in ("default", "frozen_bridge"):
        with TokenMizerDriver(variant, peer_venv) as driver:
            policy = TokenMizerPolicy(driver, trace)
            prompts = []
            for i, call in enumerate(trace.calls):
                prompts.append(policy.transform(i, call.prompt))
                assert driver.last_answer is not None
                assert driver.last_answer["tool_calls"] == call.output["tool_calls"], (
                    "the stub must answer the recording"
                )
        out[variant] = (prompts, driver)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["default", "frozen_bridge"])
def test_every_call_is_captured_in_openai_chat_form(captured: dict[Variant, Any], variant: Variant) -> None:
    trace = load_trace(TRACE)
    prompts, driver = captured[variant]
    assert len(prompts) == len(trace.calls)
    for prompt, call in zip(prompts, trace.calls, strict=True):
        assert {m["role"] for m in prompt} <= {"system", "user", "assistant", "tool"}
        if call.prompt[-1]["role"] == "tool":  # the newest tool result goes upstream untouched
            assert prompt[-1] == {k: call.prompt[-1][k] for k in ("role", "content", "tool_call_id")}
        else:  # the opening user turn: TokenMizer may append its context block to it
            assert prompt[-1]["content"].startswith(call.prompt[-1]["content"])
    first_system = prompts[0][0]["content"]
    assert trace.calls[0].prompt[0]["content"] in first_system  # its terse-output rule is prepended
    assert driver.settings["provider"] == "deepseek"
    assert driver.settings["stable_window_effective"] is (variant == "frozen_bridge")
    assert any("rate limiter" in change for change in driver.changes)
    assert driver.fallbacks == 0


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["default", "frozen_bridge"])
def test_long_prompts_are_windowed_behind_a_bridge(captured: dict[Variant, Any], variant: Variant) -> None:
    trace = load_trace(TRACE)
    prompts, _driver = captured[variant]
    last = prompts[-1]
    assert len(json.dumps(last)) < len(json.dumps(trace.calls[-1].prompt))
    assert any("earlier messages omitted" in str(m["content"]) for m in last if m["role"] == "system")


@pytest.mark.slow
def test_frozen_bridge_holds_the_prefix_still(captured: dict[Variant, Any]) -> None:
    """With the cut held, consecutive windowed prompts share their opening messages more often."""

    def shared_heads(prompts: list[list[dict[str, Any]]]) -> int:
        return sum(a[:3] == b[:3] for a, b in itertools.pairwise(prompts))

    assert shared_heads(captured["frozen_bridge"][0]) > shared_heads(captured["default"][0])


@pytest.fixture(scope="module")
def rows(peer_venv: Path) -> dict[str, dict[str, Any]]:
    return peer_rows(TRACE, peer_venv)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tokenmizer", "tokenmizer_frozen_bridge"])
def test_rows_use_our_replay_figures_and_nothing_is_recoverable(rows: dict[str, Any], name: str) -> None:
    row = rows[name]
    vanilla = summarize(replay_paths([TRACE], "vanilla"))
    assert row["calls"] == vanilla["calls"] == len(load_trace(TRACE).calls)
    assert row["retention_uses"] == vanilla["retention_uses"] > 0
    assert row["retention_recoverable"] == 0.0
    assert row["retention_kept"] + row["retention_lost"] == pytest.approx(1.0, abs=1e-3)
    assert row["input_tokens"] < vanilla["input_tokens"]
    assert 0.0 < row["task_statement_present"] < 1.0  # the first call has it; windowed ones do not
    assert row["peer"]["package"] == "tokenmizer 0.6.1"
    assert row["peer"]["variant"] == ROWS[name]
    assert row["peer"]["proxy_ms_p50"] > 0


@pytest.mark.slow
def test_frozen_bridge_is_cheaper_on_a_prefix_cache(rows: dict[str, Any]) -> None:
    assert rows["tokenmizer_frozen_bridge"]["hit_rate"] > rows["tokenmizer"]["hit_rate"]
    assert rows["tokenmizer_frozen_bridge"]["K"] < rows["tokenmizer"]["K"]


@pytest.mark.slow
def test_a_second_replay_gives_the_same_row(rows: dict[str, Any], peer_venv: Path) -> None:
    """Reproducible up to TokenMizer's own clock: its graph stamps nodes with wall time, which on the full
    swe set moved at most 19 of 45M input tokens between two runs."""
    again = replay_tokenmizer([TRACE], "default", peer_venv)
    first = rows["tokenmizer"]
    for key in ("K", "input_tokens", "hit_tokens"):
        assert again[key] == pytest.approx(first[key], rel=1e-3)
    for key in ("retention_kept", "task_statement_present"):
        assert again[key] == pytest.approx(first[key], abs=0.02)


@pytest.mark.slow
def test_task_probe_sees_the_first_prompt_keep_the_task(peer_venv: Path) -> None:
    trace = load_trace(TRACE)
    with TokenMizerDriver("default", peer_venv) as driver:
        probe = TaskProbe(lambda t: TokenMizerPolicy(driver, t))
        policy = probe(trace)
        policy.transform(0, trace.calls[0].prompt)
    assert probe.figures()["task_statement_present"] == 1.0


def test_an_install_failure_is_a_peer_error_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def pip_fails(cmd: list[str], **_kw: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(
            cmd, 1, "", "ERROR: No matching distribution found for tokenmizer==0.6.1"
        )

    monkeypatch.setattr(subprocess, "run", pip_fails)
    with pytest.raises(
        PeerError, match=r"cannot install tokenmizer==0\.6\.1 .*No matching distribution.*PyPI"
    ):
        ensure_venv(tmp_path / "venv")
    assert not (tmp_path / "venv" / ".installed").exists()
