"""A running lightmem2 follows its config: an edit of config.json reaches the next call (#40 item 3).

Measured before: editing ``eviction.batchTurns`` mid-session, the next call's ``session.cfg`` said 9 while
the evictor that acts still used 3 (the evictor, stabilizer and dedup index kept the config the session
was created with). :data:`~lightmem_plugin.pipeline.config_in_force.KEYS` says when every key applies;
here every key it says a running process follows is edited in the file between two calls and the second
call must act differently from the same two calls without the edit (a probe per key, :data:`PROBES`).
A key added to the config without a class, or a following key without a probe, fails.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import io
import json
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from lightmem_plugin.config import ALL_PASSES, MODES, Config, _key_paths, config_path
from lightmem_plugin.model import ImagePart, Message, Request, TextPart, ToolCallPart, ToolResultPart
from lightmem_plugin.pipeline import CONFIG_IN_FORCE, LightMem, Session
from lightmem_plugin.pipeline.config_in_force import FOLLOWS, KEYS
from lightmem_plugin.reduction import images
from lightmem_plugin.server.app import create_app
from lightmem_plugin.server.secret import HEADER, load_or_create
from lightmem_plugin.store.registry import Registry
from lightmem_plugin.store.session_state import StateStore
from lightmem_plugin.wire.chat.adapter import ChatAdapter

sys.path.insert(0, str(Path(__file__).parent / "server"))
from fake_upstream import FakeUpstream
from fake_wire import Reply
from server_harness import ServerThread

Chat = list[dict[str, Any]]
Observe = Callable[[Session, Request], Any]


# -- the file and a session ------------------------------------------------------------------------
def _put(config: dict[str, Any], dotted: str, value: Any) -> None:
    *path, last = dotted.split(".")
    for key in path:
        config = config.setdefault(key, {})
    config[last] = value


def _write(config: dict[str, Any]) -> None:
    path = config_path()
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(json.dumps(config))
    stamp = max(path.stat().st_mtime_ns, before) + 1_000_000_000
    os.utime(path, ns=(stamp, stamp))  # a new mtime even within the file system's clock tick


def _request(form: Chat | Request, tools: Chat | None) -> Request:
    return form if isinstance(form, Request) else ChatAdapter().decode(form, tools)


def _sent(s: Session, out: Request) -> str:
    return repr(out)


def _two_calls(
    root: Path, base: dict[str, Any], edit: dict[str, Any] | None, case: Call2
) -> tuple[Session, Any]:
    """Call 1 under ``base``, ``edit`` written into the file, call 2: what ``case`` observes of it."""
    config = copy.deepcopy(base)
    _write(config)
    session = LightMem(registry=Registry(root / "reg")).session("s")
    session.process(_request(case.first, case.tools))
    for key, value in (edit or {}).items():
        _put(config, key, value)
    if edit is not None:
        _write(config)
    out = session.process(_request(case.second, case.tools))
    return session, case.observe(session, out)


@dataclass
class Call2:
    """A session probe: ``value`` written into the file between two calls changes what the second
    call does (``observe``: the request it sends, unless said otherwise)."""

    value: Any
    first: Chat | Request
    second: Chat | Request
    base: dict[str, Any] | None = None
    tools: Chat | None = None
    observe: Observe = _sent

    def run(self, key: str, root: Path) -> None:
        base = self.base or {}
        _, kept = _two_calls(root / "kept", base, None, self)
        _, edited = _two_calls(root / "edited", base, {key: self.value}, self)
        assert kept != edited, f"{key} = {self.value!r} written mid-session: the next call did not change"


# -- fixtures of the session probes ----------------------------------------------------------------
SYSTEM = {
    "role": "system",
    "content": "You are an agent.\nWorking directory: /home/alice/proj\n"
    "Session 123e4567-e89b-12d3-a456-426614174000 at 2026-03-01T10:00:00Z",
}
GOAL = {"role": "user", "content": "Fix the parser bug in module a."}
TOOLS = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in ("zeta", "alpha")]


def _tool(i: int, name: str, args: dict[str, Any], output: str) -> Chat:
    call = {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": output},
    ]


def _log(n: int, seed: str = "x") -> str:
    return "".join(
        f"step {i} {seed}: compiling module_{i}.c ok warnings=0 elapsed={i * 7 % 13}ms\n" for i in range(n)
    )


FIRST = [SYSTEM, GOAL, *_tool(1, "bash", {"cmd": "ls"}, "a.py\n")]
BUILD = _log(100) + "src/mod_50.c:10: error: expected ';' before '}' token\n" + _log(100, "y")  # ~12k chars
SECOND = FIRST + _tool(2, "bash", {"cmd": "make all"}, BUILD)
CODE = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(300))
SCRIPT = (
    "cat > gen.py <<'EOF'\n"
    + "".join(f"print('line {i} of the generated report with some words')\n" for i in range(40))
    + "EOF\npython gen.py"
)
SAME = "".join(f"same line {i}\n" for i in range(60))
REPEATED = [
    SYSTEM,
    GOAL,
    *_tool(1, "bash", {"cmd": "cat x"}, SAME),
    *_tool(2, "bash", {"cmd": "cat x"}, SAME),
]


def _grep(i: int) -> str:
    return "".join(f"a.py:{j}: value_{i}_{j} = compute({j})\n" for j in range(37))


# one finished task (12 calls, a long request), then a new goal: a batch pays at call 2 when one is due
LONG_GOAL = {"role": "user", "content": GOAL["content"] + " The parser drops the last token." * 30}
TASK_FIRST = [SYSTEM, LONG_GOAL, *_tool(1, "bash", {"cmd": "grep -rn value ."}, _grep(1))]
TASK_SECOND = [
    *TASK_FIRST,
    *[m for k in range(2, 13) for m in _tool(k, "bash", {"cmd": f"grep -rn value{k} ."}, _grep(k))],
    {"role": "assistant", "content": "Done: the parser keeps the last token now."},
    {"role": "user", "content": "Now update the changelog"},
    *[m for k in range(2) for m in _tool(20 + k, "bash", {"cmd": f"echo {k}"}, f"ok {k}")],
]
EVICTING = {"mode": "aggressive", "eviction": {"batchTurns": 1, "keepRecentTurns": 1}}
LOW_MARGIN = {
    "compactBeforeHost": True,
    "batchTurns": 1,
    "keepRecentTurns": 1,
    "compactMarginTokens": 0,
    "compactKeepTokens": 500,
}
COMPACTING = {**EVICTING, "eviction": {**LOW_MARGIN, "compactAtTokens": 1_000}}


def _thought(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``chat`` with each answer's thinking in the chat form's field (a compaction leaves it out)."""
    return [
        {**m, "reasoning_content": "Think it through first."} if m["role"] == "assistant" else m for m in chat
    ]


# a finished task that viewed a file (kept whole on arrival), then seven calls of the next: a call
# after any pause is cold with cacheTtlS 0, so the view is reduced again there (eviction.deferred)
COLD_FIRST = [
    SYSTEM,
    GOAL,
    *_tool(1, "read", {"path": "a.py"}, CODE),
    {"role": "assistant", "content": "Done: the parser is fixed."},
    {"role": "user", "content": "Now update the changelog"},
    *[m for k in range(7) for m in _tool(20 + k, "bash", {"cmd": f"echo {k}"}, f"ok {k}")],
]
COLD_SECOND = [*COLD_FIRST, *_tool(30, "bash", {"cmd": "echo done"}, "ok")]


def _cold(mode: str) -> dict[str, Any]:
    """Every call after the first is cold, the finished task stays (its view is reduced, not paged
    out), and every pass is on (conservative's lossless ones cut no view)."""
    return {
        "mode": mode,
        "eviction": {"cacheTtlS": 0, "finishedTasks": False},
        "reduction": {mode: {"reduceAtColdStart": True, "passes": list(ALL_PASSES)}},
    }


def _evictor_reads(attr: str) -> Observe:
    """What the evictor acts on (keys whose effect needs a longer session than a probe: the evictor
    reads its config at each use, so the value it holds is the one it decides with)."""
    return lambda s, out: getattr(s.evictor.config, attr)


def _png() -> bytes:
    img = Image.frombytes("RGB", (600, 600), random.Random(0).randbytes(600 * 600 * 3))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="800" height="800">'
    + "".join(
        f'<rect x="{i % 80 * 10}" y="{i // 80 * 10}" width="9" height="9" fill="#{i * 2654435761 % 16777216:06x}"/>'
        for i in range(1200)
    )
    + "</svg>"
).encode()


def _with_image(data: bytes | None, media_type: str = "image/png") -> Request:
    msgs = [
        Message("system", [TextPart("agent")]),
        Message("user", [TextPart("look")]),
        Message("assistant", [ToolCallPart("c1", "shot", "{}")]),
        Message("user", [ToolResultPart("c1", [TextPart("ok")])]),
    ]
    if data is not None:
        image = ImagePart(media_type=media_type, data=base64.b64encode(data).decode())
        msgs += [
            Message("assistant", [ToolCallPart("c2", "shot", "{}")]),
            Message("user", [ToolResultPart("c2", [image])]),
        ]
    return Request(msgs, [])


def _marked(turns: int) -> Request:
    """An Anthropic-style request whose last block carries a ``cache_control`` breakpoint."""
    mark = {"cache_control": {"type": "ephemeral"}}
    msgs = [Message("system", [TextPart("agent", dict(mark))])]
    msgs += [Message("user", [TextPart(f"turn {i}")]) for i in range(turns)]
    msgs[-1] = Message("user", [TextPart(f"turn {turns - 1}", dict(mark))])
    return Request(msgs, [])


def _table_probes(mode: str) -> dict[str, Call2]:
    """One probe per key of a mode's reduction table, in that mode, on a build log of ~12k chars (over
    every mode's trigger); every pass on, so that conservative cuts too, except for ``passes`` itself."""
    table = Config(mode=mode).mode_table()
    on = {"mode": mode, "reduction": {mode: {"passes": list(ALL_PASSES)}}}
    prefix = f"reduction.{mode}."
    return {
        prefix + "triggerChars": Call2(len(BUILD) + 1, FIRST, SECOND, on),
        prefix + "capChars": Call2(100_000, FIRST, SECOND, on),
        prefix + "headChars": Call2(table.headChars * 3, FIRST, SECOND, on),
        prefix + "tailChars": Call2(table.tailChars * 3, FIRST, SECOND, on),
        prefix + "passes": Call2(
            [] if mode != "conservative" else list(ALL_PASSES), FIRST, SECOND, {"mode": mode}
        ),
        prefix + "fileViewChars": Call2(100, FIRST, FIRST + _tool(2, "read", {"path": "a.py"}, CODE * 3), on),
        prefix + "keepErrorLines": Call2(False, FIRST, SECOND, on),
        prefix + "reduceAtColdStart": Call2(False, COLD_FIRST, COLD_SECOND, _cold(mode)),
        prefix + "deferredViewChars": Call2(5_000, COLD_FIRST, COLD_SECOND, _cold(mode)),
        prefix + "eviction": Call2(
            not table.eviction,
            FIRST,
            FIRST + _tool(2, "bash", {"cmd": SCRIPT}, "ok\n"),
            {"mode": mode, "eviction": {"argumentsOnArrival": True}},
        ),
    }


SESSION_PROBES: dict[str, Call2] = {
    "mode": Call2("aggressive", FIRST, SECOND, {"mode": "conservative"}),
    "stabilizer.enabled": Call2(False, FIRST, SECOND),
    "stabilizer.placeholders": Call2([], FIRST, SECOND),
    "stabilizer.canonicalToolOrder": Call2(False, FIRST, SECOND, tools=TOOLS),
    "stabilizer.shortCallIds": Call2(False, FIRST, SECOND),
    "stabilizer.cacheTtl": Call2("long", _marked(1), _marked(2), {"eviction": {"cacheModel": "anthropic"}}),
    **{key: probe for mode in MODES for key, probe in _table_probes(mode).items()},
    "reduction.recoverHint": Call2("shell", FIRST, SECOND),
    "reduction.hardCapChars": Call2(1000, FIRST, FIRST + _tool(2, "read", {"path": "a.py"}, CODE)),
    "reduction.imageBitmapMaxBytes": Call2(10 << 20, _with_image(None), _with_image(_png())),
    "reduction.imageMaxSidePx": Call2(64, _with_image(None), _with_image(_png())),
    "reduction.imageSvgMaxBytes": Call2(10 << 20, _with_image(None), _with_image(SVG, "image/svg+xml")),
    "reduction.dedupMaxRepeats": Call2(1, REPEATED, [*REPEATED, *_tool(3, "bash", {"cmd": "cat x"}, SAME)]),
    "eviction.batchTurns": Call2(5, TASK_FIRST, TASK_SECOND, EVICTING),
    "eviction.finishedTasks": Call2(False, TASK_FIRST, TASK_SECOND, EVICTING),
    "eviction.goalKeepChars": Call2(100, TASK_FIRST, TASK_SECOND, EVICTING),
    "eviction.minSavingRatio": Call2(100.0, TASK_FIRST, TASK_SECOND, EVICTING),
    "eviction.argumentsOnArrival": Call2(
        False,
        FIRST,
        FIRST + _tool(2, "bash", {"cmd": SCRIPT}, "ok\n"),
        {"mode": "aggressive", "eviction": {"argumentsOnArrival": True}},
    ),
    "eviction.argumentMinChars": Call2(
        5000,
        FIRST,
        FIRST + _tool(2, "bash", {"cmd": SCRIPT}, "ok\n"),
        {"mode": "aggressive", "eviction": {"argumentsOnArrival": True}},
    ),
    "eviction.keepRecentTurns": Call2(
        50, TASK_FIRST, TASK_SECOND, EVICTING, observe=_evictor_reads("keepRecentTurns")
    ),
    "eviction.expectedRemainingCalls": Call2(
        3, TASK_FIRST, TASK_SECOND, EVICTING, observe=_evictor_reads("expectedRemainingCalls")
    ),
    "eviction.recordLevel": Call2(
        "full", TASK_FIRST, TASK_SECOND, EVICTING, observe=_evictor_reads("recordLevel")
    ),
    # the price of a break, which the evictor weighs each batch against its saving (set per call)
    "eviction.cacheModel": Call2(
        "anthropic", TASK_FIRST, TASK_SECOND, EVICTING, observe=lambda s, out: s.evictor.break_cost
    ),
    # compaction before the host's: TASK_SECOND is ~7,000 tokens, so a 1,000-token threshold compacts
    "eviction.compactBeforeHost": Call2(False, TASK_FIRST, TASK_SECOND, COMPACTING),
    "eviction.compactAtTokens": Call2(1_000, TASK_FIRST, TASK_SECOND, {**EVICTING, "eviction": LOW_MARGIN}),
    "eviction.compactMarginTokens": Call2(
        99_500, TASK_FIRST, TASK_SECOND, {**EVICTING, "eviction": {**LOW_MARGIN, "compactAtTokens": 100_000}}
    ),
    "eviction.compactKeepTokens": Call2(100_000, TASK_FIRST, TASK_SECOND, COMPACTING),
    "eviction.compactThinking": Call2(False, _thought(TASK_FIRST), _thought(TASK_SECOND), COMPACTING),
    # how long the provider keeps a prefix: at 0 s any pause makes the next call cold (its break free)
    "eviction.cacheTtlS": Call2(
        0, TASK_FIRST, TASK_SECOND, EVICTING, observe=lambda s, out: (s.cold, s.evictor.break_cost)
    ),
}


# -- the LLM estimator's endpoint ------------------------------------------------------------------
class Endpoint:
    """A loopback OpenAI-compatible endpoint that records what the estimator asked and answers 500
    (the estimator then retries, and falls back to the heuristic: the session goes on)."""

    def __init__(self) -> None:
        seen: list[tuple[str, str, str]] = []
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"] or 0)) or b"{}")
                seen.append((self.path, self.headers.get("authorization") or "", str(body.get("model"))))
                self.send_response(500)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class EstimatorProbe:
    """The estimator's settings between two calls: what its endpoint was asked differs (``client``:
    the timeout the estimator's HTTP client applies, which a 500 answered at once cannot show)."""

    value: Any
    llm: bool = True
    client: bool = False

    def run(self, key: str, root: Path) -> None:
        endpoint = Endpoint()
        try:
            llm = {"proxyBaseUrl": endpoint.url + "/a/v1", "model": "m1", "proxyApiKey": "k1", "retries": 1}
            base = {**EVICTING, "estimator": {"kind": "llm" if self.llm else "heuristic", **llm}}
            value = self.value(endpoint) if callable(self.value) else self.value

            def asked(s: Session, out: Request) -> Any:
                if self.client:
                    return s.evictor.proposer._client.timeout  # type: ignore[union-attr]
                return list(endpoint.seen)

            probe = Call2(value, TASK_FIRST, TASK_SECOND, base, observe=asked)
            runs = []
            for edit in (None, {key: value}):
                endpoint.seen.clear()
                runs.append(_two_calls(root / str(len(runs)), base, edit, probe)[1])
            assert runs[0] != runs[1], f"{key} = {value!r} written mid-session: the estimator did not change"
        finally:
            endpoint.close()


ESTIMATOR_PROBES: dict[str, EstimatorProbe] = {
    "estimator.kind": EstimatorProbe("llm", llm=False),
    "estimator.proxyBaseUrl": EstimatorProbe(lambda e: e.url + "/b/v1"),
    "estimator.proxyApiKey": EstimatorProbe("k2"),
    "estimator.model": EstimatorProbe("m2"),
    "estimator.retries": EstimatorProbe(0),
    "estimator.timeoutS": EstimatorProbe(0.5, client=True),
}


# -- serve -----------------------------------------------------------------------------------------
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
ANTHROPIC = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
ANTHROPIC_HEADERS = {"x-api-key": "sk", "anthropic-version": "2023-06-01"}


def _slow_command(line: str) -> tuple[str, int]:
    time.sleep(1.0)
    return "done", 0


def _long_command(line: str) -> tuple[str, int]:
    return "x" * 5000, 0


@dataclass
class Served:
    """A serve probe: ``act`` sends a request, ``value`` is written into the file, ``act`` again: its
    answer (status, which upstream got it, the text) differs from the one without the edit."""

    value: Any
    act: Callable[[httpx.Client, list[FakeUpstream]], Any]
    base: Callable[[list[str]], dict[str, Any]] = lambda ups: {}

    def run(self, key: str, root: Path) -> None:
        got = [self._served(root / "kept", key, None), self._served(root / "edited", key, self.value)]
        assert got[0] != got[1], (
            f"{key} = {self.value!r} written while serve ran: the next request did not change"
        )

    def _served(self, root: Path, key: str, value: Any) -> Any:
        fakes = [FakeUpstream(), FakeUpstream()]
        with ServerThread(fakes[0].app) as a, ServerThread(fakes[1].app) as b:
            urls = [a.url, b.url]
            config = {"server": {"upstreams": {"openai": a.url + "/v1", "anthropic": a.url}}}
            for k, v in self.base(urls).items():
                _put(config, k, v)
            _write(config)
            plugin = LightMem(registry=Registry(root / "reg"))
            runner = _slow_command if key == "server.commandTimeoutS" else _long_command
            with (
                ServerThread(create_app(plugin, commands=runner)) as px,
                httpx.Client(base_url=px.url, timeout=20) as client,
            ):
                client.headers[HEADER] = load_or_create()
                self.act(client, fakes)
                if value is not None:
                    _put(config, key, value(urls) if callable(value) else value)
                    _write(config)
                return self.act(client, fakes)


def _chat(
    client: httpx.Client, fakes: list[FakeUpstream], path: str = "/v1/chat/completions", **extra: Any
) -> Any:
    r = client.post(path, json={**CHAT, **extra})
    return r.status_code, [len(f.received) for f in fakes]


def _anthropic(client: httpx.Client, fakes: list[FakeUpstream]) -> Any:
    r = client.post("/v1/messages", json=ANTHROPIC, headers=ANTHROPIC_HEADERS)
    return r.status_code, [len(f.received) for f in fakes]


def _binding(client: httpx.Client, fakes: list[FakeUpstream]) -> Any:
    """Whether the request reached the provider asking to drop invalid thinking blocks (its beta)."""
    client.post("/v1/messages", json=ANTHROPIC, headers=ANTHROPIC_HEADERS)
    got = fakes[0].received[-1]
    return "thinking" in got.body, got.headers.get("anthropic-beta")


def _slow_stream(client: httpx.Client, fakes: list[FakeUpstream]) -> Any:
    """A stream whose events come 0.25 s apart: whole under the default timeout, cut under 0.1 s."""
    fakes[0].queue(Reply(text="slow answer", delay_s=0.25, chunk=16))
    try:
        r = client.post("/v1/chat/completions", json={**CHAT, "stream": True})
        return r.status_code, "slow answer" in "".join(
            json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
            for line in r.text.splitlines()
            if line.startswith("data: {") and json.loads(line[6:]).get("choices")
        )
    except httpx.HTTPError as err:
        return type(err).__name__


def _command(client: httpx.Client, fakes: list[FakeUpstream]) -> Any:
    r = client.post("/sidecar/command", json={"text": "/lightmem2 status"})
    return r.status_code, r.text


def _sessions_probe(key: str, root: Path) -> None:
    """The plugin's session table (serve's memory): ``maxSessions`` caps it at the next lookup,
    ``sessionIdleS`` drops idle sessions at the next sweep."""

    def held(edit: Any) -> int:
        _write({})
        lm = LightMem(
            registry=Registry(root / str(edit) / "reg"), states=StateStore(root / str(edit) / "s.db")
        )
        lm.session("a"), lm.session("b")
        if edit is not None:
            _write({"server": {key.split(".")[1]: edit}})
            time.sleep(0.05)
        lm.session("c")
        lm.expire_idle()
        return len(lm.sessions)

    value = {"server.maxSessions": 1, "server.sessionIdleS": 0.01}[key]
    assert held(None) != held(value), f"{key} = {value!r} written while serve ran: no session left memory"


@dataclass
class Function:
    fn: Callable[[str, Path], None]

    def run(self, key: str, root: Path) -> None:
        self.fn(key, root)


SERVE_PROBES: dict[str, Served | Function] = {
    "server.upstreams.openai": Served(lambda urls: urls[1] + "/v1", _chat),
    "server.upstreams.anthropic": Served(lambda urls: urls[1], _anthropic),
    "server.upstreams.named": Served(
        lambda urls: {"x": urls[1] + "/v1"}, lambda c, f: _chat(c, f, "/u/x/v1/chat/completions")
    ),
    "server.maxRequestBytes": Served(1 << 16, lambda c, f: _chat(c, f, pad="y" * 100_000)),
    "stabilizer.thinkingBinding": Served("always", _binding),
    "server.commandTimeoutS": Served(0.3, _command),
    "server.upstreamTimeoutS": Served(0.1, _slow_stream),
    "server.commandMaxChars": Served(1000, _command),
    "server.maxSessions": Function(_sessions_probe),
    "server.sessionIdleS": Function(_sessions_probe),
    "gateway.users": Served(
        [{"name": "alice", "tokenSha256": hashlib.sha256(b"alice-token").hexdigest()}], _chat
    ),
}


def _prices_probe(key: str, root: Path) -> None:
    """The money of the next call's ledger row: an edit of ``prices`` prices it (a model the built-in
    table does not know has none before the edit)."""
    from lightmem_plugin.store.ledger import Ledger

    def priced(edit: dict[str, Any] | None) -> float | None:
        _write({})
        where = root / ("edited" if edit else "kept")
        lm = LightMem(registry=Registry(where / "reg"), ledger=Ledger(where / "ledger.sqlite3"))
        session = lm.session("s")
        first = replace(_request(FIRST, None), extra={"model": "acme-coder-1"})
        session.process(first)
        if edit is not None:
            _write({key: edit})
        session.process(replace(_request(SECOND, None), extra={"model": "acme-coder-1"}))
        usage = {
            "prompt_tokens": 1000,
            "completion_tokens": 100,
            "prompt_tokens_details": {"cached_tokens": 800},
        }
        session.after_model_call(None, usage=usage, api="chat")
        assert session.last_record is not None
        return session.last_record.cost_usd

    edit = {"acme-coder": {"input": 1.0, "cacheRead": 0.1, "output": 2.0}}
    kept, edited = priced(None), priced(edit)
    assert kept is None and edited == pytest.approx((800 * 0.1 + 200 * 1.0 + 100 * 2.0) / 1e6), (
        f"{key} written mid-session: the next call was not priced with it"
    )


PROBES: dict[str, Call2 | EstimatorProbe | Served | Function] = {
    **SESSION_PROBES,
    **ESTIMATOR_PROBES,
    **SERVE_PROBES,
    "prices": Function(_prices_probe),
}
"""Every key that a running process follows (:data:`FOLLOWS`), and how its edit is seen to act."""


# -- the table ---------------------------------------------------------------------------------------
def _leaves() -> set[str]:
    paths = _key_paths(Config)
    return {p for p in paths if not any(q.startswith(p + ".") for q in paths)}


def test_every_config_key_is_classified_by_when_it_applies() -> None:
    leaves = _leaves()
    assert leaves == set(KEYS), f"classify in pipeline/config_in_force.py: {sorted(leaves ^ set(KEYS))}"
    assert {k.split(".")[0] for k in KEYS} == set(CONFIG_IN_FORCE)
    assert all(why for _, why in KEYS.values())


def test_every_key_a_running_process_follows_has_a_probe() -> None:
    follows = {key for key, (when, _) in KEYS.items() if when in FOLLOWS}
    assert follows == set(PROBES), (
        f"a probe per following key (and none other): {sorted(follows ^ set(PROBES))}"
    )


@pytest.fixture
def rasterised(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """SVGs rasterise without the optional renderer (cairosvg): the probe tests the threshold."""
    monkeypatch.setattr(images, "_rasterise_svg", lambda data, side: b"\x89PNG small")
    yield


@pytest.mark.parametrize("key", sorted(PROBES))
def test_an_edit_of_the_key_reaches_the_next_call(key: str, tmp_path: Path, rasterised: None) -> None:
    PROBES[key].run(key, tmp_path)


def test_head_messages_is_decided_at_a_sessions_first_call(tmp_path: Path) -> None:
    """The one per-call exception: the head a session keeps stable stays; a new session takes the edit."""
    probe = Call2(1, FIRST, SECOND)
    _, kept = _two_calls(tmp_path / "kept", {}, None, probe)
    session, edited = _two_calls(tmp_path / "edited", {}, {"stabilizer.headMessages": 1}, probe)
    assert kept == edited
    fresh = session.plugin.session("new")  # type: ignore[attr-defined]
    assert repr(fresh.process(_request(SECOND, None))) != edited


def test_batch_turns_edited_mid_session_is_what_the_evictor_acts_on(tmp_path: Path) -> None:
    """The issue's case: 3 -> 1 in the file; the next call's evictor runs the batch it now may."""
    kept, _ = _two_calls(
        tmp_path / "kept",
        {**EVICTING, "eviction": {"batchTurns": 3}},
        None,
        SESSION_PROBES["eviction.batchTurns"],
    )
    edited, _ = _two_calls(
        tmp_path / "edited",
        {**EVICTING, "eviction": {"batchTurns": 3}},
        {"eviction.batchTurns": 1},
        SESSION_PROBES["eviction.batchTurns"],
    )
    assert not kept._evicted_now and edited._evicted_now
