"""The fake provider + proxy stack of tests/server, with a ledger, for the reliability tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from fake_upstream import FakeUpstream
from server_harness import ServerThread

from lightmem_plugin.config import Config, config_path
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.server.app import create_app
from lightmem_plugin.store.ledger import Ledger

__all__ = ["FakeUpstream", "ServerThread", "Stack", "ledger_stack"]


@dataclass
class Stack:
    """A fake provider, the proxy in front of it, the proxy's plugin and its ledger."""

    fake: FakeUpstream
    upstream: str
    proxy: str
    plugin: LightMem
    ledger: Ledger
    app: Any

    def chat_url(self) -> str:
        return self.proxy + "/v1/chat/completions"


@contextmanager
def ledger_stack(home: Path, config: Config | None = None, full: bool = False) -> Iterator[Stack]:
    """Fake provider + proxy on free loopback ports; the plugin keeps its ledger and registry in ``home``.
    ``full``: the plugin is ``serve``'s (:meth:`LightMem.from_config`: session state, search index and
    records too), configured by ``home``'s config file."""
    fake = FakeUpstream()
    with ServerThread(fake.app) as up:
        cfg = config or Config()
        cfg.server.upstreams.anthropic = up.url
        cfg.server.upstreams.openai = up.url + "/v1"
        cfg.registry.dir = str(home / "artifacts")
        if full:
            config_path().write_text(cfg.model_dump_json(by_alias=True, exclude_defaults=True))
            plugin = LightMem.from_config()
            assert plugin.ledger is not None and plugin.states is not None
            ledger: Any = plugin.ledger
        else:
            ledger = Ledger(home / "ledger.sqlite3")
            plugin = LightMem(cfg, ledger=ledger)
        app = create_app(plugin)
        try:
            with ServerThread(app) as px:
                yield Stack(fake, up.url, px.url, plugin, ledger, app)
        finally:
            ledger.close()
