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


def test_the_report_under_the_table_gives_the_tables_figures() -> None:
    """One cost model: the ledger (status, report) counts a session as the benchmark's replay does.
    Before: the bundled demo's table said normal saved 6.8% of K and the report under it 6.3%."""
    import re

    text = demo.run(str(TRACE))
    row = next(line for line in text.splitlines() if line.startswith("normal "))
    vanilla = next(line for line in text.splitlines() if line.startswith("vanilla "))
    table_input, table_k = int(row.split()[1].replace(",", "")), float(row.split()[4].replace(",", ""))
    vanilla_input, vanilla_k = (
        int(vanilla.split()[1].replace(",", "")),
        float(vanilla.split()[4].replace(",", "")),
    )
    m = re.search(r"^K ([\d,]+) vs ([\d,]+) vanilla.*input ([\d,]+) vs ([\d,]+) tokens$", text, re.M)
    assert m is not None, text
    k, k_vanilla, sent, sent_vanilla = (int(g.replace(",", "")) for g in m.groups())
    assert (sent, sent_vanilla) == (table_input, vanilla_input)
    assert abs(k - table_k) <= 1 and abs(k_vanilla - vanilla_k) <= 1  # the table rounds K to whole tokens


def test_bundled_session_is_shipped_in_the_package() -> None:
    assert demo.bundled_trace().exists()
