"""One fail-open guard, one sink: a fault on each surface passes the payload through and shows in
``doctor`` and ``status`` with its surface and step named."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from lightmem_plugin import faults
from lightmem_plugin.commands import doctor, status
from lightmem_plugin.config import Config
from lightmem_plugin.faults import FaultSink, on_surface, safecall
from lightmem_plugin.hosts import hook_runtime as hooks
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.server import secret
from lightmem_plugin.server.app import create_app
from lightmem_plugin.store.ledger import Ledger
from lightmem_plugin.store.registry import Registry

sys.path.insert(0, str(Path(__file__).parent / "server"))
from fake_upstream import FakeUpstream
from server_harness import ServerThread

BIG = "".join(
    f"2026-03-01 10:00:{i % 60:02d} INFO worker {i}: processed batch {i * 7} ok\n" for i in range(300)
)


def _boom(*_: Any) -> str:
    raise RuntimeError("injected pass failure")


def _doctor_errors() -> str:
    text, _ok = doctor.run(ledger=None)
    return next(line for line in text.splitlines() if line.startswith(("[warn] errors", "[pass] errors")))


def _status_error() -> str:
    with Ledger.default() as ledger:
        text = status.run(ledger, Registry(Path("/nonexistent-never-created")), Config())
    return text.splitlines()[-1]


def test_sink_counts_by_surface_and_step(tmp_path: Path) -> None:
    sink = FaultSink(tmp_path / "f.sqlite3")
    with on_surface("proxy"):
        assert safecall("codec", lambda: 1 // 0, -1, sink, "s1") == -1
        assert safecall("codec", lambda: 1 // 0, -1, sink, "s1") == -1
    assert safecall("reduction", _boom, "kept", sink) == "kept"
    rows = {f.where: f for f in sink.summary()}
    assert set(rows) == {"proxy/codec", "python/reduction"}
    assert rows["proxy/codec"].count == 2 and rows["proxy/codec"].last_session == "s1"
    assert rows["proxy/codec"].last_error.startswith("ZeroDivisionError")
    assert sink.latest().where == "python/reduction"  # type: ignore[union-attr]
    assert sink.latest("s1").where == "proxy/codec"  # type: ignore[union-attr]


def test_a_broken_sink_never_raises(tmp_path: Path) -> None:
    sink = FaultSink(tmp_path / "f.sqlite3")
    sink.close()  # every write now fails inside sqlite3
    assert safecall("x", _boom, "fallback", sink) == "fallback"


def test_messages_are_redacted_before_they_are_stored(tmp_path: Path) -> None:
    sink = FaultSink(tmp_path / "f.sqlite3")
    secret = "sk-ant-api03-" + "A" * 90
    safecall("x", lambda: (_ for _ in ()).throw(ValueError(f"bad key {secret}")), None, sink)
    assert secret not in sink.summary()[0].last_error


@pytest.fixture
def served() -> Any:
    """A real proxy (plugin as ``serve`` builds it: ledger, state, sink) in front of a fake provider."""
    fake = FakeUpstream()
    with ServerThread(fake.app) as up:
        plugin = LightMem.from_config()
        plugin._fixed = Config.model_validate(
            {"server": {"upstreams": {"anthropic": up.url, "openai": up.url + "/v1"}}}
        )
        with ServerThread(create_app(plugin)) as px, httpx.Client(base_url=px.url, timeout=20) as client:
            yield client, fake, plugin


def test_proxy_codec_fault(served: Any) -> None:
    client, fake, _ = served
    body = json.dumps(
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}, {"role": 5}]}
    ).encode()
    r = client.post("/v1/messages", content=body, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 200
    assert fake.received[-1].raw == body  # passed through byte for byte
    assert "proxy/codec x1" in _doctor_errors() and "PayloadError" in _doctor_errors()
    assert _status_error().startswith("last error: proxy/codec")


def test_pass_fault_through_the_proxy(served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    client, fake, _ = served
    monkeypatch.setattr("lightmem_plugin.pipeline.session_chain.reduce_text", _boom)
    messages = [
        {"role": "user", "content": "run it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": BIG},
    ]
    r = client.post("/v1/chat/completions", json={"model": "m", "messages": messages})
    assert r.status_code == 200
    sent = fake.received[-1].body["messages"]
    assert sent[2]["content"].startswith(BIG)  # the output went out whole (a tail block may follow)
    line = _doctor_errors()
    assert "proxy/reduction x1" in line and "injected pass failure" in line
    assert "proxy/reduction" in _status_error()


def test_sidecar_fault(served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    client, _, _ = served
    monkeypatch.setattr("lightmem_plugin.pipeline.session_chain.reduce_text", _boom)
    body = {"sessionId": "oc-1", "toolCallId": "t1", "output": BIG}
    r = client.post("/sidecar/ingest", json=body, headers=_sidecar_headers())
    assert r.status_code == 200 and r.json()["output"] == BIG
    assert "sidecar/reduction x1" in _doctor_errors()
    assert _status_error().startswith("last error: sidecar/reduction")


def _sidecar_headers() -> dict[str, str]:
    """What the OpenClaw plugin sends: the per-install secret."""
    return {secret.HEADER: secret.load_or_create()}


def test_pass_fault_inside_a_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("lightmem_plugin.pipeline.session_chain.reduce_text", _boom)
    payload = {
        "session_id": "cc-1",
        "tool_name": "Bash",
        "tool_use_id": "toolu_1",
        "tool_response": {"stdout": BIG, "stderr": "", "interrupted": False, "isImage": False},
    }
    text, code = hooks.run("claude-code", "PostToolUse", json.dumps(payload))
    assert code == 0 and text == ""  # nothing replaced: the host keeps its output
    assert "hook/reduction x1" in _doctor_errors()


def test_a_hook_that_crashes(monkeypatch: pytest.MonkeyPatch) -> None:
    text, code = hooks.run("claude-code", "PostToolUse", "{not json")
    assert (text, code) == ("", 0)
    line = _doctor_errors()
    assert "hook/claude-code PostToolUse x1" in line and "JSONDecodeError" in line


def test_mcp_tool_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp import Client

    from lightmem_plugin.mcp_server import TOOL, build_server

    registry = LightMem().registry
    monkeypatch.setattr(registry, "recover", lambda *a: (_ for _ in ()).throw(OSError(5, "I/O error")))

    async def call() -> Any:
        async with Client(build_server(registry)) as client:
            return await client.call_tool(TOOL, {"key": "0" * 32})

    result = asyncio.run(call())
    assert result.is_error
    assert "lightmem2_recover failed (OSError" in "".join(getattr(c, "text", "") for c in result.content)
    assert "mcp/lightmem2_recover x1" in _doctor_errors()


def test_no_faults_reads_as_none() -> None:
    faults.FaultSink.default().close()  # the file exists, empty
    assert _doctor_errors() == "[pass] errors: none reported by any surface"


def test_a_failing_pass_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The sink says which pass failed (python/reduction/testrun), the ledger row counts 'reduction'."""

    def broken(lines: list[str]) -> set[int]:
        raise RuntimeError("injected into one pass")

    monkeypatch.setattr("lightmem_plugin.reduction.testrun.failure_lines", broken)
    sink = FaultSink(tmp_path / "f.sqlite3")
    session = LightMem(config=Config(), faults=sink).session("s")
    log = "".join(f"tests/test_a.py::test_{i} PASSED  [{i}%]\n" for i in range(100))
    log += "==== 1 failed, 99 passed in 0.5s ====\n"
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"command": "pytest"}'},
    }
    msgs = [
        {"role": "user", "content": "test it"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": log},
    ]
    out = session.before_model_call(msgs)
    assert out[2]["content"].startswith(log)  # the original went out
    assert session.fail.errors["reduction"] == 1
    (fault,) = sink.summary()
    assert fault.where == "python/reduction/testrun" and "injected into one pass" in fault.last_error


def test_an_unknown_surface_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown surface 'proxyy'"), on_surface("proxyy"):
        pass


def test_the_guard_swallows_reports_and_tells_the_caller(tmp_path: Path) -> None:
    sink = FaultSink(tmp_path / "f.sqlite3")
    seen: list[str] = []
    with faults.guard("codec", sink, session_id="s1", on_error=lambda step, err: seen.append(step)) as caught:
        raise ValueError("bad body")
    assert isinstance(caught.error, ValueError) and seen == ["codec"]
    (row,) = sink.summary()
    assert (row.where, row.last_session, row.count) == ("python/codec", "s1", 1)
    with faults.guard("codec", sink) as clean:
        pass
    assert clean.error is None and sink.summary()[0].count == 1


def test_the_guard_opens_a_lazy_sink_only_on_failure_and_lets_answers_through(tmp_path: Path) -> None:
    opened: list[int] = []

    def sink() -> FaultSink:
        opened.append(1)
        return FaultSink(tmp_path / "f.sqlite3")

    with faults.guard("tool", sink, surface="mcp"):
        pass
    assert opened == []
    with pytest.raises(KeyError), faults.guard("tool", sink, answers=(KeyError,)):
        raise KeyError("an answer, not a fault")
    assert opened == []
    with faults.guard("tool", sink, surface="mcp"):
        raise RuntimeError("x")
    assert opened == [1] and FaultSink(tmp_path / "f.sqlite3").summary()[0].where == "mcp/tool"


def test_the_guard_passes_exits_through_unless_told_and_survives_a_broken_counter() -> None:
    with pytest.raises(SystemExit), faults.guard("hook"):
        raise SystemExit(3)
    with faults.guard("hook", catch=BaseException) as caught:
        raise SystemExit(3)
    assert isinstance(caught.error, SystemExit)

    def broken(step: str, err: BaseException) -> None:
        raise OSError("disk full")

    with faults.guard("hook", on_error=broken) as caught:
        raise ValueError("x")
    assert isinstance(caught.error, ValueError)


SURFACES_DIRS = ("server", "hosts", "hooks", "mcp_server", "wire")
NOT_FAIL_OPEN = {
    ("hosts/hook_runtime.py", "_log"): "writing hooks.log: a log line must never be why a hook fails",
    ("hosts/hook_runtime.py", "main"): "stdout closed by the host: nothing left to tell it",
}
"""Broad handlers on the surfaces that are not the fail-open guard, and why."""


def test_every_surface_fails_open_through_the_one_guard() -> None:
    """No hand-written ``except Exception`` on the surfaces (handlers that clean up and re-raise
    aside): a new one must use :func:`faults.guard`, so its failure reaches doctor and status."""
    import ast

    package = Path(faults.__file__).parent
    found = set()
    for folder in SURFACES_DIRS:
        for path in sorted((package / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for fn in ast.walk(tree):
                if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(fn):
                    broad = isinstance(node, ast.ExceptHandler) and (
                        isinstance(node.type, ast.Name) and node.type.id in ("Exception", "BaseException")
                    )
                    if broad and not isinstance(node.body[-1], ast.Raise):
                        found.add((str(path.relative_to(package)), fn.name))
    assert found, "the scan finds nothing: it checks nothing"
    assert found == set(NOT_FAIL_OPEN), (
        f"broad except outside faults.guard: {sorted(found - set(NOT_FAIL_OPEN))}"
    )
