"""The wire fuzz suite (issue 19): over 100,000 generated requests, nothing escapes, and every body
we cannot process reaches the provider byte for byte.

Volume (each test counts what it ran and checks the count; the sum is 103,700):

=================================================  =======
proxy ``prepare``, in process, 3 APIs x 28,000      84,000
stream rewriters, in process, 3 APIs x 3,000         9,000
sidecar routes, in process (ASGI)                    5,000
sidecar chat commands, in process                      200
hook entry points (Claude Code, Codex)               3,000
real HTTP: proxy -> fake provider on 127.0.0.1       2,100
real HTTP: sidecar                                     400
=================================================  =======

The invariants: no exception leaves our code (in process the call itself would raise; over HTTP no
500, and the fake provider, which never fails on a JSON object, never sees a 500-worthy request); a
body that is not a JSON object, that has no messages, or that the codec refuses goes out as the very
bytes the host sent; whatever we do send is valid UTF-8 JSON with the host's model. Cases come from
``fuzz_gen`` (seeded, so a failure names its seed and case). Marked slow: ``make slow`` runs it.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import httpx
import pytest
from fuzz_gen import APIS, LOG, SEEDS, case, damage_bytes, hostile_text, hostile_value, mutate_tree, sse_case

from lightmem_plugin import wire
from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.server.app import create_app
from lightmem_plugin.server.identity import session_identity
from lightmem_plugin.server.proxy import Proxy
from lightmem_plugin.server.secret import HEADER, load_or_create

pytestmark = pytest.mark.slow
PATHS = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}
CODEC_STEPS = ("codec", "proxy")  # a failure counted here means the host's own bytes went out


def _config(home: Path) -> Config:
    cfg = Config()
    cfg.registry.dir = str(home / "artifacts")
    cfg.reduction.imageBitmapMaxBytes = 1024
    return cfg


def _unprocessable(api: str, raw: bytes, headers: dict[str, str]) -> bool:
    """True when the proxy has nothing to work on: not UTF-8 JSON, not an object, or no session (no
    messages)."""
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return True
    if not isinstance(payload, dict):
        return True
    try:
        return session_identity(api, payload, headers) is None
    except RecursionError:
        return True


def _model_of(raw: bytes) -> Any:
    try:
        payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return payload.get("model") if isinstance(payload, dict) else None


def _check_sent(api: str, raw: bytes, headers: dict[str, str], sent: bytes, failed: bool, where: str) -> None:
    if _unprocessable(api, raw, headers) or failed:
        assert sent == raw, f"{where}: an unprocessable body was changed"
        return
    if sent != raw:
        sent.decode("utf-8")  # strict: never invalid UTF-8 to the provider
        payload = json.loads(sent)
        assert isinstance(payload, dict), where
        assert payload.get("model") == _model_of(raw), f"{where}: the model changed"


@pytest.mark.parametrize("api", APIS)
def test_prepare_never_raises_and_passes_unprocessable_bodies_through(tmp_path: Path, api: str) -> None:
    n, per_plugin = 28_000, 1_000
    seed = {"anthropic": 11, "chat": 22, "responses": 33}[api]
    rng = random.Random(seed)
    done = changed = 0

    async def run() -> None:
        nonlocal done, changed
        for part in range(n // per_plugin):  # a fresh plugin now and then bounds the sessions kept
            proxy = Proxy(LightMem(_config(tmp_path / f"p{part}")))
            for _ in range(per_plugin):
                raw, headers = case(rng, api)
                where = f"seed {seed} case {done}"
                before = _faults(proxy, api, raw, headers)
                out = await proxy.prepare(api, raw, headers)
                failed = _faults(proxy, api, raw, headers) != before
                _check_sent(api, raw, headers, out.body, failed, where)
                changed += out.body != raw
                done += 1

    asyncio.run(run())
    assert done == n
    assert changed > n // 20, f"only {changed} of {n} requests were transformed: the generator is off"


def _faults(proxy: Proxy, api: str, raw: bytes, headers: dict[str, str]) -> int:
    """Failures counted under the codec and proxy steps in the session of this request (0: none yet)."""
    if _unprocessable(api, raw, headers):
        return 0
    sid = session_identity(api, json.loads(raw), headers)
    session = proxy.plugin.sessions.get(sid) if sid else None
    return sum(session.fail.errors[k] for k in CODEC_STEPS) if session is not None else 0


@pytest.mark.parametrize("api", APIS)
def test_stream_rewriters_never_raise_and_forward_untouched_streams_byte_for_byte(api: str) -> None:
    n = 3_000
    rng = random.Random(hash(api) & 0xFFFF)
    values_pool = [{}, {"<WORKDIR>": "/home/alice/proj", "<TIMESTAMP>": "2026-03-01T10:00:00Z"}]
    done = 0
    for i in range(n):
        chunks = sse_case(rng, api)
        values = values_pool[i % 2]
        rewriter = wire.get(api).stream(values)
        out = b"".join(rewriter.feed(c) for c in chunks) + rewriter.finish()
        if not values:
            assert out == b"".join(chunks), f"case {i}: a stream with nothing to restore was changed"
        else:
            assert isinstance(out, bytes)
        done += 1
    assert done == n


def _sidecar_body(rng: random.Random) -> tuple[str, bytes]:
    route = rng.choice(["/sidecar/ingest", "/sidecar/toolResult", "/sidecar/assemble", "/sidecar/afterTurn"] * 3
                       + ["/sidecar/recover", "/sidecar/search"])  # fmt: skip
    sid = rng.choice(["oc-1", "oc-2", "", hostile_text(rng, 4), 7, None])
    body: dict[str, Any] = {"sessionId": sid}
    if route in ("/sidecar/ingest", "/sidecar/toolResult"):
        body.update(
            toolCallId=rng.choice([f"c{rng.randrange(50)}", "", None, hostile_text(rng, 3)]),
            output=rng.choice([LOG, hostile_text(rng), [{"type": "text", "text": LOG}], hostile_value(rng)]),
        )
        if rng.random() < 0.5:
            body.update(toolName=rng.choice(["exec", "read", hostile_text(rng, 3)]), arguments='{"cmd":"ls"}')
    elif route in ("/sidecar/assemble", "/sidecar/afterTurn"):
        seed = SEEDS["chat"](rng, rng.randrange(5))
        body["messages"] = mutate_tree(rng, seed["messages"]) if rng.random() < 0.5 else seed["messages"]
        if route == "/sidecar/afterTurn":
            body.update(api=rng.choice(["openai", "anthropic", "x"]), usage=hostile_value(rng))
            body["response"] = rng.choice(
                [{"role": "assistant", "content": "cd <WORKDIR>"}, hostile_value(rng)]
            )
    elif route == "/sidecar/recover":
        body = {"key": rng.choice(["ab" * 16, "../../etc/passwd", "", hostile_text(rng, 3)]), "lines": "1:2"}
    else:
        body = {
            "query": rng.choice(["batch", "(a+)+$", hostile_text(rng, 3)]),
            "limit": rng.choice([1, 5, -1]),
        }
    if rng.random() < 0.3:
        body = mutate_tree(rng, body)
    raw = (
        json.dumps(body).encode()
        if rng.random() < 0.5
        else json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
    )
    if rng.random() < 0.1:
        raw = damage_bytes(rng, raw)
    return route, raw


def _json_answer(r: httpx.Response, where: str) -> None:
    assert r.status_code < 500 or r.status_code == 503, f"{where}: {r.status_code} {r.text[:300]}"
    r.content.decode("utf-8")
    json.loads(r.content)


def test_sidecar_routes_never_500_in_process() -> None:
    n = 5_000
    rng = random.Random(44)
    app = create_app(LightMem(Config()))
    secret = load_or_create()
    done = 0

    async def run() -> None:
        nonlocal done
        transport = httpx.ASGITransport(app=app)  # an exception in the app is raised here, failing the test
        headers = {HEADER: secret, "content-type": "application/json", "host": "127.0.0.1"}
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            for i in range(n):
                route, raw = _sidecar_body(rng)
                r = await client.post(route, content=raw, headers=headers)
                _json_answer(r, f"seed 44 case {i} {route}")
                done += 1

    asyncio.run(run())
    assert done == n


def test_sidecar_chat_commands_never_500_in_process() -> None:
    from lightmem_plugin.commands.table import run_remote_line

    n = 200
    rng = random.Random(45)
    app = create_app(LightMem(Config()), commands=run_remote_line)
    words = ["status", "mode", "mode aggressive", "report", "search batch", "recover", "help", "resume",
             "resume --trace /dev/zero", "visual --out /tmp/x", "doctor", "export", "x", ""]  # fmt: skip
    done = 0

    async def run() -> None:
        nonlocal done
        headers = {HEADER: load_or_create(), "content-type": "application/json", "host": "127.0.0.1"}
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as c:
            for i in range(n):
                text = (
                    "/lightmem2 "
                    + rng.choice(words)
                    + (" " + hostile_text(rng, 3) if rng.random() < 0.4 else "")
                )
                body = {"text": text} if rng.random() < 0.9 else {"text": hostile_value(rng)}
                r = await c.post("/sidecar/command", content=json.dumps(body).encode(), headers=headers)
                _json_answer(r, f"seed 45 case {i} {text!r}")
                done += 1

    asyncio.run(run())
    assert done == n


def _hook_payload(rng: random.Random, event: str) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "session_id": rng.choice(["s1", "s2", "", hostile_text(rng, 3)]),
        "hook_event_name": event,
    }
    if event == "PostToolUse":
        tool = rng.choice(
            ["Bash", "Read", "Grep", "mcp__x__y", "exec_command", "shell", hostile_text(rng, 2)]
        )
        response = rng.choice([
            {"stdout": LOG, "stderr": "", "interrupted": False}, LOG, [{"type": "text", "text": LOG}],
            {"file": {"filePath": "/x", "content": LOG}}, {"output": LOG, "exit_code": 1}, hostile_value(rng),
        ])  # fmt: skip
        payload.update(tool_name=tool, tool_input={"command": "make"}, tool_response=response,
                       tool_use_id=rng.choice(["toolu_1", f"t{rng.randrange(99)}", None]))  # fmt: skip
    else:
        payload["prompt"] = rng.choice(["/lightmem2 status", "/lightmem2", "hello", hostile_text(rng, 4)])
    if rng.random() < 0.3:
        payload = mutate_tree(rng, payload)
    return payload if isinstance(payload, dict) else {"x": payload}


def test_hook_entry_points_never_raise() -> None:
    from lightmem_plugin.hosts.hook_runtime import _answer

    n = 3_000
    rng = random.Random(46)
    done = 0
    for i in range(n):
        host = rng.choice(["claude-code", "codex"])
        event = rng.choice(["PostToolUse", "PostToolUse", "UserPromptSubmit"])
        text = json.dumps(_hook_payload(rng, event), ensure_ascii=rng.random() < 0.5)
        out = _answer(host, event, text, None)  # an exception here is an escape
        if out:
            answer = json.loads(out)
            assert isinstance(answer, dict), f"seed 46 case {i}: {out[:200]}"
        done += 1
    assert done == n


def test_over_http_nothing_500s_and_unprocessable_bodies_arrive_byte_for_byte(tmp_path: Path) -> None:
    from rel_stack import ledger_stack

    n_per_api, n_sidecar = 700, 400
    rng = random.Random(47)
    done = 0
    with ledger_stack(tmp_path) as st, httpx.Client(timeout=30) as client:
        for api in APIS:
            for i in range(n_per_api):
                raw, headers = case(rng, api)
                headers = {k: v for k, v in headers.items() if v and v == v.strip() and v.isprintable()}
                seen = len(st.fake.received)
                r = client.post(st.proxy + PATHS[api], content=raw, headers=headers)
                where = f"seed 47 {api} case {i}"
                assert r.status_code not in (500, 502, 504), f"{where}: {r.status_code} {r.text[:300]}"
                if len(st.fake.received) > seen:  # not a 413
                    sent = st.fake.received[-1].raw
                    _check_sent(api, raw, headers, sent, False, where)
                done += 1
        headers = {HEADER: load_or_create(), "content-type": "application/json"}
        for i in range(n_sidecar):
            route, raw = _sidecar_body(rng)
            _json_answer(client.post(st.proxy + route, content=raw, headers=headers), f"seed 47 sidecar {i}")
            done += 1
        assert client.get(st.proxy + "/healthz").status_code == 200
    assert done == 3 * n_per_api + n_sidecar
