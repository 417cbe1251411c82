"""What the Claude Code e2e tests of one scripted session share: running ``claude -p`` in a bounded way,
reading the requests the fake provider got, and asking lightmem2's CLI and archive.

Why one module: the cold-start, compaction and compact-before-host tests each had their own copy of
these helpers (the same lines three times over); a fix to one (a timeout, what a failure prints) must
reach all of them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from e2e_support import ScriptedUpstream, base_env, lightmem2_cli, log_tail, run_bounded

PACKAGE, VERSION = "@anthropic-ai/claude-code", "2.1.332"
CLAUDE_TIMEOUT_S = 180
COMPACT_ASK = "create a detailed summary of the conversation so far"
"""Words of the instruction Claude Code appends to the last user message of its summarising call."""

Body = dict[str, Any]


def text(content: Any) -> str:
    """The text of Anthropic content: a string, or its blocks' texts joined."""
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


def is_agent_call(body: Body) -> bool:
    """A request of the agent loop (it offers Bash), not one of Claude Code's side calls (a title)."""
    return any(t.get("name") == "Bash" for t in body.get("tools") or [])


def is_summarising(body: Body) -> bool:
    """Claude Code's own compaction: its summarising request."""
    last = (body.get("messages") or [{}])[-1]
    return last.get("role") == "user" and COMPACT_ASK in text(last.get("content") or "")


def after_goal(body: Body, goal: str) -> list[Body] | None:
    """The messages after the newest user message holding ``goal`` (None: the request has none)."""
    msgs = body.get("messages") or []
    for n in range(len(msgs) - 1, -1, -1):
        if msgs[n].get("role") == "user" and goal in text(msgs[n].get("content") or ""):
            return msgs[n + 1 :]
    return None


def env_for(home: Path, lm_home: Path) -> dict[str, str]:
    """Claude Code's environment: a dummy key and no traffic but the model's."""
    env = base_env(home, lm_home)
    env.update({"ANTHROPIC_API_KEY": "dummy", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    return env


def fresh(path: Path) -> Path:
    """``path`` as an empty directory."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def run_claude(exe: Path, env: dict[str, str], work: Path, prompt: str, *extra: str) -> Body:
    """``claude -p PROMPT`` (Bash allowed, JSON out), bounded in time; its JSON result. A failure
    says what Claude Code, the hooks and ``serve`` logged."""
    cmd = [str(exe), "-p", prompt, "--allowedTools", "Bash", "--output-format", "json", *extra]
    done = run_bounded(cmd, env, work, CLAUDE_TIMEOUT_S)
    lm_home = Path(env["LIGHTMEM2_HOME"])
    assert done.returncode == 0, (
        f"claude -p failed ({done.returncode}):\n{done.stderr[-3000:]}\n"
        f"hooks.log: {log_tail(lm_home / 'hooks.log')}\nserve.log: {log_tail(lm_home / 'serve.log')}"
    )
    out: Body = json.loads(done.stdout)
    return out


def agent_calls(up: ScriptedUpstream) -> tuple[list[Body], list[dict[str, int]], list[bool]]:
    """The agent loop's requests the fake provider got, their usage rows, and which of all its model
    requests they were (the mask over ``up.model_bodies``)."""
    assert len(up.model_bodies) == len(up.reported), "a model request got no usage row"
    mask = [is_agent_call(body) for _, body in up.model_bodies]
    bodies = [body for (_, body), keep in zip(up.model_bodies, mask, strict=True) if keep]
    usage = [row for row, keep in zip(up.reported, mask, strict=True) if keep]
    return bodies, usage, mask


def plain(value: Any) -> Any:
    """``value`` without ``cache_control`` (Claude Code moves its breakpoints every call)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def cli(env: dict[str, str], cwd: Path, *args: str) -> str:
    """``lightmem2 ARGS`` with the test's data dir; its stdout (it must succeed)."""
    return lightmem2_cli(env, cwd, *args, timeout=60)


def recover(key: str, lines: tuple[int, int] | None = None) -> str | None:
    """What the archive holds under ``key`` (its ``lines``), None when it has nothing there."""
    from lightmem_plugin.pipeline import LightMem

    try:
        return LightMem().registry.recover(key, lines)
    except Exception:
        return None
