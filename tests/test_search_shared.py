"""The search index a team gateway shares (``store.url``): what one process archives, another finds.

Marked ``postgres`` (``make pg``). Each "process" has its own home (data dir) and config naming the one
database, as two machines of a gateway would; the index must live in the database, never in a home.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from lightmem_plugin.cli import main as cli_main
from lightmem_plugin.commands.doctor import check_database
from lightmem_plugin.config import load_config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.store import Stores, open_stores
from lightmem_plugin.store.registry import Registry
from lightmem_plugin.store.sealing import KEY_ENV

pytestmark = pytest.mark.postgres

SECRET = "AKIAIOSFODNN7EXAMPLE"
ARTIFACT = (
    "collecting ...\n"
    "\n"
    f'  File "src/zebra_quokka.py", line 42, in load  # key {SECRET}\n'
    "ZebraQuokkaError: the quokka-lattice is not ready\n"
)


@pytest.fixture
def homes(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Two homes whose config names the test database; the fleet's archive key in the environment."""
    monkeypatch.setenv(KEY_ENV, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
    made = []
    for name in ("one", "two"):
        home = tmp_path / name
        home.mkdir()
        (home / "config.json").write_text(json.dumps({"store": {"url": pg_url}}))
        made.append(home)
    yield made


def _plugin(home: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LightMem, Stores]:
    monkeypatch.setenv("LIGHTMEM2_HOME", str(home))
    stores = open_stores(load_config())
    return LightMem.from_config(stores), stores


def test_what_one_process_archives_the_other_finds_redacted(
    homes: list[Path], pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    plugin, stores = _plugin(homes[0], monkeypatch)
    try:
        plugin.active_session = "sess-one"
        key = plugin.registry.put(ARTIFACT.encode())  # archiving indexes it (the registry's hook)
    finally:
        stores.close()
    other, stores = _plugin(homes[1], monkeypatch)
    try:
        assert other.search_index is not None and other.search_index.keys() == {key}  # no ensure
        (hit,) = other.search_index.search("ZebraQuokkaError: the quokka-lattice")
        assert (hit.key, hit.line) == (key, 4)
        assert other.registry.recover(key, (hit.line, hit.line)) == ARTIFACT.splitlines(keepends=True)[3]
    finally:
        stores.close()
    # lightmem2 search on the second machine: the last session that archived, the line, its recover call
    assert cli_main(["search", '"src/zebra_quokka.py", line 42']) == 0
    out = capsys.readouterr().out
    assert out.startswith('1 hit for ""src/zebra_quokka.py", line 42" in session sess-one'), out
    assert f"{key} line 3" in out
    assert f"lightmem2 recover {key} --lines 3:3" in out and SECRET not in out
    assert cli_main(["search", "--regex", r"line \d+, in load"]) == 0 and key in capsys.readouterr().out
    # the index is in the database, redacted, and in no home
    assert not any((h / "search.sqlite3").exists() for h in homes)
    with psycopg.connect(pg_url) as conn:
        lines = [r[0] for r in conn.execute("SELECT text FROM lm_search_lines ORDER BY line_no")]
    assert len(lines) == 3 and "src/zebra_quokka.py" in lines[1] and SECRET not in "".join(lines)


def test_doctor_reports_the_shared_index_and_fix_rebuilds_it(
    homes: list[Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LIGHTMEM2_HOME", str(homes[0]))
    config = load_config()
    stores = open_stores(config)
    try:
        registry = stores.registry_like(Registry(homes[0] / "artifacts"))  # no hook: not indexed
        key = registry.put(ARTIFACT.encode())
        check = check_database(config)
        assert check.status == "warn" and "search index of 0 artifacts (1 stale)" in check.detail
        assert check.fix == "run `lightmem2 doctor --fix` to re-index the artifacts"
        cli_main(["doctor", "--fix"])
        out = capsys.readouterr().out
        assert "[fixed] search index: 1 artifacts were missing or stale; re-indexed 1" in out
        assert [h.key for h in stores.search_index().search("quokka-lattice")] == [key]
        check = check_database(config)
        assert check.status == "pass" and "search index of 1 artifacts (0 stale)" in check.detail
        assert not (homes[0] / "search.sqlite3").exists()
    finally:
        stores.close()


def test_collected_artifacts_leave_the_shared_index(
    homes: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin, stores = _plugin(homes[0], monkeypatch)
    try:
        plugin.registry.max_bytes = 1
        keys = [plugin.registry.put(f"{ARTIFACT}{n}\n".encode()) for n in range(3)]
        index = stores.search_index()
        assert index.keys() == set(keys)
        removed = plugin.registry.gc(live_keys=[keys[2]])
        assert removed == keys[:2] and index.keys() == {keys[2]} and index.stale(plugin.registry) == 0
        assert [h.key for h in index.search("quokka-lattice")] == [keys[2]]
    finally:
        stores.close()
