"""The README and the reference in docs/: short where a newcomer starts, generated where figures live.

Every generated block (the reference's modes, passes, CLI and config keys from the code; the README's
summary and docs/BENCHMARKS.md's tables from benchmarks/results/) is compared with what its renderer
gives, so a file on disk that differs from the code fails here: run `make docs`.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest

from lightmem_plugin.commands import _readme
from lightmem_plugin.commands._readme import (
    BLOCKS,
    HOME,
    MODES_START,
    config_section,
    modes_section,
    render_doc,
)
from lightmem_plugin.config import MODES, Config
from lightmem_plugin.reduction.passes import PASSES

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted([README, *(ROOT / "docs").glob("*.md")])
sys.path.insert(0, str(ROOT / "benchmarks"))

from readme_table import H_START, render_docs  # noqa: E402


def test_generated_reference_blocks_are_current() -> None:
    for name, (start, end, _) in BLOCKS.items():
        home = ROOT / HOME[name]
        text = home.read_text(encoding="utf-8")
        assert text.count(start) == 1 and text.count(end) == 1, (name, home)
        for other in DOCS:
            if other != home:
                assert start not in other.read_text(encoding="utf-8"), f"{name} block also in {other}"
    for rel in set(HOME.values()):
        text = (ROOT / rel).read_text(encoding="utf-8")
        assert render_doc(text) == text, f"{rel} is stale: run `make docs`"


def test_generated_benchmark_blocks_are_the_committed_results() -> None:
    rendered = render_docs(ROOT)
    assert set(rendered) == {
        README,
        ROOT / "docs" / "BENCHMARKS.md",
        ROOT / "benchmarks" / "peers" / "README.md",
    }
    for path, text in rendered.items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale: run `make docs`"
    assert H_START in README.read_text(encoding="utf-8")


def test_config_section_lists_every_nested_key() -> None:
    section = config_section()
    for key in (
        "eviction.batchTurns",
        "estimator.proxyBaseUrl",
        "registry.maxBytes",
        "server.upstreams.openai",
    ):
        assert f"`{key}`" in section


def test_the_modes_table_shows_every_pass_and_what_each_mode_runs() -> None:
    cfg = Config()
    section = modes_section()
    rows = {
        line.split("|")[1].strip().strip("`"): line for line in section.splitlines() if line.startswith("| `")
    }
    for p in PASSES:
        cells = [c.strip() for c in rows[p.name].strip("|").split("|")]
        assert cells[3] == p.summary
        assert cells[4:] == ["on" if p.name in cfg.reduction.table(m).passes else "-" for m in MODES], p.name
    assert rows["envelope"].count("| on ") == len(MODES)  # the pass the hand-written table left out
    trigger = [c.strip() for c in rows["reduction.<mode>.triggerChars"].strip("|").split("|")][2:]
    assert trigger == [f"{cfg.reduction.table(m).triggerChars:,}" for m in MODES]
    eviction = [c.strip() for c in rows["reduction.<mode>.eviction"].strip("|").split("|")][2:]
    assert eviction == ["on" if cfg.reduction.table(m).eviction else "off" for m in MODES]
    assert f"once every {cfg.eviction.batchTurns} model calls" in section
    assert MODES_START in (ROOT / "docs" / "REFERENCE.md").read_text(encoding="utf-8")


def test_a_new_pass_shows_in_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = dataclasses.replace(PASSES[-1], name="newpass", summary="a pass added by one line")
    monkeypatch.setattr(_readme, "PASSES", (*PASSES, extra))
    assert "| `newpass` | select | no | a pass added by one line | - | - | - |" in _readme.modes_section()


README_MAX_LINES = 120
INTRO_MAX_WORDS = 200


def test_the_readme_fits_on_a_few_screens() -> None:
    """A newcomer reads what it does, the two commands, the figures and the install steps; the rest is
    the reference in docs/."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    intro = text.split("\n## ", 1)[0]
    assert len(intro.split()) <= INTRO_MAX_WORDS
    block = text.split("## Two commands", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in block.splitlines()] == ["make demo", "make test"]


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_docs_resolves() -> None:
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://")):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            assert dest.exists(), f"{doc.name}: {target}"
            if anchor:
                headings = re.findall(r"^#+ (.+)$", dest.read_text(encoding="utf-8"), flags=re.M)
                assert anchor in {_slug(h) for h in headings}, f"{doc.name}: {target}"
