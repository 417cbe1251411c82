"""The LLM estimator against a real loopback HTTP server with scripted replies."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from eviction_helpers import retry_session

from lightmem_plugin.config import EstimatorConfig
from lightmem_plugin.eviction.heuristic import HeuristicEstimator
from lightmem_plugin.eviction.lifecycle import TaskRegistry
from lightmem_plugin.eviction.llm_estimator import LLMEstimator, render_turns

SECRET = "sk-test-0123456789abcdef"


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    delay: float = 0.0


@dataclass
class Script:
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)


def completion(content: str) -> Reply:
    return Reply(
        200, json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
    )


class _Handler(BaseHTTPRequestHandler):
    script: Script

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.script.requests.append(
            {"path": self.path, "headers": dict(self.headers), "body": json.loads(self.rfile.read(length))}
        )
        reply = self.script.replies.pop(0) if self.script.replies else Reply(500, b"no more replies")
        if reply.delay:
            time.sleep(reply.delay)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()
    handler = type("Handler", (_Handler,), {"script": script})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", script
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def estimator(base: str, **kw: Any) -> LLMEstimator:
    config = EstimatorConfig(
        kind="llm",
        proxyBaseUrl=base,
        proxyApiKey=SECRET,
        model="tiny-model",
        timeoutS=kw.pop("timeout", 2.0),
        retries=kw.pop("retries", 0),
    )
    return LLMEstimator(config, **kw)


GOOD = json.dumps(
    {
        "taskUpdates": [
            {
                "taskId": "t1",
                "lifecycle": "completed",
                "objective": "add retries to client.py",
                "turns": [2, 15],
                "evidence": ["tests pass at turn 14"],
            },
            {"taskId": "t2", "lifecycle": "active", "objective": "CLI flag", "turns": [17, 22]},
        ]
    }
)


def test_scripted_reply_is_validated_and_applied(server: tuple[str, Script]) -> None:
    base, script = server
    script.replies.append(completion(GOOD))
    s, _ = retry_session()
    est, reg = estimator(base), TaskRegistry()
    updates = est.estimate(s.turns, reg)
    assert [(u.task_id, u.lifecycle, u.turns) for u in updates] == [
        ("t1", "completed", (2, 15)),
        ("t2", "active", (17, 22)),
    ]
    assert reg.apply(updates, max_turn=len(s.messages) - 1).rejected == ()
    assert est.successes == 1 and not est.fallbacks
    (request,) = script.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {SECRET}"
    body = request["body"]
    assert body["model"] == "tiny-model" and body["response_format"] == {"type": "json_object"}
    assert (
        "[4] assistant:" in body["messages"][1]["content"]
        and "cat client.py" in body["messages"][1]["content"]
    )


def test_second_call_sends_only_new_turns_and_current_chunks(server: tuple[str, Script]) -> None:
    base, script = server
    script.replies += [completion(GOOD), completion('{"taskUpdates": []}')]
    s, at = retry_session()
    est, reg = estimator(base), TaskRegistry()
    reg.apply(est.estimate(s.turns[: at["goal2"]], reg))
    assert est.estimate(s.turns, reg) == []
    second = script.requests[1]["body"]["messages"][1]["content"]
    assert f"Messages {at['goal2']}..{len(s.messages) - 1}" in second and '"taskId": "t1"' in second
    assert f"[{at['ls']}] assistant" not in second


@pytest.mark.parametrize(
    ("replies", "reason"),
    [
        ([completion("this is not json")], "malformed_json"),
        ([completion('{"taskUpdates": [{"taskId": "t1", "lifecycle": "finished"}]}')], "schema"),
        ([completion('{"taskUpdates": [], "note": "extra key"}')], "schema"),
        ([Reply(200, b"<html>oops</html>")], "malformed_reply"),
        ([Reply(200, b'{"choices": []}')], "malformed_reply"),
        ([Reply(401, b'{"error": "bad key"}')], "http_401"),
        ([Reply(500, b"{}"), Reply(502, b"{}")], "http_5xx"),
    ],
)
def test_failures_fall_back_to_the_heuristic(
    server: tuple[str, Script], replies: list[Reply], reason: str
) -> None:
    base, script = server
    script.replies += replies
    s, _ = retry_session()
    est = estimator(base, retries=1)
    updates = est.estimate(s.turns, TaskRegistry())
    assert est.fallbacks == {reason: 1} and est.successes == 0
    assert updates == HeuristicEstimator().estimate(s.turns, TaskRegistry())
    assert len(script.requests) == (2 if reason == "http_5xx" else 1), "4xx and bad replies are not retried"


def test_500s_then_success_is_retried(server: tuple[str, Script]) -> None:
    base, script = server
    script.replies += [Reply(500, b"{}"), Reply(503, b"{}"), completion(GOOD)]
    s, _ = retry_session()
    est = estimator(base, retries=2)
    updates = est.estimate(s.turns, TaskRegistry())
    assert [u.task_id for u in updates] == ["t1", "t2"] and not est.fallbacks and len(script.requests) == 3


def test_slow_reply_times_out(server: tuple[str, Script]) -> None:
    base, script = server
    script.replies.append(Reply(200, completion(GOOD).body, delay=1.0))
    s, _ = retry_session()
    est = estimator(base, timeout=0.2)
    started = time.perf_counter()
    est.estimate(s.turns, TaskRegistry())
    assert est.fallbacks == {"timeout": 1} and time.perf_counter() - started < 1.0


def test_unreachable_and_unconfigured_endpoints() -> None:
    s, _ = retry_session()
    est = estimator("http://127.0.0.1:9/v1", retries=1, timeout=0.5)
    assert est.estimate(s.turns, TaskRegistry()) and est.fallbacks == {"transport": 1}
    bare = LLMEstimator(EstimatorConfig(kind="llm"))
    bare.estimate(s.turns, TaskRegistry())
    assert bare.fallbacks == {"not_configured": 1}
    broken = estimator("http://[::bad-url/v1")
    assert broken.estimate(s.turns, TaskRegistry()) and sum(broken.fallbacks.values()) == 1


def test_api_key_never_logged(server: tuple[str, Script], caplog: pytest.LogCaptureFixture) -> None:
    base, script = server
    script.replies += [Reply(401, b"{}"), completion("nope")]
    s, _ = retry_session()
    est = estimator(base)
    with caplog.at_level(logging.DEBUG):
        est.estimate(s.turns, TaskRegistry())
        est.estimate(s.turns, TaskRegistry())
    assert est.fallbacks == {"http_401": 1, "malformed_json": 1}
    assert SECRET not in caplog.text and SECRET not in repr(est) and "fell back" in caplog.text


def test_rendering_is_compact_and_deterministic() -> None:
    s, _ = retry_session()
    text = render_turns(s.turns, 0, 6)
    assert text.startswith(f"({len(s.messages) - 6} earlier messages omitted)")
    assert text == render_turns(s.turns, 0, 6) and max(len(line) for line in text.splitlines()) < 420
