"""report [--session ID | --all] [--json]: per-call accounting of a session, and what broke the cache.

One table row per model call: input tokens sent, what the host alone would have sent, the cache hit
rate (the provider's figure when reported, else simulated, marked ``*``), K and its vanilla estimate,
tokens evicted and where the prefix broke. Below it: what saved most (each reduction pass by name,
read off the stubs its outputs show; ``call ids``, the host's long tool call ids read in a few tokens;
``eviction``; ``stabilizer``, whose session block can cost more than it saves, shown negative: the
rows add up to the tokens not sent, see :mod:`lightmem_plugin.metering.savings`), the eviction batches, and
the "cache killers": every call whose request did not extend the previous one, with the first
differing message and character and why (a placeholder value, an eviction batch, a pass that changed
an old message). Beside K, money in USD as the provider bills it, output included: the session's
total against the same calls without lightmem2 ("-" without a price, with a line naming the
``prices`` config key that would give one). ``--json``
adds to each session's ``summary`` the keys ``status --json`` has (``costUsd``, ``costUsdWithout``,
``savedUsd``, ``savedUsdPct``, ``pricedCalls``, ``pricedRealCalls``, ``outputTokens``,
``priceHint``) and to each call ``model``, ``outputTokens``, ``realCacheWrite1h``, ``costUsd``,
``costUsdWithout``, ``savedUsd``. Without options: the session recorded last.
"""

from __future__ import annotations

import argparse
import sys

from ..config import Config, config_in_force
from ..errors import UsageError
from ..store import CallLedger, open_stores
from ..store.ledger import Ledger
from ..views.format import to_json
from ..views.report import session_data, session_text
from .base import Command, Outcome


def run(
    ledger: CallLedger, session_id: str | None = None, all_sessions: bool = False, as_json: bool = False
) -> str:
    """The text (or JSON) ``lightmem2 report`` prints."""
    if all_sessions and session_id is not None:
        raise UsageError(f'--session "{session_id}" and --all exclude each other; pass one of them')
    if all_sessions:
        ids = ledger.sessions()
    else:
        sid = ledger.resolve(session_id)
        ids = [sid] if sid is not None else []
    if as_json:
        return to_json({"sessions": [session_data(s, ledger.calls(s)) for s in ids]})
    if not ids:
        return f"no sessions recorded yet (ledger: {ledger.where})"
    return "\n\n".join(session_text(s, ledger.calls(s)) for s in ids)


def configure(parser: argparse.ArgumentParser) -> None:
    """``--session ID`` or ``--all``, ``--json``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--session", metavar="ID")
    group.add_argument("--all", action="store_true")
    parser.add_argument("--json", action="store_true")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 report`` on the user's ledger (the shared one when ``store.url`` is set)."""
    config = _config_in_force()
    if not config.store.url:
        return run(Ledger.default(), args.session, args.all, args.json)
    stores = open_stores(config)  # StoreUnavailable: one line naming the URL and the fix
    try:
        assert stores.ledger is not None
        return run(stores.ledger, args.session, args.all, args.json)
    finally:
        stores.close()


COMMAND = Command("report", __doc__, configure, main)


def _config_in_force() -> Config:
    """The config in force (the file, else the last good copy, else the defaults): a typo in the file
    never stops a read-only command; stderr says what was rejected and what runs."""
    config, rejected = config_in_force()
    if rejected:
        print(f"lightmem2: {rejected}", file=sys.stderr)
    return config
