"""Codex CLI, on the wire: what the model receives with lightmem2, request by request, against the
same session without it.

Codex from npm (0.169.0 pinned, 0.171.0 the newest) runs :data:`wire_audit.STEPS` with ``codex exec``
(ten shell calls: a large listing, run twice identically, a file view, a check script that fails with
exit 3, small echoes; then :data:`wire_audit.FINAL`) twice against the fake provider (counting with
o200k), each time in a fresh work folder: once with the fake straight as Codex's model provider, once
with lightmem2 installed (``lightmem2 install codex``, normal mode). Codex has only a shell, so the
"read" step is a file view (``cat settings_module.py``), and the check runs with ``2>&1`` (see
:func:`_command`). Two model modes, on both versions: the default model runs every tool through a
JavaScript ``exec`` script ("code mode": a free-form call whose output is a list of text parts,
``Script completed``/``Script failed`` then the result object) and ``gpt-5.5`` calls ``exec_command``
directly.

Checked (see ``wire_audit``): every tool output the model reads is verbatim or reduced to lines of the
original plus stubs whose keys recover parts of it; the success or failure words and exit codes equal
the run without lightmem2 (a successful command once read "Script failed" in code mode); a repeat
names an earlier call by the id the model knows; each request extends the one before; the ledger
(``lightmem2 report --json``) has one row per model call with the provider's count, and a "without
lightmem2" within 2% of what the provider counted without it: the ledger leaves out the tools Codex
sends only because lightmem2 is installed (its MCP server's, and with direct tools Codex's own MCP
resource tools); that footprint, measured on the first call, which has nothing to reduce, is bounded
by :data:`FOOTPRINT_MAX` and written to the results. And: at least three outputs reach the model stubbed, the repeated
listing as a repeat stub, the file view whole, the failing check with its ``FAILED`` and ``checks
failed`` lines and exit code 3, and fewer prompt tokens than without lightmem2. Both runs' figures go
to ``<e2e cache>/wire-codex-<version>-<mode>.json``.

Host side calls (a request without the shell tool, e.g. a title) are answered with plain text and
left out of the compared bodies and of the usage rows, the same way in both runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import wire_audit
from e2e_support import (
    Reply,
    ScriptedUpstream,
    base_env,
    cache_root,
    npm_cli,
    stop_pid,
    write_lightmem_config,
)
from server_harness import ServerThread, free_port
from test_e2e_codex import (
    CODE_MODE_TOOL,
    NEWEST,
    PACKAGE,
    PINNED,
    CustomCalls,
    _code_mode,
    _codex_home,
    _exec,
    _tool_names,
    fake_provider,
    namespaced,
)
from wire_audit import FAILING, FINAL, LISTING, PROMPT, REPEAT_OF, STEPS, Step

from lightmem_plugin.hosts.codex import install as installer
from lightmem_plugin.hosts.shared import serve_ctl

CASES = [(NEWEST, "default"), (NEWEST, "gpt-5.5"), (PINNED, "default"), (PINNED, "gpt-5.5")]
FAILING_STEP = next(i for i, s in enumerate(STEPS) if s.command == FAILING)
REPEAT_STEP = [i for i, s in enumerate(STEPS) if s.command == LISTING][1]
# measured: ~35 tokens in code mode (the server's line in Codex's tool list), ~430 with direct tools
# (Codex's list_mcp_resources, list_mcp_resource_templates and read_mcp_resource come with it)
FOOTPRINT_MAX = 600


def _command(step: Step) -> str:
    """The shell command of a step. Codex reads a file with a shell file view, and runs the failing
    check with its stderr in its stdout: Codex reads the two through separate pipes and interleaves
    them as they arrive, so ``check.sh``'s lines came in another order in each run (the FAILED line
    3rd in one, 134th in the other); merged by the shell, both runs print the same text."""
    if step.kind == "read":
        return f"cat {step.path}"
    return f"{step.command} 2>&1" if step.command == FAILING else step.command


def _is_model_call(body: dict[str, Any]) -> bool:
    """A call of the session, not a host side call: the shell tool is offered."""
    return _code_mode(body) or "exec_command" in _tool_names(body)


def step_policy(api: str, body: dict[str, Any]) -> Reply:
    """The next step of :data:`STEPS` by the number of tool outputs so far, then :data:`FINAL`."""
    if not _is_model_call(body):
        return Reply(text="ok")
    done = len(wire_audit.tool_outputs(api, body))
    if done >= len(STEPS):
        return Reply(text=FINAL)
    cmd = _command(STEPS[done])
    if _code_mode(body):
        script = f"const r = await tools.exec_command({{cmd: {json.dumps(cmd)}}});\ntext(r);\n"
        return Reply(text="", tool_calls=[(CODE_MODE_TOOL, script)])
    return Reply(text="", tool_calls=[("exec_command", json.dumps({"cmd": cmd}))])


def _session(fake: ScriptedUpstream) -> tuple[list[dict[str, Any]], list[dict[str, int]]]:
    """The session's request bodies and the provider's usage for each (side calls left out)."""
    assert len(fake.model_bodies) == len(fake.reported)
    kept = [(b, u) for (api, b), u in zip(fake.model_bodies, fake.reported, strict=True) if _is_model_call(b)]
    return [b for b, _ in kept], [u for _, u in kept]


def _final_message(stdout: str) -> str | None:
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    texts = [
        e["item"].get("text")
        for e in events
        if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"
    ]
    return texts[-1] if texts else None


def _run(exe: Path, home: Path, lm_home: Path, env_extra: dict[str, str]) -> None:
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    wire_audit.write_workspace(work)
    env = {**base_env(home, lm_home), "OPENAI_API_KEY": "dummy", **env_extra}
    done = _exec(exe, PROMPT, env, work)
    assert "codex_core::tools::router" not in done.stderr, done.stderr[-2000:]
    assert _final_message(done.stdout) == FINAL, done.stdout[-2000:]


def _recoverer() -> Callable[[str], str | None]:
    """``key`` -> the archived text in the isolated LIGHTMEM2_HOME (None when it cannot be read)."""
    from lightmem_plugin.pipeline import LightMem

    registry = LightMem().registry

    def recover(key: str) -> str | None:
        try:
            return registry.recover(key)
        except Exception:
            return None

    return recover


def _ledger_rows(env: dict[str, str]) -> list[dict[str, Any]]:
    """The calls rows of ``lightmem2 report --all --json`` (the isolated home holds one session)."""
    done = subprocess.run(
        [sys.executable, "-m", "lightmem_plugin.cli", "report", "--all", "--json"],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    sessions = json.loads(done.stdout)["sessions"]
    assert len(sessions) == 1, f"{len(sessions)} sessions in the ledger, one expected"
    return list(sessions[0]["calls"])


@pytest.fixture(scope="module")
def codex(request: pytest.FixtureRequest) -> tuple[str, Path, Path]:
    """(the version asked for, its Codex executable, the e2e cache), found before the test's own
    HOME is set (module scope: built before ``host_home``)."""
    version = str(request.param)
    return version, npm_cli(PACKAGE, version, "codex", "codex"), cache_root()


@pytest.mark.parametrize(("codex", "model"), CASES, ids=[f"{v}-{m}" for v, m in CASES], indirect=["codex"])
def test_codex_wire_with_and_without_lightmem2(
    codex: tuple[str, Path, Path], model: str, tmp_path: Path, host_home: Path, isolated_home: Path
) -> None:
    started = time.monotonic()
    version, exe, cache = codex
    model_line = "" if model == "default" else f'model = "{model}"\n'

    # without lightmem2: the fake provider straight as Codex's model provider
    vanilla = ScriptedUpstream(step_policy, CustomCalls(), counter=wire_audit.o200k_counter())
    vhome = tmp_path / "vanilla"
    with ServerThread(vanilla.app) as up:
        folder = _codex_home(
            vhome,
            model_line + fake_provider(up.url),
        )
        _run(exe, vhome, tmp_path / "vanilla-lm", {"CODEX_HOME": str(folder)})

    # with lightmem2 installed, normal mode
    custom = CustomCalls()
    fake = ScriptedUpstream(
        step_policy, lambda ev: custom(namespaced(ev)), counter=wire_audit.o200k_counter()
    )
    with ServerThread(fake.app) as up:
        write_lightmem_config(isolated_home, free_port(), up.url)
        _codex_home(host_home, model_line)
        installer.run(uninstall=False, project=None)
        try:
            _run(exe, host_home, isolated_home, {})
        finally:
            stop_pid(serve_ctl.pid_file())
    rows = _ledger_rows(base_env(host_home, isolated_home))

    with_bodies, with_usage = _session(fake)
    without_bodies, without_usage = _session(vanilla)
    assert len(without_bodies) == len(STEPS) + 1, f"{len(without_bodies)} model calls without lightmem2"
    assert all(_code_mode(b) is (model == "default") for b in with_bodies + without_bodies)

    # lightmem2's footprint: the first call carries no tool output, so nothing was removed from it;
    # what it has more than the same call without lightmem2 is there because lightmem2 is installed
    # (Codex lists lightmem2's MCP server and, with direct tools, adds its MCP resource tools); the
    # ledger leaves our tools out of "without lightmem2" (before, it overstated the saving by 12%)
    footprint = with_usage[0]["prompt"] - without_usage[0]["prompt"]
    figures = {
        "codex": version,
        "model": model,
        "lightmem2_footprint_tokens_per_call": footprint,
        # the ledger's "without lightmem2" against the run without it, worst call
        "ledger_without_error_max": round(
            max(
                abs((r.get("realBaselineTokens") or 0) - p["prompt"]) / p["prompt"]
                for r, p in zip(rows, without_usage, strict=False)
            ),
            4,
        ),
        "with_lightmem2": wire_audit.per_call_figures(with_usage),
        "without": wire_audit.per_call_figures(without_usage),
    }
    out = cache / f"wire-codex-{version}-{model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(
        f"\ncodex {version} {model} wire figures ({time.monotonic() - started:.0f} s):", json.dumps(figures)
    )

    found = wire_audit.audit("responses", with_bodies, without_bodies, _recoverer())
    found.raise_if_faulty()
    assert found.named_marks >= 1, found  # the listing's head again names the first listing's call
    assert 0 <= footprint <= FOOTPRINT_MAX, f"lightmem2 adds {footprint} tokens to every Codex call"
    wire_audit.audit_ledger(rows, with_usage, without_usage).raise_if_faulty()

    # lightmem2 did reduce: three outputs stubbed, the repeated listing as a repeat of the first
    last = wire_audit.tool_outputs("responses", with_bodies[-1])
    plain_last = wire_audit.tool_outputs("responses", without_bodies[-1])
    stubbed = [n + 1 for n, out in enumerate(last) if wire_audit.STUB_ANY.search(out.text)]
    assert len(stubbed) >= 3, f"only steps {stubbed} reached the model reduced"
    repeat = REPEAT_OF.search(last[REPEAT_STEP].text)
    assert repeat and repeat.group(1) == last[0].call_id, last[REPEAT_STEP].text[:400]

    # the file view reaches the model whole (it is under fileViewChars), as the agent asked for it
    view = next(i for i, s in enumerate(STEPS) if s.kind == "read")
    seen_view = wire_audit.steady(last[view].text)
    assert seen_view == wire_audit.steady(plain_last[view].text), seen_view[:400]

    # the failing check still reads as a failure, with its cause and exit code 3
    failed = last[FAILING_STEP].text
    assert "check_137 ... FAILED: expected 3 replicas, found 2 (quorum lost)" in failed, failed[:600]
    assert "1 of 180 checks failed" in failed, failed[:600]
    assert "3" in wire_audit.EXIT_CODE.findall(failed), failed[:600]

    # and the model read fewer tokens
    assert figures["with_lightmem2"]["prompt_tokens"] < figures["without"]["prompt_tokens"], figures
