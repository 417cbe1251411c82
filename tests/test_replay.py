from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.cli import main
from lightmem_plugin.measure.replay import Vanilla, replay_paths, replay_trace, summarize
from lightmem_plugin.measure.retention import RECOVER_CALL_TOKENS
from lightmem_plugin.measure.traces.base import Trace, TraceCall
from lightmem_plugin.reduction.base import stub
from lightmem_plugin.tokens import TokenCounter

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
TRACE = DATA / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz"
SHARED = ROOT.parent / "shared" / "traces" / "swe"

KEYS = {
    "sessions",
    "calls",
    "input_tokens",
    "hit_tokens",
    "miss_tokens",
    "hit_rate",
    "K",
    "retention_kept",
    "retention_recoverable",
    "retention_lost",
    "retention_kept_lines",
    "retention_recoverable_lines",
    "retention_lost_lines",
    "error_lines_kept",
    "K_charged",
    "lines_changed_outside_stubs",
    "overhead_ms_p50",
    "overhead_ms_p99",
}


def test_replay_json_has_the_documented_fields_and_dumps_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(TRACE), "--mode", "normal", "--json", "--dump-requests", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= KEYS
    assert out["retention_lost"] == 0.0
    # per session: money, cold starts, short reads (the provider's drops), the host's compactions and
    # the uses lost to them
    [session] = out["per_session"]
    assert session["calls"] == out["calls"] and round(session["usd"], 4) == out["usd"] > 0
    for key in ("cold_starts", "short_reads", "host_compactions", "lost_to_compaction", "compacted_before"):
        assert key in session
    assert out["compaction"] == "modelled"
    dumped = list(tmp_path.glob("*.jsonl"))
    assert len(dumped) == 1
    lines = dumped[0].read_text().splitlines()
    assert len(lines) == out["calls"]
    assert all("messages" in json.loads(line) for line in lines)


def test_modes_never_cost_more_than_vanilla_and_lose_nothing() -> None:
    k = {m: replay_paths([TRACE], m)[0] for m in ("vanilla", "conservative", "normal", "aggressive")}
    assert k["conservative"].K <= k["vanilla"].K
    assert k["aggressive"].K <= k["normal"].K <= k["vanilla"].K
    assert all(r.lost == 0 for r in k.values())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("traces", "provider"),
    [
        # swe priced by the token: a provider's block rounding moves a session's K by up to a block a
        # call whenever two modes keep different lengths (astroid-1978 on the DeepSeek model:
        # aggressive 1.0012x normal, while by the token it is cheaper), so the rounding would decide
        # this check, not the policy
        (SHARED, "token"),
        # Claude Code on its own provider's cache (Anthropic's breakpoints: exact, no rounding), where
        # a break re-writes every message: priced as a prefix cache's, one batch made aggressive cost
        # 2.2% more than normal on session 8463c716
        (SHARED.parent / "claude-code", None),
    ],
    ids=["swe", "claude-code"],
)
def test_aggressive_never_costs_more_than_normal_on_any_real_session(
    traces: Path, provider: str | None
) -> None:
    if not traces.exists():
        pytest.skip(f"needs {traces} (the full recorded sessions)")
    # on the prompts as the host sent them: where the host's compaction is modelled, aggressive keeps
    # 258c7280 under the threshold (no compaction, nothing lost) and pays 7% more than normal, which
    # compacts and loses 61 uses; compacting before the host does is issue #42's work
    normal = {
        r.id: r.K_charged for r in replay_paths([traces], "normal", provider=provider, compaction="recorded")
    }
    aggressive = {
        r.id: r.K_charged
        for r in replay_paths([traces], "aggressive", provider=provider, compaction="recorded")
    }
    worse = {sid: aggressive[sid] / normal[sid] for sid in normal if aggressive[sid] > normal[sid]}
    assert not worse, worse


FILE_VIEW = (
    "<returncode>0</returncode>\n<output>\n"
    "def compute_area(width, height):\n"
    '    """Area of the plot in square meters."""\n'
    "    return width * height * SCALE_FACTOR  \n"
    "</output>"
)
DOC_LINE = '    """Area of the plot in square meters."""'
KEY = "0123456789abcdef0123456789abcdef"


def _assistant(text: str, command: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": text}
    if command:
        args = json.dumps({"command": command})
        msg["tool_calls"] = [{"id": "c", "type": "function", "function": {"name": "bash", "arguments": args}}]
    return msg


def tiny_trace() -> Trace:
    """Five calls: view a file, then quote two parts of its docstring line at calls 2 and 3 (the
    second part is not in the agent's first quote, so it is a use of the tool output again)."""
    outputs = [
        _assistant("", "cat app/area.py"),
        _assistant("Let me look around.", "ls"),
        _assistant(f"It says {DOC_LINE[-32:]}"),
        _assistant(f"and begins {DOC_LINE[:32]}", "ls"),
        _assistant("done"),
    ]
    tools = [
        {"role": "tool", "content": FILE_VIEW},
        {"role": "tool", "content": "ok"},
        None,
        {"role": "tool", "content": "ok"},
    ]
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You code."},
        {"role": "user", "content": "Fix."},
    ]
    calls = []
    for i, out in enumerate(outputs):
        calls.append(TraceCall(list(history), out, 100, 0))
        history.append(out)
        if i < len(tools) and tools[i] is not None:
            history.append(tools[i])  # type: ignore[arg-type]
    return Trace("tiny", "test", "deepseek", calls)


class StubFileView:
    """Shows the file view as a stub (recoverable) and strips a trailing space nowhere else."""

    def transform(self, index: int, prompt: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {**m, "content": stub(KEY, len(FILE_VIEW))} if m.get("content") == FILE_VIEW else m
            for m in prompt
        ]

    def lookup(self, key: str) -> str | None:
        return FILE_VIEW if key == KEY else None


class StripSpaces(Vanilla):
    """Strips trailing whitespace of every tool output line (what the whitespace pass does)."""

    def transform(self, index: int, prompt: list[dict[str, Any]]) -> list[dict[str, Any]]:
        strip = lambda t: "\n".join(line.rstrip() for line in t.split("\n"))  # noqa: E731
        return [{**m, "content": strip(m["content"])} if m.get("role") == "tool" else m for m in prompt]


def test_k_charged_is_k_when_nothing_is_only_recoverable() -> None:
    res = replay_trace(tiny_trace(), Vanilla())
    assert res.recoverable == 0 and res.K_charged == res.K
    assert res.lines_changed_outside_stubs == 0


def test_k_charged_adds_one_recover_round_trip_per_artifact_and_range() -> None:
    """Recoverable at calls 2 and 3 (same lines): charged once, at call 2, as misses there and at the
    cached rate on the two calls after it."""
    trace = tiny_trace()
    res = replay_trace(trace, StubFileView())
    assert (res.uses, res.recoverable, res.recovers) == (2, 2, 1)
    tokens = TokenCounter().count(DOC_LINE)
    assert res.recovered_tokens == tokens
    expected = (RECOVER_CALL_TOKENS + tokens) * (1 + 0.1 * (len(trace.calls) - 2 - 1))
    assert res.K_charged - res.K == pytest.approx(expected)
    row = summarize([res])
    assert row["K_charged"] == round(res.K_charged, 1)
    assert row["retention_recoverable_lines"] == 1.0


def test_changed_lines_outside_stubs_counts_a_stripped_space_once() -> None:
    res = replay_trace(tiny_trace(), StripSpaces())
    assert res.lines_changed_outside_stubs == 1
    assert res.kept == 2 and res.kept_lines == 2  # the quoted line itself is untouched


def test_stubs_name_the_recovery_the_recorded_host_has(tmp_path: Path) -> None:
    """mini-swe-agent calls bash alone: through lightmem2 it gets stubs naming the shell command
    (recoverHint "auto"). The recorded prompts list no tools, so the replay named lightmem2_recover,
    which that agent cannot call: its figures were for other bytes than the host receives."""
    replay_paths([TRACE], "normal", dump_dir=tmp_path)
    (dump,) = tmp_path.glob("*.jsonl")
    sent = dump.read_text()
    assert "archived; run: lightmem2 recover " in sent
    assert "lightmem2_recover(" not in sent
