"""demo [--trace PATH]: replay a bundled real agent session through vanilla and every mode.

The bundled session is a real mini-swe-agent run (130 model calls of a DeepSeek model fixing a Django
bug, MIT). For each policy it prints input tokens, cache hit rate, cost K (0.1 x hit + miss) relative
to vanilla, and retention (what the agent later used that is still in context, recoverable, or lost).
Then it records the normal-mode run in the ledger and prints ``report`` for it and writes ``visual``.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from ..config import Config
from ..eviction.record_store import RecordStore
from ..measure.replay import called_tools, replay_paths, summarize
from ..measure.traces import load_trace
from ..pipeline import LightMem
from ..reduction.base import prefers_shell
from ..store.home import Home
from ..store.ledger import Ledger
from . import report, visual
from .base import Command, Outcome

POLICIES = ("vanilla", "conservative", "normal", "aggressive")
DEMO_SESSION_ID = "demo-django-14997"


def bundled_trace() -> Path:
    """Path of the bundled demo session."""
    return Path(str(resources.files("lightmem_plugin").joinpath("data", "demo_session.json.gz")))


def _table(path: Path) -> list[str]:
    # the report under the table counts the session as the ledger does, with a cache that never
    # forgets: the table uses the same model, so the two agree to the token
    rows = {p: summarize(replay_paths([path], p, clock="none")) for p in POLICIES}
    base_k = float(rows["vanilla"]["K"]) or 1.0
    base_in = int(rows["vanilla"]["input_tokens"]) or 1
    lines = [
        f"{'policy':<13} {'input tokens':>13} {'vs vanilla':>10} {'hit rate':>9} {'K':>11} {'K/vanilla':>9} "
        f"{'kept':>6} {'recov.':>6} {'lost':>5}"
    ]
    for name, s in rows.items():
        lines.append(
            f"{name:<13} {int(s['input_tokens']):>13,} {int(s['input_tokens']) / base_in:>10.3f} "
            f"{float(s['hit_rate']):>9.1%} {float(s['K']):>11,.0f} {float(s['K']) / base_k:>9.3f} "
            f"{float(s['retention_kept']):>6.1%} {float(s['retention_recoverable']):>6.1%} "
            f"{float(s['retention_lost']):>5.1%}"
        )
    return lines


def _record(path: Path, ledger: Ledger) -> None:
    """Run the session through the Python API in normal mode, as a host would, writing the ledger."""
    trace = load_trace(path)
    lm = LightMem(config=Config(mode="normal"), ledger=ledger)
    lm.records = RecordStore(Home.default().records_dir, lm.registry.redactor)
    lm.attach_search_index()
    ledger.forget(DEMO_SESSION_ID)  # a rerun of the demo replaces its rows instead of continuing them
    session = lm.session(DEMO_SESSION_ID)
    # stubs name the recovery the recorded host has, as the table's replay does
    session.prefer_shell = prefers_shell(called_tools(trace))
    for call in trace.calls:
        session.before_model_call(call.prompt, model=trace.model)
        session.after_model_call(call.output)


def run(trace: str | None = None) -> str:
    """The text ``lightmem2 demo`` prints."""
    path = Path(trace) if trace else bundled_trace()
    t = load_trace(path)
    out = [f"lightmem2 demo: {t.id} ({len(t.calls)} model calls, provider cache model {t.provider})", ""]
    out += _table(path)
    ledger = Ledger.default()
    _record(path, ledger)
    out += ["", report.run(ledger, DEMO_SESSION_ID), "", visual.run(ledger, DEMO_SESSION_ID)]
    return "\n".join(out)


def configure(parser: argparse.ArgumentParser) -> None:
    """``--trace PATH``."""
    parser.add_argument("--trace", help="a trace file to use instead of the bundled session")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 demo``."""
    return run(args.trace)


COMMAND = Command("demo", __doc__, configure, main, chat=False)
