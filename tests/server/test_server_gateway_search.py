"""A team gateway's search over HTTP: two ``lightmem2 serve`` processes, one PostgreSQL, two users.

Each process has its own home, as on two machines; they share only ``store.url`` and the archive key.
alice's session goes through one process, bob's (the same recorded head, fewer calls) through the
other. Archiving on either fills the one index in the database (no ``search.sqlite3`` in any home), so
either process answers a user's search with lines the other archived; a user never sees another one's
lines, and recovering another user's key answers 404 as an unknown key does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_upstream import FakeUpstream
from server_harness import ServeProcess, ServerThread
from test_server_gateway import ARCHIVE_KEY

from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.reduction.base import STUB_RE
from lightmem_plugin.security import tenancy
from lightmem_plugin.store.registry import content_key
from lightmem_plugin.store.sealing import KEY_ENV

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz"
BOB_CALLS = 5  # with REDUCTION, this session's two archives first appear at calls 4 and 6
# file views over 1,000 chars are cut and outputs over 1,000 chars reduced, so the session archives several
REDUCTION = {"normal": {"fileViewChars": 1000, "triggerChars": 1000}}
API_KEY = "sk-provider-key-0123456789abcdefABCDEF"
TOKENS = {"alice": tenancy.new_token(), "bob": tenancy.new_token()}


def _serve(home: Path, upstream: str, store_url: str) -> ServeProcess:
    home.mkdir()
    config: dict[str, Any] = {
        "server": {"upstreams": {"openai": upstream + "/v1"}},
        "store": {"url": store_url},
        "gateway": {"users": [{"name": n, "tokenSha256": tenancy.digest(t)} for n, t in TOKENS.items()]},
        "reduction": REDUCTION,
    }
    (home / "config.json").write_text(json.dumps(config))
    return ServeProcess(home, {KEY_ENV: ARCHIVE_KEY})


def _as(user: str) -> dict[str, str]:
    return {"authorization": f"Bearer {API_KEY}", tenancy.TOKEN_HEADER: TOKENS[user]}


def test_a_users_search_finds_what_any_process_archived_and_only_theirs(tmp_path: Path, pg_url: str) -> None:
    import psycopg

    fake = FakeUpstream()
    calls = load_trace(TRACE).calls
    with ServerThread(fake.app) as up:
        serves = [_serve(tmp_path / f"home{i}", up.url, pg_url) for i in range(2)]
        try:
            for s in serves:
                s.wait_ready()
            with httpx.Client(timeout=60) as client:
                sent: dict[str, list[bytes]] = {}
                for user, serve, count in (("alice", serves[0], len(calls)), ("bob", serves[1], BOB_CALLS)):
                    start = len(fake.received)
                    for call in calls[:count]:
                        body = {"model": "m", "messages": call.prompt}
                        r = client.post(serve.url + "/v1/chat/completions", json=body, headers=_as(user))
                        assert r.status_code == 200, r.text
                    sent[user] = [r.raw for r in fake.received[start:]]

                def keys(raws: list[bytes]) -> set[str]:
                    return set().union(*(STUB_RE.findall(raw.decode()) for raw in raws))

                with psycopg.connect(pg_url) as conn:  # stubs name short prefixes; search hits whole keys
                    whole = dict(conn.execute("SELECT name, key FROM lm_artifact_names").fetchall())
                alice_keys = {whole.get(k, k) for k in keys(sent["alice"])}
                bob_keys = {whole.get(k, k) for k in keys(sent["bob"])}
                hers = sorted(alice_keys - bob_keys)
                assert hers and bob_keys  # archives of both, some of them alice's alone
                # archiving on each process filled the one index in the database, before any search
                with psycopg.connect(pg_url) as conn:
                    indexed = {r[0] for r in conn.execute("SELECT key FROM lm_search_keys")}
                assert alice_keys | bob_keys <= indexed
                assert not any((tmp_path / f"home{i}" / "search.sqlite3").exists() for i in range(2))

                def post(user: str, serve: ServeProcess, path: str, body: dict[str, Any]) -> httpx.Response:
                    return client.post(serve.url + "/lightmem2/v1" + path, json=body, headers=_as(user))

                # alice, on the process that did not archive it, finds a line only her archive holds
                key = hers[0]
                text = post("alice", serves[1], "/recover", {"key": key}).json()["text"]
                assert content_key(text.encode("utf-8", "surrogatepass")) == key
                line = max(text.splitlines(), key=len).strip()
                query = " ".join(line.split()[:6])
                for serve in serves:
                    found = post("alice", serve, "/search", {"query": query, "limit": 50}).json()["hits"]
                    assert key in {h["key"] for h in found}
                    assert {h["key"] for h in found} <= alice_keys
                    # bob, on either process, never gets her lines, only his own
                    theirs = post("bob", serve, "/search", {"query": query, "limit": 50}).json()["hits"]
                    assert key not in {h["key"] for h in theirs} and {h["key"] for h in theirs} <= bob_keys
                    regex = post("bob", serve, "/search", {"query": ".", "regex": True, "limit": 50}).json()
                    assert regex["hits"] and {h["key"] for h in regex["hits"]} <= bob_keys
                    # and recovering her key is what an unknown key is: 404
                    denied = post("bob", serve, "/recover", {"key": key})
                    absent = post("bob", serve, "/recover", {"key": "0" * 32})
                    assert denied.status_code == absent.status_code == 404
                    assert denied.json()["error"].replace(key, "K") == absent.json()["error"].replace(
                        "0" * 32, "K"
                    )
            assert not any((tmp_path / f"home{i}" / "search.sqlite3").exists() for i in range(2))
        finally:
            for s in serves:
                s.stop()
