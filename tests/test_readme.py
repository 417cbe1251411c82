from __future__ import annotations

from pathlib import Path

from lightmem_plugin.commands._readme import CLI_START, KEYS_START, config_section, render_readme

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_generated_blocks_are_current() -> None:
    text = README.read_text(encoding="utf-8")
    assert CLI_START in text and KEYS_START in text
    assert render_readme(text) == text, "README CLI/config blocks are stale: run `make docs`"


def test_config_section_lists_every_nested_key() -> None:
    section = config_section()
    for key in (
        "eviction.batchTurns",
        "estimator.proxyBaseUrl",
        "registry.maxBytes",
        "server.upstreams.openai",
    ):
        assert f"`{key}`" in section


def test_modes_table_matches_the_config_defaults() -> None:
    from lightmem_plugin.config import MODES, Config

    text = README.read_text(encoding="utf-8")
    cfg = Config()
    for mode in MODES:
        table = cfg.reduction.table(mode)
        row = next(line for line in text.splitlines() if line.startswith(f"| {mode} |"))
        assert f"| {table.triggerChars} / {table.capChars} |" in row, row
        assert ("off" in row.split("|")[-2]) != table.eviction, row
    assert f"every {cfg.eviction.batchTurns} calls" in text
