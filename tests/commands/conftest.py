"""Fixtures for the command tests: a ledger filled with three realistic sessions, and an empty one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ledger_rows import fill, realistic_sessions

from lightmem_plugin.store.ledger import Ledger


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "ledger.sqlite3") as led:
        yield fill(led, realistic_sessions())


@pytest.fixture
def empty_ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "empty.sqlite3") as led:
        yield led
