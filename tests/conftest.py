"""Every test gets its own LIGHTMEM2_HOME so none touches the real user dirs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "lightmem2-home"
    home.mkdir()
    monkeypatch.setenv("LIGHTMEM2_HOME", str(home))
    yield home
