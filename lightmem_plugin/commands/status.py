"""status [--session ID | --all] [--json]: the mode, what is on, and how the current session is doing.

The first line names the mode, what is on and the cache TTL lightmem2 asks the provider for
(``stabilizer.cacheTtl``; ``--json``: ``cacheTtl``, with the cache writes the provider reported and
their 1-hour share, which say the TTL it applied).

The current session is the one whose call was recorded last (or ``--session ID``). It shows the
context size now against what the host alone would send, the cache hit rate (the provider's figure
when it reports one, else simulated), the cost K saved so far against the vanilla estimate, the
archived originals, and the last pass error if any; what the mode did, one line each (new output
reduced on arrival; at free breaks, the cold starts and the outputs reduced again there; in aggressive
mode, the batches paged out and the compactions before the host's limit: :mod:`~lightmem_plugin.views.mode_work`); beside K, the session's money in USD as the
provider bills it (output included) against the same calls without lightmem2 (``--json``: ``costUsd``,
``costUsdWithout``, ``savedUsd``, ``savedUsdPct``, ``pricedCalls``, ``pricedRealCalls``,
``outputTokens``, ``priceHint``; prices: :mod:`lightmem_plugin.metering.prices`, the ``prices`` config
key). Short enough for a chat bubble. When the config
file is invalid it says so first (file, key, bad value, fix) and which config is in force instead: the
last good one, or the defaults if the file was never valid. ``--all`` lists every session the ledger
holds, one line each (on a team gateway, ``store.url``: every session of the fleet, with its user).
With ``store.url`` set, status reads the shared database, not this machine's data dir.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..config import Config, ConfigHolder
from ..errors import UsageError
from ..eviction import cold_cache
from ..faults import FaultSink
from ..prefix import cache_ttl
from ..security import tenancy
from ..store import CallLedger, open_stores
from ..store.home import Home
from ..store.ledger import Ledger, SessionTotals
from ..store.registry import Registry
from ..views import mode_work
from ..views.format import money_line, pct, size, to_json, tokens, totals_dict, usd
from .base import Command, Outcome


def _modules(config: Config) -> dict[str, Any]:
    table = config.mode_table()
    return {
        "stabilizer": config.stabilizer.enabled,
        "passes": list(table.passes),
        "eviction": table.eviction,
    }


def _session_lines(t: SessionTotals, work: mode_work.Work) -> list[str]:
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
        money_line(t),
        f"evictions: {t.evictions} ({tokens(t.evicted_tokens)} tokens); prefix breaks: {t.prefix_breaks}",
        cold_cache.summary(t.cold),
        *mode_work.lines(t.mode, work),
    ]


def last_error(totals: SessionTotals | None, sid: str | None) -> str | None:
    """The newest failure: the fault sink's (this session's, else any surface's), else the ledger's."""
    if Home.default().faults_file.exists():
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
    ledger: CallLedger,
    registry: Registry,
    config: Config,
    session_id: str | None = None,
    as_json: bool = False,
    holder: ConfigHolder | None = None,
) -> str:
    """The text (or JSON) ``lightmem2 status`` prints; ``holder``: where ``config`` came from."""
    sid = ledger.resolve(session_id)
    totals = ledger.totals(sid) if sid is not None else None
    calls = ledger.calls(sid) if sid is not None else []
    work = mode_work.tally(calls) if sid is not None else mode_work.Work()
    error = last_error(totals, sid)
    modules = _modules(config)
    artifacts, stored = registry.count(), registry.size_bytes()
    written, hourly = cache_ttl.written_by(calls)
    if as_json:
        return to_json(
            {
                "mode": config.mode,
                "modules": modules,
                "session": totals_dict(totals) if totals else None,
                "modeWork": mode_work.as_dict(work) if totals else None,
                "artifacts": artifacts,
                "registryBytes": stored,
                "registryDir": str(registry.root),
                "lastError": error,
                "cacheTtl": {
                    "asked": config.stabilizer.cacheTtl,
                    "writeTokens": written,
                    "write1hTokens": hourly,
                },
                "config": _config_dict(holder),
            }
        )
    on = "on" if modules["stabilizer"] else "off"
    lines = [
        f"lightmem2 mode: {config.mode} (stabilizer {on}, {len(modules['passes'])} reduction passes, "
        f"eviction {'on' if modules['eviction'] else 'off'}, {cache_ttl.asked_words(config.stabilizer.cacheTtl)})"
    ]
    if holder is not None and holder.last_error:
        lines.append(f"config file invalid: {holder.last_error}")
        lines.append(f"config in force: {holder.in_force}")
    lines += _session_lines(totals, work) if totals else ["session: none recorded yet"]
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


def run_all(ledger: CallLedger, as_json: bool = False) -> str:
    """Every session the ledger holds (across the fleet on a shared store), in the order they started."""
    rows = []
    for stored in ledger.sessions():
        t = ledger.totals(stored)
        user = tenancy.owner_of(stored)
        shown = tenancy.own_view(user, stored) if user is not None else stored
        rows.append((user, shown or stored, t))
    if as_json:
        return to_json(
            {
                "ledger": ledger.where,
                "sessions": [
                    {**totals_dict(t), "user": u, "session": sid, "storedId": t.session_id}
                    for u, sid, t in rows
                ],
            }
        )
    if not rows:
        return f"no sessions recorded yet (ledger: {ledger.where})"
    lines = [f"{len(rows)} sessions (ledger: {ledger.where})"]
    width = max(len(sid) for _u, sid, _t in rows)
    users = max((len(u) for u, _s, _t in rows if u), default=0)
    for user, sid, t in rows:
        rate, real = t.hit_rate()
        who = f"{user or '-':<{users}}  " if users else ""
        lines.append(
            f"  {who}{sid:<{width}}  {t.calls:>5} calls  {t.mode:<12}  hit {pct(rate)}"
            f"{'' if real else ' (sim.)'}  K saved {t.k_saved_pct:.1f}%  {usd(t.cost_usd)}"
            + (f" (saved {usd(t.saved_usd)})" if t.saved_usd is not None else "")
        )
    return "\n".join(lines)


def run_from_config(session_id: str | None = None, as_json: bool = False, all_sessions: bool = False) -> str:
    """``lightmem2 status`` on the user's files (or the shared database ``store.url`` names): the
    config in force as the running plugin has it."""
    if session_id is not None and all_sessions:
        raise UsageError("--session and --all exclude each other; pass one of them")
    holder = ConfigHolder()  # the same rules as the plugin's: last good config, else defaults
    if not holder.current.store.url:
        ledger = Ledger.default()
        if all_sessions:
            return run_all(ledger, as_json)
        return run(
            ledger, Home.default().registry(holder.current), holder.current, session_id, as_json, holder
        )
    stores = open_stores(holder.current)  # StoreUnavailable: one line naming the URL and the fix
    try:
        assert stores.ledger is not None
        if all_sessions:
            return run_all(stores.ledger, as_json)
        registry = stores.registry_like(Home.default().registry(holder.current))
        return run(stores.ledger, registry, holder.current, session_id, as_json, holder)
    finally:
        stores.close()


def configure(parser: argparse.ArgumentParser) -> None:
    """``--session ID``, ``--all``, ``--json``."""
    parser.add_argument("--session", metavar="ID")
    parser.add_argument("--all", action="store_true", dest="all_sessions")
    parser.add_argument("--json", action="store_true")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 status``: the user's plugin, ledger and registry."""
    return run_from_config(args.session, args.json, args.all_sessions)


COMMAND = Command("status", __doc__, configure, main)
