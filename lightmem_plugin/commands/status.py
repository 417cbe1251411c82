"""status [--json]: the mode, what is on, and how the current session is doing, in a few lines.

The current session is the one whose call was recorded last (or ``--session ID``). It shows the
context size now against what the host alone would send, the cache hit rate (the provider's figure
when it reports one, else simulated), the cost K saved so far against the vanilla estimate, the
archived originals, and the last pass error if any. Short enough for a chat bubble. When the config
file is invalid it says so first (file, key, bad value, fix) and which config is in force instead: the
last good one, or the defaults if the file was never valid.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..config import Config, ConfigHolder, data_dir
from ..faults import FAULTS_FILE, FaultSink
from ..ledger import Ledger, SessionTotals
from ..pipeline import LightMem
from ..registry import Registry
from ._format import pct, size, to_json, tokens, totals_dict
from .base import Command, Outcome


def _modules(config: Config) -> dict[str, Any]:
    table = config.mode_table()
    return {
        "stabilizer": config.stabilizer.enabled,
        "passes": list(table.passes),
        "eviction": table.eviction,
    }


def _session_lines(t: SessionTotals) -> list[str]:
    rate, real = t.hit_rate()
    source = f"real, {t.real_calls} of {t.calls} calls reported" if real else "simulated"
    change = t.last_input_tokens / t.last_baseline_tokens - 1 if t.last_baseline_tokens else 0.0
    return [
        f"session: {t.session_id} ({t.calls} calls)",
        f"context now: {tokens(t.last_input_tokens)} tokens"
        + (" (the provider's count)" if t.context_counted_by == "provider" else " (estimated)")
        + f"; without lightmem2: {tokens(t.last_baseline_tokens)} ({100 * change:+.1f}%)",
        f"hit rate: {pct(rate)} ({source})",
        f"K so far: {tokens(t.k)} vs {tokens(t.k_baseline)} vanilla "
        f"(saved {tokens(t.k_saved)}, {t.k_saved_pct:.1f}%)",
        f"evictions: {t.evictions} ({tokens(t.evicted_tokens)} tokens); prefix breaks: {t.prefix_breaks}",
    ]


def last_error(totals: SessionTotals | None, sid: str | None) -> str | None:
    """The newest failure: the fault sink's (this session's, else any surface's), else the ledger's."""
    if (data_dir() / FAULTS_FILE).exists():
        sink = FaultSink.default()
        try:
            fault = (sink.latest(sid) if sid else None) or sink.latest()
        finally:
            sink.close()
        if fault is not None:
            where = (
                f" in session {fault.last_session}"
                if fault.last_session and fault.last_session != sid
                else ""
            )
            return f"{fault.where}{where}: {fault.last_error}"
    return totals.last_error if totals else None


def run(
    ledger: Ledger,
    registry: Registry,
    config: Config,
    session_id: str | None = None,
    as_json: bool = False,
    holder: ConfigHolder | None = None,
) -> str:
    """The text (or JSON) ``lightmem2 status`` prints; ``holder``: where ``config`` came from."""
    sid = ledger.resolve(session_id)
    totals = ledger.totals(sid) if sid is not None else None
    error = last_error(totals, sid)
    modules = _modules(config)
    artifacts, stored = registry.count(), registry.size_bytes()
    if as_json:
        return to_json(
            {
                "mode": config.mode,
                "modules": modules,
                "session": totals_dict(totals) if totals else None,
                "artifacts": artifacts,
                "registryBytes": stored,
                "registryDir": str(registry.root),
                "lastError": error,
                "config": _config_dict(holder),
            }
        )
    on = "on" if modules["stabilizer"] else "off"
    lines = [
        f"lightmem2 mode: {config.mode} (stabilizer {on}, {len(modules['passes'])} reduction passes, "
        f"eviction {'on' if modules['eviction'] else 'off'})"
    ]
    if holder is not None and holder.last_error:
        lines.append(f"config file invalid: {holder.last_error}")
        lines.append(f"config in force: {holder.in_force}")
    lines += _session_lines(totals) if totals else ["session: none recorded yet"]
    lines.append(f"archived originals: {artifacts} ({size(stored)})")
    lines.append(f"last error: {error or 'none'}")
    return "\n".join(lines)


def _config_dict(holder: ConfigHolder | None) -> dict[str, Any] | None:
    if holder is None:
        return None
    return {
        "path": str(holder.path),
        "valid": holder.last_error is None,
        "error": holder.last_error,
        "inForce": holder.source,
        "inForceText": holder.in_force,
    }


def run_from_config(session_id: str | None = None, as_json: bool = False) -> str:
    """``lightmem2 status`` on the user's files: the config in force as the running plugin has it."""
    holder = ConfigHolder()  # the same rules as the plugin's: last good config, else defaults
    plugin = LightMem(config=holder.current)
    return run(Ledger.default(), plugin.registry, holder.current, session_id, as_json, holder)


def configure(parser: argparse.ArgumentParser) -> None:
    """``--session ID``, ``--json``."""
    parser.add_argument("--session", metavar="ID")
    parser.add_argument("--json", action="store_true")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 status``: the user's plugin, ledger and registry."""
    return run_from_config(args.session, args.json)


COMMAND = Command("status", __doc__, configure, main)
