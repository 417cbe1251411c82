"""Every test gets its own LIGHTMEM2_HOME so none touches the real user dirs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "lightmem2-home"
    home.mkdir()
    monkeypatch.setenv("LIGHTMEM2_HOME", str(home))
    yield home


def _throwaway_cluster() -> Iterator[object]:
    import pg_cluster as pg

    bin_dir = pg.find_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql/*/bin)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed: pip install -e '.[team]'")
    cluster = pg.PgCluster(bin_dir).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[object]:
    """A throwaway PostgreSQL cluster (see ``tests/pg_cluster.py``); skipped without PostgreSQL."""
    yield from _throwaway_cluster()


@pytest.fixture(scope="module")
def pg_own_cluster() -> Iterator[object]:
    """A throwaway cluster of the module's own, for tests that freeze or restart the server (the
    shared one must stay up for every other test)."""
    yield from _throwaway_cluster()


_dbs = iter(range(1 << 30))


@pytest.fixture
def pg_url(pg_cluster: object) -> Iterator[str]:
    """A fresh, empty database on the test cluster, dropped afterwards."""
    name = f"lm_test_{os.getpid()}_{next(_dbs)}"
    url: str = pg_cluster.create_db(name)  # type: ignore[attr-defined]
    try:
        yield url
    finally:
        pg_cluster.drop_db(name)  # type: ignore[attr-defined]
