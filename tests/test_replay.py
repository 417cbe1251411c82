from __future__ import annotations

import json
from pathlib import Path

import pytest

from lightmem_plugin.cli import main
from lightmem_plugin.replay import replay_paths

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
    dumped = list(tmp_path.glob("*.jsonl"))
    assert len(dumped) == 1
    lines = dumped[0].read_text().splitlines()
    assert len(lines) == out["calls"]
    assert all("messages" in json.loads(line) for line in lines)


ALIGNMENT = 1.001


def test_modes_never_cost_more_than_vanilla_and_lose_nothing() -> None:
    k = {m: replay_paths([TRACE], m)[0] for m in ("vanilla", "conservative", "normal", "aggressive")}
    assert k["conservative"].K <= k["vanilla"].K
    assert k["aggressive"].K <= k["normal"].K <= k["vanilla"].K
    assert all(r.lost == 0 for r in k.values())


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.exists(), reason="needs ../shared/traces/swe (the full recorded sessions)")
def test_aggressive_never_costs_more_than_normal_on_any_real_session() -> None:
    normal = {r.id: r.K for r in replay_paths([SHARED], "normal")}
    aggressive = {r.id: r.K for r in replay_paths([SHARED], "aggressive")}
    # 0.1%: the 64-token prefix blocks of the cache model shift with any size change, so two modes that
    # keep different bytes can differ by a few dozen tokens of alignment on a 300k-token session
    # (measured: 21-79 tokens); an eviction batch that does not pay costs 1-2%, which this catches
    worse = {
        sid: aggressive[sid] / normal[sid] for sid in normal if aggressive[sid] > normal[sid] * ALIGNMENT
    }
    assert not worse, worse
