"""``status --all``: every session the ledger holds, across a fleet sharing ``store.url``, with its user."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from ledger_rows import make_session

from lightmem_plugin.commands import report, status
from lightmem_plugin.config import Config
from lightmem_plugin.errors import UsageError
from lightmem_plugin.security import tenancy
from lightmem_plugin.store import open_stores
from lightmem_plugin.store.ledger import Ledger


@pytest.fixture(params=["embedded", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str | None:
    return request.getfixturevalue("pg_url") if request.param == "postgres" else None


def test_all_lists_every_session_of_every_process(isolated_home: Path, store_url: str | None) -> None:
    config = {"store": {"url": store_url}} if store_url else {}
    (isolated_home / "config.json").write_text(json.dumps(config))
    sessions = {
        "plain": make_session("plain", "normal", 3),
        tenancy.scoped("alice", "s1"): make_session(tenancy.scoped("alice", "s1"), "aggressive", 5),
        tenancy.scoped("bob", "s1"): make_session(tenancy.scoped("bob", "s1"), "normal", 2),
    }
    # each session written by another "process": its own store objects (on a shared store, one table)
    for rows in sessions.values():
        if store_url:
            stores = open_stores(Config.model_validate(config))
            assert stores.ledger is not None
            for r in rows:
                stores.ledger.record_call(r)
            stores.close()
        else:
            with Ledger.default() as ledger:
                for r in rows:
                    ledger.record_call(r)
    text = status.run_from_config(all_sessions=True)
    lines = text.splitlines()
    assert lines[0].startswith("3 sessions (ledger: ")
    assert [ln.split()[:3] for ln in lines[1:]] == [
        ["-", "plain", "3"],
        ["alice", "s1", "5"],
        ["bob", "s1", "2"],
    ]
    data = json.loads(status.run_from_config(as_json=True, all_sessions=True))
    got = [(s["user"], s["session"], s["calls"]) for s in data["sessions"]]
    assert got == [(None, "plain", 3), ("alice", "s1", 5), ("bob", "s1", 2)]
    # the current session comes from the same ledger (the shared one with store.url), as does report
    assert "session: user:bob/s1 (2 calls)" in status.run_from_config()
    reported = json.loads(str(report.main(argparse.Namespace(session=None, all=True, json=True))))
    assert [s["summary"]["calls"] for s in reported["sessions"]] == [3, 5, 2]


def test_all_and_session_exclude_each_other() -> None:
    with pytest.raises(UsageError, match="--session and --all"):
        status.run_from_config("x", all_sessions=True)
