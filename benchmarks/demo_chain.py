"""Build the demo's bundled multi-task session: three real recorded sessions chained with pauses.

Why a chained file: a single-task session cannot show the modes apart (aggressive's lever is a
finished task leaving the context, DESIGN 5) nor what a pause costs on a cache with time. The
demo ships inside the package, so the chain is written to ``lightmem_plugin/data/demo_chain.json.gz``
from sessions the repository already holds under the MIT licence (the demo session and two test
fixtures: ``lightmem_plugin/data/LICENSE-demo-session.md``), timed by the default pause model of
``lightmem2 continuous``. ``tests/commands/test_cmd_demo.py`` rebuilds it and fails when the
bundled bytes are not what this script writes: run ``python benchmarks/demo_chain.py`` after a
change to ``chain``, the pause model or the sources.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.measure.traces.continuous import Pauses, chain

ROOT = Path(__file__).resolve().parent.parent
SOURCES = (
    ROOT / "lightmem_plugin" / "data" / "demo_session.json.gz",  # django-14997, 130 calls: the big task first
    ROOT / "tests" / "data" / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz",
    ROOT / "tests" / "data" / "deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz",
)
TARGET = ROOT / "lightmem_plugin" / "data" / "demo_chain.json.gz"
SESSION_ID = "demo-three-tasks"


def build() -> bytes:
    """The bundled file's bytes (gzip with mtime 0: the same sources give the same bytes)."""
    doc = chain([load_trace(p) for p in SOURCES], SESSION_ID, Pauses())
    return gzip.compress(json.dumps(doc, ensure_ascii=False, sort_keys=True).encode("utf-8"), mtime=0)


def main() -> int:
    data = build()
    TARGET.write_bytes(data)
    print(f"wrote {TARGET.relative_to(ROOT)} ({len(data):,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
