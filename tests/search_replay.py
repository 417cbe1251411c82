"""A real recorded session replayed through lightmem2, for the search and export tests.

The pydicom session archives two tool outputs and keeps a session record; the search index is filled
the way ``doctor --fix`` does (``rebuild``), standing in for the registry's ``on_put`` hook.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lightmem_plugin.config import Config
from lightmem_plugin.eviction.record_store import RecordStore
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.store.registry import Registry
from lightmem_plugin.store.search_index import IndexBase, SearchIndex

TRACE = Path(__file__).parent / "data" / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz"


@dataclass
class Replayed:
    session: str
    registry: Registry
    records: RecordStore
    index: IndexBase


def replay(root: Path, index: IndexBase | None = None) -> Replayed:
    """Replay the trace with a registry, record store and index under ``root`` (or into ``index``)."""
    trace = load_trace(TRACE)
    registry = Registry(root / "artifacts")
    # file views up to 1,000 chars stay whole (default 24,000) and outputs over 1,000 chars are
    # reduced (default 2,200), so this short session archives several outputs
    config = Config.model_validate({"reduction": {"normal": {"fileViewChars": 1000, "triggerChars": 1000}}})
    plugin = LightMem(config=config, registry=registry)
    plugin.records = RecordStore(root / "records")
    session = plugin.session(trace.id)
    for call in trace.calls:
        session.before_model_call(call.prompt)
    index = index if index is not None else SearchIndex(root / "search.sqlite3")
    index.rebuild(registry, trace.id)
    return Replayed(trace.id, registry, plugin.records, index)
