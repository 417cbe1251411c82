"""Calibration as a test (issue #41): vanilla replayed through the cache model with time bills what
the provider billed, within 3%, on every dev Claude Code session in ``../shared/traces``; skipped in
a plain clone without them (the bundled sessions are checked in ``tests/test_cachesim_clock.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT.parent / "shared" / "traces"
sys.path.insert(0, str(ROOT / "benchmarks"))

pytestmark = pytest.mark.slow


@pytest.mark.skipif(not (TRACES / "claude-code").is_dir(), reason="needs ../shared/traces")
def test_every_dev_claude_code_session_is_billed_within_3_percent() -> None:
    from calibration import TARGET, calibrate

    result = calibrate(TRACES)
    rows = result["recorded"]["claude_code"]
    assert len(rows) >= 6
    off = {r["id"]: r["ratio"] for r in rows if abs(r["ratio"] - 1) > TARGET}
    assert not off, f"simulated/billed K beyond 3%: {off}"
    # the cache that never forgets missed by 17-72% on the same sessions: the check can fail
    assert any(abs(r["ratio"] - 1) > TARGET for r in result["none"]["claude_code"])
    # swe (DeepSeek, no times): 1.034 until the answers DeepSeek caches and its short reads were
    # taken from the recording; 0.995 since
    assert abs(result["recorded"]["swe_total"]["ratio"] - 1) <= TARGET
    # the host's compaction, modelled on the uncompacted history: vanilla compacts where the host did
    compacted = result["compaction"]
    assert len(compacted) >= 3
    for row in compacted:
        assert row["modelled_before"] == row["recorded_before"], row["id"]
        assert row["summary_tokens"] > 0 and row["K"] > row["K_recorded_prompts"]
