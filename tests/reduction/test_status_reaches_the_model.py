"""On the bundled real sessions, every reduced output still tells the model how its command ended.

mini-swe-agent frames each result as ``<returncode>N</returncode>`` + ``<output>`` + body. Before the
frame was an envelope, a repeat marker could stand for the return code line with the lines after it
(484 of 4,598 swe outputs in normal mode, ``benchmarks/frame_audit.py``), so a failed command read
like any other.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lightmem_plugin.replay import replay_paths

DATA = Path(__file__).resolve().parents[1] / "data"
SWE = sorted(DATA.glob("deepseek_*.json.gz"))
RC = re.compile(r"<returncode>-?\d+</returncode>\n")
EVICTED = "[lightmem2: output of finished work archived as "


@pytest.mark.parametrize("mode", ["normal", "aggressive"])
def test_every_reduced_output_keeps_its_return_code(mode: str, tmp_path: Path) -> None:
    from lightmem_plugin.traces import load_trace

    replay_paths(SWE, mode, dump_dir=tmp_path)
    reduced = 0
    for path in SWE:
        trace = load_trace(path)
        if not trace.calls:
            continue
        originals = [m for m in trace.calls[-1].prompt if m.get("role") == "tool"]
        with (tmp_path / f"{trace.id}.jsonl").open(encoding="utf-8") as dump:
            last = json.loads(dump.readlines()[-1])["messages"]
        sent = [m for m in last if m.get("role") == "tool"]
        for original, shown in zip(originals, sent, strict=True):  # single-task: no message leaves
            status = RC.match(original["content"])
            if status is None or shown["content"] == original["content"]:
                continue
            if shown["content"].startswith(EVICTED):  # paged out whole (aggressive): archived, named
                continue
            reduced += 1
            assert shown["content"].startswith(status.group(0) + "<output>\n"), shown["content"][:300]
            assert shown["content"].endswith("</output>"), shown["content"][-300:]
    assert reduced >= 3  # the sessions do reduce framed outputs: the check is not vacuous
