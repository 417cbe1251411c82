"""replay PATH... [--mode M] [--provider P] [--json]: replay recorded sessions and measure their cost.

PATH is a trace file or a directory of them: the swe JSON format, an OpenClaw session file (JSON lines,
a ``session`` header first; docs/HOSTS.md), OpenClaw 2026.9.x's SQLite store
(``~/.openclaw/agents/<agent>/agent/openclaw-agent.sqlite``: every session in it) or Claude Code's own transcript
(``~/.claude/projects/<project>/<session>.jsonl``). Each call's prompt goes through the chosen mode
(or ``vanilla``: unchanged), a provider prefix-cache model, and the retention check. Prints sessions,
calls, tokens, hit rate, K (0.1 x hit + miss, cache writes 1.25x where priced), K charged (plus a
recover round trip per use that is only recoverable), retention kept / recoverable / lost by span and
by line, error lines kept, lines changed outside stubs, and the pipeline's own time per call. ``--head volatile`` is a constructed
scenario: a per-call clock and runtime stats in the system prompt. The cache expires over the
recorded pauses and reads what the recorded provider read (``--clock none``: a cache that never
forgets), and what the provider really billed the recorded session, in K and money, is printed
beside the simulated figures. The host compacts where its rule says, on the context the mode sent,
starting from the history as if the recorded host had not compacted (``--compaction recorded``: the
prompts as the host sent them); compactions and the uses they lost are counted. ``--ttl`` chooses the
cache TTL the replayed requests ask for (``stabilizer.cacheTtl``: ``host`` as recorded, ``long``
Anthropic's hour at 2x writes, ``short`` its five minutes), for every policy, vanilla too; the TTL
the cache applied is printed. ``--json`` gives the totals and, under ``per_session``, each session's
figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..config import Config
from ..errors import UsageError
from ..eviction.cold_cache import ttl_words
from ..measure.replay import Clock, Compaction, Head, replay_paths, result_dicts, summarize, trace_files
from ..metering.cachesim import PROVIDERS
from ..prefix.cache_ttl import CHOICES
from .base import Command, Outcome

POLICIES = ("vanilla", "conservative", "normal", "aggressive")


def _usd(value: object, before: str, after: str = "") -> str:
    """A money figure in the line, or nothing where the model has no price."""
    return f"{before}{value:,.2f}{after}" if isinstance(value, float | int) else ""


def _ttl_words(ttls: object) -> str:
    """The TTLs the replay's cache applied (seconds), in words: ``1-hour``, ``5-minute and 1-hour``."""
    if not isinstance(ttls, list) or not ttls:
        return "none (nothing expires)"
    return " and ".join(ttl_words(round(t)) for t in ttls)


def render(summary: dict[str, object], mode: str, head: str) -> str:
    """A short human-readable table of one replay."""
    s = summary
    scenario = " (constructed volatile-head scenario)" if head == "volatile" else ""
    return "\n".join(
        [
            f"replay: mode {mode}{scenario}",
            f"  sessions {s['sessions']}, calls {s['calls']}",
            f"  input tokens {s['input_tokens']:,}, hit rate {float(s['hit_rate']):.1%}"  # type: ignore[arg-type]
            f" (recorded {float(s['recorded_hit_rate']):.1%})",  # type: ignore[arg-type]
            f"  K {float(s['K']):,.0f}, K charged {float(s['K_charged']):,.0f}"  # type: ignore[arg-type]
            f" ({s['recovers']} recover round trips){_usd(s.get('usd'), '; $', ' at list price, output included')}",
            f"  retention kept {float(s['retention_kept']):.1%}, recoverable "  # type: ignore[arg-type]
            f"{float(s['retention_recoverable']):.1%}, lost {float(s['retention_lost']):.1%}"  # type: ignore[arg-type]
            f" of {s['retention_uses']} uses",
            f"  by line kept {float(s['retention_kept_lines']):.1%}, recoverable "  # type: ignore[arg-type]
            f"{float(s['retention_recoverable_lines']):.1%}, lost {float(s['retention_lost_lines']):.1%}",  # type: ignore[arg-type]
            f"  error lines kept {float(s['error_lines_kept']):.1%} of {s['error_line_pairs']} (line, call) pairs;"  # type: ignore[arg-type]
            f" lines changed outside stubs {s['lines_changed_outside_stubs']} of {s['lines_shown']}",
            f"  overhead per call p50 {s['overhead_ms_p50']} ms, p99 {s['overhead_ms_p99']} ms",
            *(
                [
                    f"  clock: recorded, cache TTL {_ttl_words(s.get('cache_ttl_s'))};"
                    f" {s['cold_starts']} cold starts (expired), {s['short_reads']} short "
                    f"reads; the provider billed the recorded session K {float(s['recorded_K']):,.0f}"  # type: ignore[arg-type]
                    + _usd(s.get("recorded_usd"), ", $")
                ]
                if s.get("clock") == "recorded"
                else []
            ),
            f"  host compactions {s['host_compactions']} ({s['compaction']}; recorded "
            f"{s['recorded_compactions']}), {s['compaction_output_tokens']:,} summary tokens written, "
            f"{s['lost_to_compaction']} uses lost to them",
        ]
    )


def run(
    paths: list[str],
    mode: str = "normal",
    provider: str | None = None,
    head: str = "plain",
    dump: str | None = None,
    as_json: bool = False,
    progress: bool = False,
    clock: str = "recorded",
    compaction: str = "modelled",
    ttl: str = "host",
) -> str:
    """The text (or JSON) ``lightmem2 replay`` prints."""
    if mode not in POLICIES:
        raise UsageError(f'unknown mode "{mode}"; allowed: {", ".join(POLICIES)}')
    if provider is not None and provider not in PROVIDERS:
        raise UsageError(f'unknown provider "{provider}"; allowed: {", ".join(PROVIDERS)}')
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(
            f'no such trace file or directory "{missing[0]}"; give a .json(.gz), .jsonl(.gz) or '
            "openclaw-agent.sqlite path"
        )
    if not trace_files(paths):
        raise UsageError(
            f"no trace files under {', '.join(paths)}; expected *.json, *.jsonl (optionally .gz) "
            "or an OpenClaw store with sessions"
        )
    if head not in ("plain", "volatile"):
        raise UsageError(f'unknown head scenario "{head}"; allowed: plain, volatile')
    if clock not in ("none", "recorded"):
        raise UsageError(f'unknown clock "{clock}"; allowed: none, recorded')
    if compaction not in ("modelled", "recorded"):
        raise UsageError(f'unknown compaction "{compaction}"; allowed: modelled, recorded')
    if ttl not in CHOICES:
        raise UsageError(f'unknown cache TTL choice "{ttl}"; allowed: {", ".join(CHOICES)}')
    scenario: Head = "volatile" if head == "volatile" else "plain"
    timed: Clock = "recorded" if clock == "recorded" else "none"
    compacted: Compaction = "recorded" if compaction == "recorded" else "modelled"
    results = replay_paths(
        paths,
        mode,
        provider,
        scenario,
        Path(dump) if dump else None,
        progress,
        config=Config.model_validate({"stabilizer": {"cacheTtl": ttl}}),
        clock=timed,
        compaction=compacted,
    )
    summary = summarize(results)
    summary["cache_ttl"] = ttl
    summary["cache_ttl_s"] = sorted({r.cache_ttl_s for r in results if r.cache_ttl_s is not None})
    summary["mode"] = mode
    summary["head"] = head
    summary["clock"] = clock
    summary["compaction"] = compaction
    if as_json:
        summary["per_session"] = result_dicts(results)
        return json.dumps(summary, sort_keys=True)
    return render(summary, mode, head)


def configure(parser: argparse.ArgumentParser) -> None:
    """``PATH...``, ``--mode``, ``--provider``, ``--head``, ``--dump-requests DIR``, ``--json``."""
    parser.add_argument("paths", nargs="+", metavar="PATH")
    parser.add_argument("--mode", default="normal", choices=POLICIES)
    parser.add_argument("--provider", choices=PROVIDERS)
    parser.add_argument("--head", default="plain", choices=["plain", "volatile"])
    parser.add_argument("--dump-requests", metavar="DIR")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--clock",
        default="recorded",
        choices=["none", "recorded"],
        help="recorded (default): caches expire over the recorded pauses and read what the recorded "
        "provider read; none: a cache that never forgets",
    )
    parser.add_argument(
        "--compaction",
        default="modelled",
        choices=["modelled", "recorded"],
        help="modelled (default): the history as if the host had not compacted, compacted where the "
        "host's threshold says on what the mode sent; recorded: the prompts as the host sent them",
    )
    parser.add_argument(
        "--ttl",
        default="host",
        choices=list(CHOICES),
        help="the cache TTL the requests ask for (stabilizer.cacheTtl): host (default) as recorded; "
        "long: Anthropic's one hour, writes at 2x; short: Anthropic's five minutes",
    )


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 replay``; a progress line on stderr when it is a terminal."""
    return run(
        args.paths,
        args.mode,
        args.provider,
        args.head,
        args.dump_requests,
        args.json,
        sys.stderr.isatty(),
        args.clock,
        args.compaction,
        args.ttl,
    )


COMMAND = Command("replay", __doc__, configure, main, chat=False)
