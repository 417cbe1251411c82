"""Realistic ledger rows for the command tests (imported by conftest.py and the tests).

The figures follow the shape of the recorded traces: a ~2.4k-token head, one tool output per call
(150 to 2,750 tokens), outputs above the mode's trigger reduced once at ingestion, the context only
growing except at eviction batches, and the cache hitting everything up to the previous request
except where a prefix break happened.
"""

from __future__ import annotations

from lightmem_plugin.store.ledger import CallRecord, Ledger, k_cost

HEAD_TOKENS = 2400
TRIGGER = {"conservative": 1000, "normal": 550, "aggressive": 350}
CAP = {"conservative": 450, "normal": 300, "aggressive": 225}
PASS_BY_KIND = ("truncate", "html", "json", "log")


def make_session(
    session_id: str,
    mode: str,
    n_calls: int,
    provider: str = "deepseek",
    breaks: dict[int, tuple[int, int, str]] | None = None,
    evictions: dict[int, int] | None = None,
    errors: dict[int, tuple[str, str]] | None = None,
) -> list[CallRecord]:
    """One session's call records. ``provider``: deepseek/openai (cached_tokens), anthropic, none."""
    breaks, evictions, errors = breaks or {}, evictions or {}, errors or {}
    ours, vanilla, prev_ours, prev_vanilla = HEAD_TOKENS, HEAD_TOKENS, 0, 0
    saved: dict[str, int] = {}
    out: list[CallRecord] = []
    for i in range(1, n_calls + 1):
        if i > 1:
            raw = (i * 7919) % 2600 + 150
            kept = raw if raw <= TRIGGER[mode] else CAP[mode]
            name = PASS_BY_KIND[i % len(PASS_BY_KIND)]
            if kept < raw:
                saved[name] = saved.get(name, 0) + raw - kept
            ours, vanilla = ours + kept + 40, vanilla + raw + 40
        evicted = evictions.get(i, 0)
        ours -= evicted
        brk = breaks.get(i)
        hit = min(prev_ours, ours) if brk is None else 300
        if evicted:
            hit = min(hit, ours // 2)
        new = ours - hit
        write = new - 12 if provider == "anthropic" and new > 12 else 0
        miss = new - write
        real: dict[str, int | None] = {}
        if provider in ("deepseek", "openai"):
            real = {"real_cached_tokens": hit // 64 * 64, "real_input_tokens": ours + 7}
        elif provider == "anthropic":
            real = {"real_cache_read": hit, "real_cache_creation": write, "real_input_tokens": ours}
        err = errors.get(i)
        out.append(
            CallRecord(
                session_id=session_id,
                call_index=i,
                mode=mode,
                input_tokens=ours,
                baseline_tokens=vanilla,
                hit_tokens=hit,
                miss_tokens=miss,
                write_tokens=write,
                k=k_cost(hit, miss, write),
                k_baseline=k_cost(prev_vanilla, vanilla - prev_vanilla),
                saved_by_pass=dict(saved),
                evicted_tokens=evicted,
                prefix_break_at=brk[:2] if brk else None,
                break_reason=brk[2] if brk else ("eviction batch" if evicted else None),
                errors={err[0]: 1} if err else {},
                last_error=err[1] if err else None,
                **real,
            )
        )
        prev_ours, prev_vanilla = ours, vanilla
    return out


def realistic_sessions() -> list[list[CallRecord]]:
    """Three sessions: DeepSeek coding agent, Claude Code with evictions, OpenClaw without usage."""
    return [
        make_session(
            "swe-astropy-12907",
            "normal",
            36,
            "deepseek",
            breaks={12: (0, 184, "placeholder TIMESTAMP changed")},
            errors={20: ("html", "PassError: lxml could not parse the document")},
        ),
        make_session(
            "cc-7f3a2b",
            "aggressive",
            27,
            "anthropic",
            breaks={
                10: (7, 0, "eviction batch"),
                19: (15, 0, "eviction batch"),
                23: (31, 512, "pass html changed message 31"),
            },
            evictions={10: 1500, 19: 2100},
        ),
        make_session("openclaw-main", "conservative", 14, "none"),
    ]


def fill(ledger: Ledger, sessions: list[list[CallRecord]]) -> Ledger:
    for calls in sessions:
        for rec in calls:
            ledger.record_call(rec)
    return ledger


def priced(calls: list[CallRecord], model: str, output: int = 300) -> list[CallRecord]:
    """``calls`` as a ledger of version 3 has them: the model named, ``output`` tokens a call, and
    money from the provider's figures at the model's list price (saved: the K saved at its input price,
    which for every list price here is what pricing both simulated sides gives)."""
    from dataclasses import replace

    from lightmem_plugin.metering.accounting import billed
    from lightmem_plugin.metering.prices import price_for

    price = price_for(model)
    assert price is not None
    out = []
    for c in calls:
        rec = replace(
            c, model=model, output_tokens=output, saved_usd=(c.k_baseline - c.k) * price.input / 1e6
        )
        out.append(billed(rec, price))
    return out
