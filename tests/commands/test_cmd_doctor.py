from __future__ import annotations

import http.server
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lightmem_plugin.commands import doctor
from lightmem_plugin.commands._hosts import HOSTS, Probe, check_host, http_get, parse_version, run_command
from lightmem_plugin.errors import ConfigError, TokenizerError
from lightmem_plugin.store.ledger import CallRecord, Ledger


class FakeMachine:
    """A machine with some host CLIs, their outputs, and HTTP endpoints that answer or not."""

    def __init__(
        self,
        home: Path,
        programs: dict[str, dict[str, tuple[int, str]]],
        http: dict[str, int],
        cwd: Path | None = None,
    ) -> None:
        self.home = home
        self.cwd = cwd or home
        self.programs = programs
        self.http = http
        self.requests: list[tuple[str, dict[str, str]]] = []

    def probe(self) -> Probe:
        return Probe(which=self.which, run=self.run, get=self.get, home=self.home, cwd=self.cwd)

    def which(self, name: str) -> str | None:
        return f"/usr/local/bin/{name}" if name in self.programs else None

    def run(self, cmd: list[str]) -> tuple[int, str]:
        return self.programs[Path(cmd[0]).name][" ".join(cmd[1:])]

    def get(self, url: str, headers: dict[str, str]) -> tuple[int | None, str]:
        self.requests.append((url, headers))
        code = self.http.get(url)
        return (code, "") if code is not None else (None, "ConnectError: [Errno 111] Connection refused")


def write_claude_settings(home: Path, command: str) -> None:
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    hooks = {"PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": command}]}]}
    (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks, "model": "opus"}))


def write_codex_config(home: Path, text: str) -> None:
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    (home / ".codex" / "config.toml").write_text(text)


CODEX_WIRED = '[model_providers.lightmem2]\nbase_url = "http://127.0.0.1:8787/v1"\nwire_api = "responses"\n'


def lines_by_check(text: str) -> dict[str, str]:
    return {
        line.split("] ", 1)[1].split(":", 1)[0]: line for line in text.splitlines() if line.startswith("[")
    }


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "user"
    h.mkdir()
    return h


def test_clean_machine_passes_with_warnings(home: Path, isolated_home: Path) -> None:
    machine = FakeMachine(home, {}, {})
    text, ok = doctor.run(probe=machine.probe())
    assert ok
    checks = lines_by_check(text)
    assert list(checks) == [
        "config",
        "registry",
        "archive key",
        "stores",
        "tokenizer",
        "server",
        "openclaw",
        "claude-code",
        "codex",
        "estimator",
        "errors",
    ]
    assert checks["stores"].startswith("[pass] stores:")
    assert checks["config"].startswith("[pass]") and "defaults in force" in checks["config"]
    assert checks["tokenizer"].startswith("[pass]") and "verified" in checks["tokenizer"]
    assert checks["server"] == "[warn] server: not running at http://127.0.0.1:8787/healthz"
    assert checks["codex"].startswith("[warn] codex: not installed")
    assert checks["archive key"].startswith("[pass] archive key:")
    assert text.splitlines()[-1] == "doctor: 7 pass, 4 warn, 0 fail"
    assert machine.requests == [("http://127.0.0.1:8787/healthz", {})]


def test_everything_wired_and_supported(home: Path, isolated_home: Path, ledger: Ledger) -> None:
    write_claude_settings(home, "lightmem2 hook claude-code PostToolUse")
    write_codex_config(home, 'model = "gpt-5"\n' + CODEX_WIRED)
    programs = {
        "openclaw": {
            "--version": (0, "OpenClaw 2026.9.6 (3f2a1c)\n"),
            "plugins list": (0, "lightmem2  loaded\n"),
        },
        "claude": {"--version": (0, "2.1.332 (Claude Code)\n")},
        "codex": {"--version": (0, "codex-cli 0.169.0\n")},
    }
    machine = FakeMachine(home, programs, {"http://127.0.0.1:8787/healthz": 200})
    text, ok = doctor.run(ledger=ledger, probe=machine.probe())
    checks = lines_by_check(text)
    assert ok
    assert (
        checks["openclaw"]
        == "[pass] openclaw: 2026.9.6 (supported), lightmem2 wired in (openclaw plugins list)"
    )
    assert checks["claude-code"].startswith("[pass] claude-code: 2.1.332 (supported)")
    assert checks["codex"].startswith("[pass] codex: 0.169.0 (supported)")
    assert checks["server"].startswith("[pass]")
    assert checks["errors"].startswith("[warn] errors: html x1 in the last 77 calls")


def test_a_dead_proxy_fails_naming_the_hosts_wired_to_it(home: Path, isolated_home: Path) -> None:
    write_claude_settings(home, "lightmem2 hook claude-code PostToolUse")
    write_codex_config(home, 'model = "gpt-5"\n' + CODEX_WIRED)
    programs = {
        "claude": {"--version": (0, "2.1.332 (Claude Code)\n")},
        "codex": {"--version": (0, "codex-cli 0.169.0\n")},
    }
    text, ok = doctor.run(probe=FakeMachine(home, programs, {}).probe())  # nothing listens
    assert not ok
    server = lines_by_check(text)["server"]
    assert server.startswith("[fail] server: not running at http://127.0.0.1:8787/healthz")
    assert server.endswith("and claude-code, codex are wired to it")
    # nothing wired: the same dead proxy is only a warning
    text, ok = doctor.run(probe=FakeMachine(home / "elsewhere", {}, {}).probe())
    assert ok and lines_by_check(text)["server"].startswith("[warn] server: not running")


@pytest.mark.parametrize(
    ("exe", "outputs", "status", "detail"),
    [
        ("claude", {"--version": (0, "2.1.332 (Claude Code)")}, "warn", "lightmem2 not wired in"),
        ("claude", {"--version": (0, "2.0.14 (Claude Code)")}, "warn", "older than supported 2.1.x"),
        ("claude", {"--version": (1, "segfault")}, "fail", "`claude --version` failed (exit 1)"),
        ("codex", {"--version": (0, "codex-cli 0.170.2")}, "warn", "lightmem2 not wired in"),
        ("codex", {"--version": (0, "codex-cli 0.159.9")}, "warn", "older than supported"),
        ("codex", {"--version": (124, "timed out after 5 s")}, "fail", "failed (exit 124)"),
        (
            "openclaw",
            {"--version": (0, "2026.9.6"), "plugins list": (0, "memory-core\n")},
            "warn",
            "not wired",
        ),
        (
            "openclaw",
            {"--version": (0, "2026.9.6"), "plugins list": (2, "no state dir")},
            "fail",
            "failed (exit 2)",
        ),
        (
            "openclaw",
            {"--version": (0, "2026.11.1"), "plugins list": (0, "lightmem2\n")},
            "warn",
            "newer than tested 2026.9.x",
        ),
    ],
)
def test_host_cases(
    home: Path, exe: str, outputs: dict[str, tuple[int, str]], status: str, detail: str
) -> None:
    machine = FakeMachine(home, {exe: outputs}, {})
    host = next(h for h in HOSTS if h.exe == exe)
    check = check_host(host, machine.probe())
    assert check.status == status and detail in check.detail
    if status != "pass":
        assert check.fix


@pytest.mark.parametrize("exe", ["claude", "codex"])
def test_a_project_installed_with_project_is_wired_in_when_doctor_runs_there(home: Path, exe: str) -> None:
    """`install ... --project DIR` wires DIR only; doctor run inside DIR (or below it) must say so."""
    project = home / "work" / "proj"
    (project / "src").mkdir(parents=True)
    if exe == "claude":
        write_claude_settings(project, "/opt/lightmem2/bin/lightmem2 hook claude-code PostToolUse")
        version, where = "2.1.332 (Claude Code)", f"hooks in {project / '.claude' / 'settings.json'}"
    else:
        write_codex_config(project, '[model_providers.lightmem2]\nbase_url = "http://127.0.0.1:8787/v1"\n')
        version, where = "codex-cli 0.171.0", f"in {project / '.codex' / 'config.toml'}"
    host = next(h for h in HOSTS if h.exe == exe)
    inside = check_host(
        host, FakeMachine(home, {exe: {"--version": (0, version)}}, {}, project / "src").probe()
    )
    assert inside.status == "pass" and inside.wired and where in inside.detail, inside.detail
    outside = check_host(host, FakeMachine(home, {exe: {"--version": (0, version)}}, {}, home).probe())
    assert outside.status == "warn" and "not wired in" in outside.detail


def test_too_old_claude_with_our_hooks_fails(home: Path) -> None:
    write_claude_settings(home, "/opt/lightmem2/bin/lightmem2 hook claude-code PostToolUse")
    machine = FakeMachine(home, {"claude": {"--version": (0, "2.0.14 (Claude Code)")}}, {})
    check = check_host(HOSTS[1], machine.probe())
    assert check.status == "fail" and "2.0.14 (older than supported 2.1.x)" in check.detail
    assert check.fix and "--uninstall" in check.fix and "upgrade" in check.fix


@pytest.mark.parametrize(
    ("exe", "version", "status", "detail"),
    [
        ("codex", "codex-cli 0.171.0", "pass", "0.171.0 (supported)"),  # the e2e tests run it
        ("codex", "codex-cli 0.171.4", "pass", "0.171.4 (supported)"),
        ("codex", "codex-cli 0.169.0", "pass", "0.169.0 (supported)"),
        ("codex", "codex-cli 0.172.0", "warn", "0.172.0 (newer than tested 0.171.x"),
        ("codex", "codex-cli 0.159.0", "fail", "0.159.0 (older than supported"),
        ("claude", "2.1.340 (Claude Code)", "pass", "2.1.340 (supported)"),
        ("claude", "2.2.0 (Claude Code)", "warn", "2.2.0 (newer than tested 2.1.x"),
        ("claude", "2.0.9 (Claude Code)", "fail", "2.0.9 (older than supported 2.1.x"),
        ("openclaw", "OpenClaw 2026.9.9", "pass", "2026.9.9 (supported)"),
        ("openclaw", "OpenClaw 2026.10.2", "warn", "2026.10.2 (newer than tested 2026.9.x"),
        ("openclaw", "OpenClaw 2026.8.1", "fail", "2026.8.1 (older than supported 2026.9.x"),
    ],
)
def test_wired_host_versions_newer_warn_older_fail(
    home: Path, exe: str, version: str, status: str, detail: str
) -> None:
    write_claude_settings(home, "/opt/lightmem2/bin/lightmem2 hook claude-code PostToolUse")
    write_codex_config(home, CODEX_WIRED)
    outputs = {"--version": (0, version), "plugins list": (0, "lightmem2\n")}
    machine = FakeMachine(home, {exe: outputs}, {})
    check = check_host(next(h for h in HOSTS if h.exe == exe), machine.probe())
    assert check.status == status and detail in check.detail, check
    if status == "warn":
        assert check.fix and "downgrade" not in check.fix and "install " + check.name not in check.fix


@pytest.mark.parametrize(
    ("text", "status"),
    [
        (CODEX_WIRED, "pass"),
        ('[model_providers.openai]\nname = "x"\n', "warn"),
        ("[model_providers\n", "fail"),
    ],
)
def test_codex_config(home: Path, text: str, status: str) -> None:
    write_codex_config(home, text)
    machine = FakeMachine(home, {"codex": {"--version": (0, "codex-cli 0.169.0")}}, {})
    assert check_host(HOSTS[2], machine.probe()).status == status


def test_bad_config_fails_with_fix(home: Path, isolated_home: Path) -> None:
    (isolated_home / "config.json").write_text('{"mode": "agressive"}')
    text, ok = doctor.run(probe=FakeMachine(home, {}, {}).probe())
    assert not ok
    line = lines_by_check(text)["config"]
    assert line.startswith("[fail] config:") and "mode" in line and "agressive" in line
    following = text.splitlines()[text.splitlines().index(line) + 1]
    assert following.startswith("       fix: edit ") and "lightmem2 config validate" in following
    data = json.loads(doctor.run(as_json=True, probe=FakeMachine(home, {}, {}).probe())[0])
    assert data["ok"] is False and data["checks"][0]["status"] == "fail" and data["checks"][0]["fix"]


def test_registry_permissions(home: Path, isolated_home: Path) -> None:
    reg = isolated_home / "artifacts"
    reg.mkdir(mode=0o755)
    os.chmod(reg, 0o755)
    text, ok = doctor.run(probe=FakeMachine(home, {}, {}).probe())
    assert not ok and f"[fail] registry: {reg} is 0755, readable by others" in text
    assert f"fix: chmod 700 {reg}" in text
    os.chmod(reg, 0o700)
    text, ok = doctor.run(probe=FakeMachine(home, {}, {}).probe())
    assert ok and f"[pass] registry: {reg} writable, 0700" in text


def test_tokenizer_failure(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> bytes:
        raise TokenizerError("tokenizer ranks file sha256 0000... != expected 446a...; reinstall lightmem2")

    monkeypatch.setattr(doctor, "ranks_bytes", broken)
    text, ok = doctor.run(probe=FakeMachine(home, {}, {}).probe())
    assert not ok and "[fail] tokenizer: tokenizer ranks file sha256" in text


@pytest.mark.parametrize(
    ("code", "status", "detail"),
    [
        (200, "pass", "reachable (model qwen3-8b)"),
        (401, "fail", "rejected the API key (HTTP 401)"),
        (404, "warn", "answered HTTP 404"),
        (503, "fail", "answered HTTP 503"),
        (None, "fail", "unreachable (ConnectError"),
    ],
)
def test_llm_estimator(home: Path, isolated_home: Path, code: int | None, status: str, detail: str) -> None:
    est = {
        "kind": "llm",
        "proxyBaseUrl": "http://127.0.0.1:9/v1/",
        "proxyApiKey": "sk-test-123",
        "model": "qwen3-8b",
    }
    (isolated_home / "config.json").write_text(json.dumps({"estimator": est}))
    machine = FakeMachine(home, {}, {} if code is None else {"http://127.0.0.1:9/v1/models": code})
    text, ok = doctor.run(probe=machine.probe(), as_json=True)
    data = json.loads(text)
    (check,) = [c for c in data["checks"] if c["check"] == "estimator"]
    assert check["status"] == status and detail in check["detail"]
    assert ok == (status != "fail")
    assert "sk-test-123" not in text  # the key is sent, never printed
    assert ("http://127.0.0.1:9/v1/models", {"Authorization": "Bearer sk-test-123"}) in machine.requests


def test_llm_estimator_without_url(home: Path, isolated_home: Path) -> None:
    (isolated_home / "config.json").write_text(json.dumps({"estimator": {"kind": "llm"}}))
    text, ok = doctor.run(probe=FakeMachine(home, {}, {}).probe())
    assert not ok and "[fail] estimator: kind is llm but estimator.proxyBaseUrl is not set" in text


def test_pass_errors_only_count_recent_calls(home: Path, tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite3") as led:
        old = CallRecord("s", 0, "normal", 10, 10, 0, 10, errors={"json": 3}, last_error="ValueError: bad")
        led.record_call(old)
        for i in range(1, doctor.RECENT_CALLS + 1):
            led.record_call(CallRecord("s", i, "normal", 10, 10, 9, 1))
        text, ok = doctor.run(ledger=led, probe=FakeMachine(home, {}, {}).probe())
    assert ok and f"[pass] errors: none in the last {doctor.RECENT_CALLS} calls" in text


def test_json_shape(home: Path) -> None:
    out, ok = doctor.run(as_json=True, probe=FakeMachine(home, {}, {}).probe())
    data = json.loads(out)
    assert out == json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False)
    assert data["ok"] is ok is True
    assert all(set(c) == {"check", "status", "detail", "fix"} for c in data["checks"])
    assert {c["status"] for c in data["checks"]} <= {"pass", "warn", "fail"}


@pytest.mark.parametrize(
    ("text", "version"),
    [("2.1.332 (Claude Code)", (2, 1, 332)), ("codex-cli 0.169.0", (0, 169, 0)), ("OpenClaw", None)],
)
def test_parse_version(text: str, version: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == version


# -- the real probe, on this machine, without the network -------------------------------------------


def test_run_command_is_time_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "slow"
    script.write_text("#!/bin/sh\necho started\nsleep 30\n")
    script.chmod(0o755)
    from lightmem_plugin.hosts import base

    monkeypatch.setattr(base, "SUBPROCESS_TIMEOUT_S", 0.5)
    assert run_command([str(script)]) == (124, "timed out after 0.5 s")
    assert run_command([str(tmp_path / "missing")])[0] == 127
    fast = tmp_path / "claude"
    fast.write_text("#!/bin/sh\necho '2.1.332 (Claude Code)'\n")
    fast.chmod(0o755)
    assert run_command([str(fast), "--version"]) == (0, "2.1.332 (Claude Code)\n")


@pytest.fixture
def healthz() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/healthz" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_http_get_on_loopback(healthz: str) -> None:
    assert http_get(healthz + "/healthz", {}) == (200, "")
    assert http_get(healthz + "/other", {})[0] == 404
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, why = http_get(f"http://127.0.0.1:{port}/healthz", {})
    assert code is None and "ConnectError" in why


def test_reads_the_default_ledger_when_none_is_given(home: Path, isolated_home: Path) -> None:
    with Ledger.default() as led:
        led.record_call(CallRecord("s", 1, "normal", 10, 10, 0, 10, errors={"images": 2}, last_error="E"))
    text, ok = doctor.run(probe=FakeMachine(home, {}, {}).probe())
    assert ok and "[warn] errors: images x2 in the last 1 calls (last: session s call 1: E)" in text


def test_a_bad_config_is_checked_against_the_config_in_force(home: Path, isolated_home: Path) -> None:
    """Measured before: with a typo in the file, doctor probed the default port 8787 while the proxy ran
    on the last good config's, and told the user to "file the error" their typo had caused."""
    from lightmem_plugin.config import ConfigHolder
    from lightmem_plugin.faults import open_sink, report

    path = isolated_home / "config.json"
    path.write_text('{"mode": "aggressive", "server": {"port": 9555}}')
    ConfigHolder()  # a process read it while valid: the last good copy
    path.write_text('{"mode": "turbo", "server": {"port": 9555}}')
    report(
        open_sink(),
        "claude-code SessionStart",
        ConfigError(f'{path}: mode = "turbo" is invalid'),
        surface="hook",
    )
    text, ok = doctor.run(probe=FakeMachine(home, {}, {}).probe())
    checks = lines_by_check(text)
    assert not ok and "runs on the last good (mode aggressive" in checks["config"]
    assert "http://127.0.0.1:9555/healthz" in checks["server"]
    following = text.splitlines()[text.splitlines().index(checks["errors"]) + 1]
    assert "file the error" not in following and "config" in following
