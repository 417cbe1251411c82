"""The data dir's layout is named once (:class:`~lightmem_plugin.store.home.Home`), and what opens a
store there goes through it."""

from __future__ import annotations

import ast
from pathlib import Path

from lightmem_plugin.config import Config
from lightmem_plugin.faults import FaultSink
from lightmem_plugin.server.secret import secret_path
from lightmem_plugin.store import reading_registry
from lightmem_plugin.store.home import Home
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.store.search_index import SearchIndex
from lightmem_plugin.store.session_state import StateStore

PACKAGE = Path(__file__).resolve().parents[1] / "lightmem_plugin"


def test_each_store_opens_its_file_in_home(isolated_home: Path) -> None:
    home = Home.default()
    assert home.root == isolated_home
    opened = [Ledger.default(), StateStore.default(), SearchIndex.default(), FaultSink.default()]
    try:
        paths = [getattr(s, "path", None) for s in opened]
    finally:
        for s in opened:
            s.close()
    assert paths == [home.ledger_file, home.states_file, home.index_file, home.faults_file]
    assert all(p is not None and p.exists() and p.parent == isolated_home for p in paths)
    assert secret_path() == home.secret_file and secret_path(Path("/x")) == Path("/x") / home.secret_file.name


def test_the_registry_follows_the_config_and_reads_back(isolated_home: Path, tmp_path: Path) -> None:
    cfg = Config()
    assert Home.default().artifacts_dir(cfg) == isolated_home / "artifacts"
    moved = cfg.model_copy(update={"registry": cfg.registry.model_copy(update={"dir": str(tmp_path / "a")})})
    registry = Home.default().registry(moved)
    key = registry.put(b"the original, byte for byte\n")
    assert any((tmp_path / "a").rglob("*")), "the artifact went elsewhere"
    with reading_registry(moved) as again:
        assert again.get(key) == b"the original, byte for byte\n"


def test_nothing_outside_home_spells_the_data_dir() -> None:
    """``data_dir()`` is called by :class:`Home` (and defined in ``paths``); every other path under the
    data dir is one of Home's names."""
    callers = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "data_dir":
                callers.append(str(path.relative_to(PACKAGE)))
    assert callers == ["store/home.py"], callers
