from __future__ import annotations

from pathlib import Path

from lightmem_plugin.commands import demo

TRACE = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz"
)


def test_demo_prints_every_policy_then_report_and_visual_and_reruns_cleanly() -> None:
    first = demo.run(str(TRACE))
    lines = first.splitlines()
    for policy in demo.POLICIES:
        assert any(line.startswith(policy + " ") for line in lines), policy
    assert f"session {demo.DEMO_SESSION_ID}" in first and "38 calls" in first
    html, png = (Path(p) for p in lines[-2:])
    assert html.suffix == ".html" and html.exists()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    second = demo.run(str(TRACE))
    assert "38 calls" in second


def test_bundled_session_is_shipped_in_the_package() -> None:
    assert demo.bundled_trace().exists()
