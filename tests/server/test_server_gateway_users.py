"""Who may see what on a team gateway, over real HTTP on 127.0.0.1, on both stores.

Two users, alice and bob, send the same recorded session (the same conversation head, so the same
derived session id) through one gateway; bob stops early, so some of alice's archived outputs are hers
alone. Each must see only their own sessions, report, archives and search hits, with another user's
answered 404 exactly as an unknown one; a request without a user's token never reaches the provider;
the token never leaves the gateway and the provider's key is never stored.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_upstream import FakeUpstream
from server_harness import ServerThread

from lightmem_plugin.commands import recover, search
from lightmem_plugin.errors import ArtifactNotFound, UsageError
from lightmem_plugin.mcp_server import TOOL, build_server
from lightmem_plugin.mcp_server.search import TOOL as SEARCH_TOOL
from lightmem_plugin.measure.traces import load_trace
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import STUB_RE
from lightmem_plugin.security import tenancy
from lightmem_plugin.server import gateway_client, serve
from lightmem_plugin.server.app import create_app
from lightmem_plugin.store.registry import content_key

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "deepseek_lite_dev_noparallel__pydicom__pydicom-901.json.gz"
BOB_CALLS = 5  # with REDUCTION, this session's two archives first appear at calls 4 and 6
# file views over 1,000 chars are cut and outputs over 1,000 chars reduced, so the session archives several
REDUCTION = {"normal": {"fileViewChars": 1000, "triggerChars": 1000}}
API_KEY = "sk-provider-key-0123456789abcdefABCDEF"
TOKENS = {"alice": tenancy.new_token(), "bob": tenancy.new_token()}


@pytest.fixture(params=["embedded", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str | None:
    return request.getfixturevalue("pg_url") if request.param == "postgres" else None


@pytest.fixture
def gateway(isolated_home: Path, store_url: str | None) -> Iterator[tuple[str, FakeUpstream, LightMem]]:
    fake = FakeUpstream()
    with ServerThread(fake.app) as up:
        config: dict[str, Any] = {
            "server": {"upstreams": {"openai": up.url + "/v1"}},
            "gateway": {"users": [{"name": n, "tokenSha256": tenancy.digest(t)} for n, t in TOKENS.items()]},
            "reduction": REDUCTION,
        }
        if store_url:
            config["store"] = {"url": store_url}
        (isolated_home / "config.json").write_text(json.dumps(config))
        plugin = LightMem.from_config()
        with ServerThread(create_app(plugin)) as gw:
            yield gw.url, fake, plugin


def _as(user: str | None, key: str = API_KEY) -> dict[str, str]:
    headers = {"authorization": f"Bearer {key}"}
    if user is not None:
        headers[tenancy.TOKEN_HEADER] = TOKENS[user]
    return headers


def _send(client: httpx.Client, url: str, user: str, calls: int) -> list[dict[str, Any]]:
    bodies = []
    for call in load_trace(TRACE).calls[:calls]:
        r = client.post(
            url + "/v1/chat/completions", json={"model": "m", "messages": call.prompt}, headers=_as(user)
        )
        assert r.status_code == 200, r.text
    return bodies


def test_each_user_sees_only_their_own(
    gateway: tuple[str, FakeUpstream, LightMem], isolated_home: Path
) -> None:
    url, fake, plugin = gateway
    n = len(load_trace(TRACE).calls)
    with httpx.Client(timeout=30) as client:
        # no token, or a token nobody has: 401 in the provider's shape, and the provider sees nothing
        for headers in ({}, {tenancy.TOKEN_HEADER: "lm2_not-a-token"}):
            r = client.post(
                url + "/v1/chat/completions", json={"model": "m", "messages": []}, headers=headers
            )
            assert r.status_code == 401 and "x-lightmem2-token" in r.json()["error"]["message"]
            assert client.get(url + "/lightmem2/v1/sessions", headers=headers).status_code == 401
        assert fake.received == []

        _send(client, url, "alice", n)
        start_bob = len(fake.received)
        _send(client, url, "bob", BOB_CALLS)
        # the token stays here; the provider's key passes through untouched
        assert all(tenancy.TOKEN_HEADER not in r.headers for r in fake.received)
        assert all(r.headers.get("authorization") == f"Bearer {API_KEY}" for r in fake.received)

        def keys(raws: list[bytes]) -> set[str]:
            return set().union(*(STUB_RE.findall(raw.decode()) for raw in raws))

        alice_keys = keys([r.raw for r in fake.received[:start_bob]])
        bob_keys = keys([r.raw for r in fake.received[start_bob:]])
        hers = alice_keys - bob_keys
        assert hers and bob_keys  # archives of both, some of them alice's alone

        def get(user: str, path: str) -> httpx.Response:
            return client.get(url + "/lightmem2/v1" + path, headers=_as(user))

        def post(user: str, path: str, body: dict[str, Any]) -> httpx.Response:
            return client.post(url + "/lightmem2/v1" + path, json=body, headers=_as(user))

        # sessions: the same head, yet two sessions, each counted on its own
        a, b = get("alice", "/sessions").json(), get("bob", "/sessions").json()
        assert [s["calls"] for s in a["sessions"]] == [n] and [s["calls"] for s in b["sessions"]] == [
            BOB_CALLS
        ]
        sid = a["sessions"][0]["session"]
        assert b["sessions"][0]["session"] == sid and sid.startswith("head-")
        # report: each their own; the other user's session does not exist for them
        assert f"{n} calls" in get("alice", f"/report?session={sid}").json()["text"]
        assert f"{BOB_CALLS} calls" in get("bob", f"/report?session={sid}").json()["text"]
        unknown = get("bob", "/report?session=no-such-session")
        assert unknown.status_code == 404
        # recover: hers only for her; bob gets what an unknown key gets
        key = sorted(hers)[0]
        text = post("alice", "/recover", {"key": key}).json()["text"]
        assert content_key(text.encode("utf-8", "surrogatepass")) == plugin.registry.resolve(key)
        denied = post("bob", "/recover", {"key": key})
        assert denied.status_code == 404
        absent = post("bob", "/recover", {"key": "0" * 32})
        assert absent.status_code == 404
        assert denied.json()["error"].replace(key, "K") == absent.json()["error"].replace("0" * 32, "K")
        shared = sorted(bob_keys & alice_keys)[0]
        assert post("bob", "/recover", {"key": shared}).status_code == 200  # archived by both: both may
        # search: a line of her archive only she finds
        line = max(text.splitlines(), key=len).strip()
        query = " ".join(line.split()[:6])
        found = post("alice", "/search", {"query": query, "limit": 50}).json()["hits"]
        whole = plugin.registry.resolve  # stubs name a short prefix, search hits the whole key
        bob_whole = {whole(k) for k in bob_keys}
        assert whole(key) in {h["key"] for h in found}
        theirs = post("bob", "/search", {"query": query, "limit": 50}).json()["hits"]
        assert whole(key) not in {h["key"] for h in theirs} and {h["key"] for h in theirs} <= bob_whole
        # the CLI (and the MCP tool) on a user's own machine, pointed at the gateway by two variables
        for user, expected in (("alice", text), ("bob", None)):
            with pytest.MonkeyPatch.context() as env:
                env.setenv(gateway_client.GATEWAY_ENV, url)
                env.setenv(gateway_client.TOKEN_ENV, TOKENS[user])
                args = argparse.Namespace(key=key, lines=None)
                if expected is not None:
                    assert recover.main(args) == expected
                else:
                    with pytest.raises(ArtifactNotFound, match="of yours"):
                        recover.main(args)
                # search goes to the gateway too: her line for her, never for bob
                asked = argparse.Namespace(
                    query=query, session=None, all=False, regex=False, limit=50, json=True, fts=False
                )
                keys = {h["key"] for h in json.loads(str(search.main(asked)))["hits"]}
                assert (whole(key) in keys) is (expected is not None) and (
                    user == "alice" or keys <= bob_whole
                )
                with pytest.raises(UsageError, match="--fts is not available through a team gateway"):
                    search.main(argparse.Namespace(**{**vars(asked), "fts": True}))
                # the MCP tools of that machine (Claude Code, Codex) ask the gateway the same way
                said = asyncio.run(
                    _mcp(build_server(), [(TOOL, {"key": key}), (SEARCH_TOOL, {"query": query})])
                )
                assert said[0] == (expected if expected is not None else said[0])
                assert ("no artifact" in said[0]) is (expected is None)
                assert (key in said[1]) is (expected is not None)
    # the provider's key and the tokens are kept nowhere: not in a file of the home, not in the database
    stored = b"".join(p.read_bytes() for p in isolated_home.rglob("*") if p.is_file())
    if plugin.config.store.url:
        stored += _dump_database(plugin.config.store.url)
    for secret in (API_KEY, *TOKENS.values()):
        assert secret.encode() not in stored


async def _mcp(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """What each MCP tool call answers (its text, or its error's), in process."""
    from mcp import Client

    async with Client(server) as client:
        results = [await client.call_tool(name, args) for name, args in calls]
    return ["".join(getattr(c, "text", "") for c in r.content) for r in results]


def _dump_database(url: str) -> bytes:
    import psycopg

    out = b""
    with psycopg.connect(url) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        for t in tables:
            for row in conn.execute(f"SELECT * FROM {t}"):  # our own table names
                out += repr(row).encode()
    assert b"lm_calls" in repr(tables).encode()
    return out


def test_without_users_nothing_changes(isolated_home: Path) -> None:
    fake = FakeUpstream()
    with ServerThread(fake.app) as up:
        (isolated_home / "config.json").write_text(
            json.dumps({"server": {"upstreams": {"openai": up.url + "/v1"}}})
        )
        with ServerThread(create_app(LightMem.from_config())) as gw, httpx.Client(timeout=30) as client:
            call = load_trace(TRACE).calls[0]
            r = client.post(gw.url + "/v1/chat/completions", json={"model": "m", "messages": call.prompt})
            assert r.status_code == 200  # no token needed on loopback
            assert client.get(gw.url + "/lightmem2/v1/sessions").status_code == 404
    assert len(fake.received) == 1


def test_allow_remote_needs_users(isolated_home: Path) -> None:
    (isolated_home / "config.json").write_text("{}")
    with pytest.raises(UsageError, match="gateway add-user"):
        serve(host="127.0.0.1", port=0, allow_remote=True)


def test_tokens_match_only_their_user() -> None:
    class U:
        def __init__(self, name: str, token: str) -> None:
            self.name, self.tokenSha256 = name, tenancy.digest(token)

    users = [U(n, t) for n, t in TOKENS.items()]
    assert tenancy.authenticate(users, TOKENS["bob"]) == "bob"
    assert tenancy.authenticate(users, TOKENS["bob"] + "x") is None
    assert tenancy.authenticate(users, "") is None
    assert tenancy.owner_of(tenancy.scoped("bob", "user:alice/x")) == "bob"
    assert tenancy.own_view("alice", tenancy.scoped("bob", "s")) is None


def test_a_nul_in_a_session_id_is_a_bad_request_and_a_host_id_with_one_is_served(
    gateway: tuple[str, FakeUpstream, LightMem],
) -> None:
    """Measured before on PostgreSQL: ``?session=a%00b`` answered 500 "the store may be unreachable"
    (PostgreSQL refuses a NUL in text), and a host session id with a NUL failed the call's recording."""
    url, fake, _plugin = gateway
    with httpx.Client(timeout=30) as client:
        r = client.get(url + "/lightmem2/v1/report", params={"session": "a\x00b"}, headers=_as("alice"))
        assert r.status_code == 400 and "NUL" in r.json()["error"]
        r = client.post(url + "/lightmem2/v1/search", json={"query": "x\x00y"}, headers=_as("alice"))
        assert r.status_code == 400 and "query" in r.json()["error"]
        call = load_trace(TRACE).calls[0]
        body = {"model": "m", "messages": call.prompt, "prompt_cache_key": "run\x00one"}  # the host's id
        r = client.post(url + "/v1/chat/completions", json=body, headers=_as("alice"))
        assert r.status_code == 200, r.text
        sessions = client.get(url + "/lightmem2/v1/sessions", headers=_as("alice")).json()["sessions"]
    assert [s["session"] for s in sessions] == ["run\\x00one"] and sessions[0]["calls"] == 1
    assert len(fake.received) == 1
