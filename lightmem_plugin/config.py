"""Configuration: one pydantic model, camelCase JSON keys, loaded from ``$LIGHTMEM2_HOME/config.json``.

Why pydantic: the same model validates user files, generates ``config.schema.json`` (kept in sync by a
test) and documents every key through its field descriptions. Unknown keys are rejected
(``extra="forbid"``) so a typo never silently does nothing. A bad file raises :class:`ConfigError` with
one line naming the file, the key path, the bad value and what is allowed; :class:`ConfigHolder` keeps
the last good config in force, also across processes (a copy of the last valid file is kept beside it,
``config.last-good.json``): a file bad from the first read ever runs on the defaults, and says so.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema
from pydantic.alias_generators import to_camel

from .atomic import write_private_text
from .errors import ConfigError
from .paths import data_dir as data_dir  # re-exported: most modules import it from here
from .paths import home_dir
from .reduction import passes

Mode = Literal["conservative", "normal", "aggressive"]
MODES: tuple[Mode, ...] = ("conservative", "normal", "aggressive")


def _known_pass(name: str) -> str:
    known = [p.name for p in passes.PASSES]  # read at validation time: the registry is the truth
    if name not in known:
        raise ValueError(f"unknown pass {name!r}; use one of {', '.join(known)}")
    return name


PassName = Annotated[
    str, AfterValidator(_known_pass), WithJsonSchema({"enum": list(passes.NAMES), "type": "string"})
]
"""A reduction pass, by the name its module declares (the registry is :data:`.reduction.passes.PASSES`)."""
ALL_PASSES: tuple[str, ...] = passes.NAMES
LOSSLESS_PASSES: tuple[str, ...] = passes.LOSSLESS
PLACEHOLDERS = (
    "WORKDIR",
    "HOME",
    "TIMESTAMP",
    "CURRENT_DATE",
    "UUID",
    "AGENT_ID",
    "SESSION_ID",
    "LONG_NUMBER",
)


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, validate_assignment=True
    )


class StabilizerConfig(_Model):
    """Keeps the prompt head byte-stable (always on; the switches exist for diagnosis)."""

    enabled: bool = Field(True, description="Replace volatile values in the head with placeholders.")
    placeholders: list[str] = Field(
        default_factory=lambda: list(PLACEHOLDERS), description="Placeholders to apply, by name."
    )
    canonicalToolOrder: bool = Field(True, description="Serialise tool definitions sorted by name.")
    headMessages: int = Field(
        2, ge=0, description="Leading messages (system/developer plus the first user turn) to stabilise."
    )
    shortCallIds: bool = Field(
        True,
        description="Respell each tool call id as nine letters and digits derived from it (the pairs of "
        "calls and results unchanged); not on the Responses API, whose ids the provider keeps.",
    )
    thinkingBinding: Literal["auto", "always", "never"] = Field(
        "auto",
        description="Ask Anthropic to drop, not reject with a 400, a thinking block whose earlier history "
        "lightmem2 changed (thinking.block_binding drop_block, with its beta header), on every request "
        'of a model that binds thinking to its prefix: "auto" (Fable, Mythos; Opus, Sonnet, Haiku 5.5 '
        'and later), "always" (every Anthropic request), "never".',
    )
    cacheTtl: Literal["host", "short", "long"] = Field(
        "host",
        description='How long the provider is asked to keep the cached prefix. "host": as the host '
        'asks (nothing changed). "long": Anthropic\'s one hour (every cache_control breakpoint gets '
        'ttl "1h", so their order stays valid; writes cost 2x the input price instead of 1.25x) and '
        'OpenAI\'s prompt_cache_retention "24h" (same price). "short": every Anthropic breakpoint '
        "at the default five minutes (OpenAI unchanged). The same value on every call, so the prefix "
        "stays byte-stable. Measured (benchmarks/cache_ttl.py, money, the hour over five minutes): "
        "swe chains with 30-minute pauses between tasks 0.944x in vanilla, conservative and normal "
        "but 1.016x in aggressive (which already evicts at the pauses' cold starts); the same chains "
        "without pauses 1.030x-1.087x; the dev Claude Code sessions 1.040x-1.045x. So host by "
        "default: long pays only where pauses past five minutes are the rule.",
    )


FILE_VIEW_CHARS = 24_000
"""Every mode keeps a file view (and search results) whole up to this many chars (~600 lines).

Why one figure for all modes, and this one: a view is what the agent asked to see, and it acts on
lines from all over it. On the dev traces, Claude Code's later uses of ``Read`` lines were its
``Write`` and ``Edit`` calls copying them (1,512 of 1,513); at 8,000 chars (normal) 40% of those uses
were no longer in view. Measured (claude-code normal, kept lines / K charged x vanilla): 8,000 chars
61.5% / 0.830; 16,000 76.5% / 0.856; 24,000 83.1% / 0.885; 48,000 84.1% / 0.903. On swe, 24,000 and
48,000 give the same figures (kept lines 96.7% -> 98.6%, K charged 0.932 -> 0.936). Aggressive gains
most: its eviction pages a read out once an edit or a re-read supersedes it (claude-code kept lines
54.1% -> 79.2% for K charged 0.768 -> 0.778). Longer views keep their outline, head and tail."""


DEFERRED_VIEW_CHARS = 300
"""What an output kept whole on arrival keeps when it is reduced again at a cold start
(:mod:`~lightmem_plugin.eviction.deferred`): its outline, head, tail and error lines in about this many
chars, the rest behind stubs naming the archived original (line ranges). Measured on the continuous
chains with 30-minute pauses on Anthropic's cache, normal's money / vanilla: 0.826 at 800 chars,
0.810 at 500, 0.798 at 300, with the running task's kept lines 99.98% and nothing lost at each; only
a finished task's outputs and stale ones are reduced again (never the newest failing run)."""


class ModeTable(_Model):
    """What reduction does in one mode (DESIGN section 4)."""

    triggerChars: int = Field(..., ge=0, description="Tool outputs longer than this are reduced.")
    capChars: int = Field(..., ge=200, description="Target size of a reduced tool output.")
    headChars: int = Field(..., ge=0, description="Characters kept verbatim before a truncation stub.")
    tailChars: int = Field(..., ge=0, description="Characters kept verbatim after a truncation stub.")
    passes: list[PassName] = Field(..., description="Reduction passes enabled in this mode.")
    eviction: bool = Field(False, description="Page out finished tasks in batches.")
    fileViewChars: int = Field(
        FILE_VIEW_CHARS,
        ge=0,
        description="File views, search results, diffs, listings, reports (a subagent's, a web page's) and a script's prints up to this stay whole.",
    )
    keepErrorLines: bool = Field(True, description="Never cut error lines, traceback frames or failures.")
    reduceAtColdStart: bool = Field(
        False,
        description="At a call whose provider cache is cold (a pause past its TTL), reduce again the "
        "outputs kept whole that are no longer needed (a finished task's, a stale view or run), the "
        "break being free there.",
    )
    deferredViewChars: int = Field(
        DEFERRED_VIEW_CHARS,
        ge=0,
        description="What an output reduced again at a cold start keeps in place of fileViewChars.",
    )


class ConservativeTable(ModeTable):
    """Conservative: the lossless passes only, a high trigger, no eviction."""

    triggerChars: int = Field(4000, ge=0, description="Tool outputs longer than this are reduced.")
    capChars: int = Field(1800, ge=200, description="Target size of a reduced tool output.")
    headChars: int = Field(1000, ge=0, description="Characters kept verbatim before a truncation stub.")
    tailChars: int = Field(600, ge=0, description="Characters kept verbatim after a truncation stub.")
    passes: list[PassName] = Field(default_factory=lambda: list(LOSSLESS_PASSES), description="Passes on.")
    eviction: bool = Field(False, description="Page out finished tasks in batches.")


class NormalTable(ModeTable):
    """Normal: every reduction pass, no eviction."""

    triggerChars: int = Field(2200, ge=0, description="Tool outputs longer than this are reduced.")
    capChars: int = Field(1200, ge=200, description="Target size of a reduced tool output.")
    headChars: int = Field(600, ge=0, description="Characters kept verbatim before a truncation stub.")
    tailChars: int = Field(400, ge=0, description="Characters kept verbatim after a truncation stub.")
    passes: list[PassName] = Field(default_factory=lambda: list(ALL_PASSES), description="Passes on.")
    eviction: bool = Field(False, description="Page out finished tasks in batches.")
    reduceAtColdStart: bool = Field(
        True, description="Reduce again, at a cold start, the outputs kept whole that are no longer needed."
    )


class AggressiveTable(ModeTable):
    """Aggressive: every reduction pass, tighter caps, cost-aware eviction."""

    triggerChars: int = Field(1400, ge=0, description="Tool outputs longer than this are reduced.")
    capChars: int = Field(900, ge=200, description="Target size of a reduced tool output.")
    headChars: int = Field(450, ge=0, description="Characters kept verbatim before a truncation stub.")
    tailChars: int = Field(300, ge=0, description="Characters kept verbatim after a truncation stub.")
    passes: list[PassName] = Field(default_factory=lambda: list(ALL_PASSES), description="Passes on.")
    eviction: bool = Field(True, description="Page out finished tasks in batches.")
    reduceAtColdStart: bool = Field(
        True, description="Reduce again, at a cold start, the outputs kept whole that are no longer needed."
    )


class ReductionConfig(_Model):
    """Tool-output reduction at ingestion; each mode has its own table, every figure a key."""

    conservative: ConservativeTable = Field(default_factory=ConservativeTable)
    normal: NormalTable = Field(default_factory=NormalTable)
    aggressive: AggressiveTable = Field(default_factory=AggressiveTable)
    recoverHint: Literal["auto", "tool", "shell"] = Field(
        "auto",
        description='How stubs say to recover: "tool" (lightmem2_recover), "shell" (lightmem2 recover KEY), '
        'or "auto": the tool when the request offers it, the shell command when it offers only a shell.',
    )
    hardCapChars: int = Field(50_000, ge=1000, description="No tool output enters the context above this.")
    imageBitmapMaxBytes: int = Field(100 * 1024, ge=1024, description="Downsample bitmaps above this size.")
    imageSvgMaxBytes: int = Field(50 * 1024, ge=1024, description="Rasterise or stub SVGs above this size.")
    imageMaxSidePx: int = Field(1024, ge=16, description="Longest side of a downsampled image.")
    dedupMaxRepeats: int = Field(5, ge=1, description="Identical outputs after the first become references.")

    def table(self, mode: Mode) -> ModeTable:
        """The table for ``mode``."""
        result: ModeTable = getattr(self, mode)
        return result


class EvictionConfig(_Model):
    """Cost-aware paging out of finished tasks (aggressive mode)."""

    batchTurns: int = Field(3, ge=1, description="Evict at most once every this many model calls.")
    keepRecentTurns: int = Field(6, ge=0, description="Never evict anything within the last N calls.")
    expectedRemainingCalls: int = Field(
        20,
        ge=1,
        description="Typical task length (calls) assumed until the session has finished a task; after "
        "that the horizon comes from the session's own tasks (eviction.horizon).",
    )
    finishedTasks: bool = Field(
        True,
        description="A new user goal closes the task before it; its work (tool outputs and assistant "
        "turns) leaves as one archived summary at the first batch where that pays.",
    )
    goalKeepChars: int = Field(
        600,
        ge=0,
        description="A finished task's request longer than this leaves with the task: its first lines "
        "(up to this many characters) stay, the rest is archived with the task's work (measured on "
        "continuous sessions: the requests of finished tasks were ~24% of what a late call sends). "
        "0 keeps every request whole.",
    )
    argumentsOnArrival: bool = Field(
        False,
        description="Archive a long tool-call argument (a heredoc, a script) as it first comes back "
        "with its result: no cache holds it yet, so it costs no break; the first line stays. Off by "
        "default: agents reuse lines of their own scripts (measured on swe: K -11%, but only 72% of "
        "those reuses still in context).",
    )
    argumentMinChars: int = Field(
        1000,
        ge=100,
        description="Executed tool-call arguments at least this long (an inline script already run, a "
        "file write later rewritten) are paged out in batches when that pays.",
    )
    minSavingRatio: float = Field(
        2.0,
        ge=0,
        description="Evict only if saving >= ratio x re-miss cost (2: the remaining calls are a guess; a "
        "session that ends sooner must not turn a batch into a loss).",
    )
    recordLevel: Literal["critical", "standard", "full"] = Field(
        "standard", description="Session record budget rendered in the eviction block."
    )
    cacheModel: Literal["auto", "prefix", "anthropic"] = Field(
        "auto",
        description='How the provider caches, for the price of a batch\'s break: "prefix" (OpenAI, '
        'DeepSeek, vLLM: what follows the break is re-read once as misses), "anthropic" (breakpoints: '
        'every message after the system prompt is written again at 1.25x), or "auto": from the wire '
        "API the request came in on (prefix for the Python API).",
    )
    cacheTtlS: float | None = Field(
        None,
        ge=0,
        description="Seconds the provider keeps a cached prefix after its last use, for telling a cold "
        "call (a pause longer than this: the whole prompt is written again, so a batch's break there "
        "is free). null: from the request (Anthropic's cache_control ttl \"1h\", OpenAI's "
        'prompt_cache_retention "24h"), else the provider\'s default (Anthropic 300, OpenAI 600, '
        "others none known).",
    )
    compactBeforeHost: bool = Field(
        True,
        description="When the context nears the host's own compaction threshold, page out at the next "
        "batch every tool output and long argument but the newest compactKeepTokens of history (stubs "
        "whose key recovers each byte-exact, the session record on the first; with compactThinking the "
        "answers it left behind go without their thinking), so the host never runs its lossy "
        "summarising compaction. Aggressive mode only. Replayed on the three long Claude Code traces: "
        "no host compaction and no use lost (70 lost without it), $29.11 against $31.67 without it "
        "and $33.53 for vanilla.",
    )
    compactAtTokens: int | None = Field(
        None,
        ge=1000,
        description="Context tokens (as the provider counts them) past which the host compacts. null: "
        "what the host tells for the request (OpenClaw's token budget for the messages: its model's "
        "window less its reserve and the prompt), else the host's own rule for a 200k window (Claude "
        "Code 167,000: the window less its output reserve and summary buffer; OpenClaw 180,000: the "
        "window less its 20,000 reserve; an unknown host: the Claude Code figure).",
    )
    compactMarginTokens: int = Field(
        67_000,
        ge=0,
        description="Compact at the first batch whose context is within this many tokens of "
        "compactAtTokens (Claude Code: from 100,000 on). The host looks before each call, so the margin "
        "must hold what a few calls add (24,000-32,000 provider tokens at most over 3 calls on the long "
        "Claude Code traces); beyond that, compacting earlier reads a smaller context on more calls, and "
        "the reads are most of a long session's bill. Measured on the dev Claude Code traces with "
        "compactKeepTokens 6,000 (benchmarks/compaction_frontier.py; money, vanilla $34.41): 57,000 "
        "$29.43, 67,000 $27.55, 77,000 $28.18, 87,000 $28.35; no use lost and no host compaction at any "
        "of them. Left at its default, at most 41% of the threshold (a small window's host would "
        "otherwise be within it from the start).",
    )
    compactThinking: bool = Field(
        True,
        description="A compaction also leaves out the thinking of the answers it left behind (the "
        "answers it keeps, the last one among them, keep theirs; the API requires the last only): "
        "Claude Code sends every earlier answer's thinking back and the provider counts it as input, "
        "so without this the context came back to the threshold within ~24 calls.",
    )
    compactKeepTokens: int = Field(
        6_000,
        ge=0,
        description="Tokens of the newest history (as lightmem2 counts them) a compaction keeps whole, "
        "and at least the newest tool output (unless it alone is a quarter of the threshold): the "
        "running task's last calls; what the user wrote and the assistant's own words stay anyway, and "
        "everything older is a stub away. Measured on the dev Claude Code traces with "
        "compactMarginTokens 67,000 (benchmarks/compaction_frontier.py; money, later uses kept whole): "
        "4,000 $27.11 (88.1%), 6,000 $27.55 (89.2%), 12,000 $29.09 (91.7%); no use lost at any of them. "
        "Left at its default, at most 25% of the threshold (on a small window it would otherwise be the "
        "whole history).",
    )


class EstimatorConfig(_Model):
    """Which estimator proposes task updates; the LLM one is opt-in."""

    kind: Literal["heuristic", "llm"] = Field("heuristic", description="Estimator to use.")
    proxyBaseUrl: str | None = Field(None, description="OpenAI-compatible base URL (…/v1).")
    proxyApiKey: str | None = Field(None, description="API key for proxyBaseUrl; never logged.")
    model: str | None = Field(None, description="Model name sent to the estimator endpoint.")
    timeoutS: float = Field(20.0, gt=0, description="Per-request timeout in seconds.")
    retries: int = Field(2, ge=0, description="Retries on transport errors and 5xx.")


class RegistryConfig(_Model):
    """Where archived originals live and how big the store may grow."""

    dir: str | None = Field(None, description="Artifact directory (default: <data dir>/artifacts).")
    maxBytes: int = Field(1 << 30, ge=1 << 20, description="Garbage-collect least recently used above this.")
    encrypt: bool = Field(
        True,
        description="Store archived originals exactly and encrypted (AES-GCM, key in archive.key of the "
        "lightmem2 home or $LIGHTMEM2_ARCHIVE_KEY), so recover is byte-exact, and seal the session state "
        "(what the model was shown) and records with the same key; off: redact them instead.",
    )


class UpstreamsConfig(_Model):
    """Where the proxy forwards, by route: SDK base-URL conventions (OpenAI with /v1, Anthropic without)."""

    openai: str = Field("https://api.openai.com/v1", description="Upstream for /v1/responses and chat.")
    anthropic: str = Field("https://api.anthropic.com", description="Upstream for /v1/messages.")
    named: dict[str, str] = Field(
        default_factory=dict, description="More OpenAI-compatible upstreams, chosen by /u/<name>/v1/..."
    )


class ServerConfig(_Model):
    """``lightmem2 serve``: the loopback proxy and sidecar."""

    host: str = Field("127.0.0.1", description="Bind address; non-loopback needs --allow-remote.")
    port: int = Field(8787, ge=1, le=65535, description="TCP port.")
    upstreams: UpstreamsConfig = Field(default_factory=UpstreamsConfig)
    maxRequestBytes: int = Field(32 << 20, ge=1 << 16, description="Larger request bodies get a 413.")
    upstreamTimeoutS: float = Field(600.0, gt=0, description="Timeout for one upstream request.")
    commandTimeoutS: float = Field(
        30.0, gt=0, description="A /sidecar/command running longer gets a 504 (it runs in a thread)."
    )
    commandMaxChars: int = Field(
        200_000, ge=1000, description="A /sidecar/command reply is cut to this many characters."
    )
    sessionIdleS: float = Field(
        900.0,
        gt=0,
        description="A session unused this long leaves memory (its decisions are persisted; the next "
        "request reloads them and sends the same bytes). Only with a session store.",
    )
    maxSessions: int = Field(
        128,
        ge=1,
        description="Sessions a process keeps in memory (least recently used leave first; the next "
        "request of one reloads it from the session store: the same bytes, one slower call). Keep it "
        "above the number of sessions your hosts run at once; each held session costs 1-2 MB.",
    )


_URL_PASSWORD = re.compile(r"(://[^:/@\"]*):[^@/\"]*@")
"""The password of a URL (``scheme://user:PASSWORD@host``): never repeated in a message."""


def _store_url(url: str | None) -> str | None:
    if not url:
        return None
    if not re.match(r"^postgres(ql)?://", url):
        shown = _URL_PASSWORD.sub(r"\1:***@", url)[:80]
        raise ValueError(
            f"store.url {shown!r} is not a PostgreSQL URL; use postgresql://USER@HOST:PORT/DB "
            "(the password from ~/.pgpass or $PGPASSWORD), or remove the key for the embedded store"
        )
    return url


class StoreConfig(_Model):
    """Where session state and the ledger live: the data dir (default), or a database a team shares."""

    url: Annotated[str | None, AfterValidator(_store_url)] = Field(
        None,
        description="A PostgreSQL URL (postgresql://user@host:5432/db) shared by every `lightmem2 serve` "
        "of a team gateway: any process then serves any session with the same bytes. Unset: SQLite "
        "files in the data dir. Needs the 'team' extra (psycopg).",
    )
    poolSize: int = Field(
        20, ge=2, le=1000, description="Database connections per process (one per session in flight)."
    )
    connectTimeoutS: float = Field(10.0, gt=0, description="Give up connecting to store.url after this.")
    lockTimeoutS: float = Field(
        60.0, gt=0, description="Wait at most this for a session another process is serving."
    )
    responseTimeoutS: float = Field(
        1.0,
        ge=0.1,
        le=60,
        description="A database wait with no answer from PostgreSQL for this long makes lightmem2 ask the "
        "server directly (SELECT 1 on a connection of its own, given half as long). A server that does not "
        "answer that either (stopped, or the network to it cut) counts as down: each call passes through "
        "unreduced at once and /healthz says degraded, until it answers again (asked every 0.5 s). A slow "
        "query on a server that answers is never cut.",
    )


USER_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def check_user_name(name: str) -> str:
    if not USER_NAME_RE.match(name):
        raise ValueError(
            f"gateway user name {name[:80]!r} is not allowed; use 1-64 of a-z 0-9 . _ - (starting with a "
            "letter or digit), e.g. alice"
        )
    return name


def _token_sha256(digest: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ValueError(
            f"tokenSha256 {digest[:12]!r}... is not a SHA-256 hex digest (64 lowercase hex chars); "
            "create users with `lightmem2 gateway add-user NAME`, which stores the digest"
        )
    return digest


class GatewayUser(_Model):
    """One user of a team gateway: a name and the SHA-256 of their token (the token is never stored)."""

    name: Annotated[str, AfterValidator(check_user_name)] = Field(description="Who this is (a-z 0-9 . _ -).")
    tokenSha256: Annotated[str, AfterValidator(_token_sha256)] = Field(
        description="Hex SHA-256 of the user's token (`lightmem2 gateway add-user NAME` prints the token "
        "once and stores this)."
    )


def _unique_users(users: list[GatewayUser]) -> list[GatewayUser]:
    names = [u.name for u in users]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"gateway.users names {', '.join(dup)} more than once; keep one entry per user")
    return users


class GatewayConfig(_Model):
    """Who may use a team gateway (``serve --allow-remote``): one token per user, each user's sessions,
    archives, search and ledger rows their own."""

    users: Annotated[list[GatewayUser], AfterValidator(_unique_users)] = Field(
        default_factory=list,
        description="Users and their token digests. Non-empty: every /v1 request needs its user's "
        "token in the x-lightmem2-token header (401 otherwise). Needed for --allow-remote.",
    )


class RedactionConfig(_Model):
    """Credential patterns redacted from everything persisted."""

    enabled: bool = Field(
        True,
        description="Redact known credential patterns in what lightmem2 derives for reading (search index, records, ledger, logs), and in archives when registry.encrypt is off.",
    )
    extraPatterns: list[str] = Field(default_factory=list, description="More regexes to redact.")


def _price_prefix(prefix: str) -> str:
    if not prefix.strip() or prefix != prefix.strip():
        raise ValueError(
            f"prices key {prefix!r} is not a model name prefix; use the model name as the provider "
            'spells it, or its start (e.g. "claude-sonnet-4", "gpt-5-mini", "deepseek-chat")'
        )
    return prefix


class ModelPrice(_Model):
    """One model's price in USD per million tokens, as the provider bills it (its list price, or
    what your contract says)."""

    input: float = Field(..., ge=0, description="Uncached input tokens (a cache miss).")
    cacheRead: float = Field(..., ge=0, description="Input tokens read from the prompt cache (a hit).")
    cacheWrite5m: float | None = Field(
        None,
        ge=0,
        alias="cacheWrite5m",  # the generated alias would be "cachewrite5M" (digits end a word)
        description="Input tokens written to the cache for 5 minutes (Anthropic); unset: the input "
        "price (providers that bill a write as a plain miss).",
    )
    cacheWrite1h: float | None = Field(
        None,
        ge=0,
        alias="cacheWrite1h",
        description="Input tokens written to the cache for 1 hour (Anthropic); unset: cacheWrite5m.",
    )
    output: float = Field(..., ge=0, description="Output tokens (thinking included).")


PriceKey = Annotated[str, AfterValidator(_price_prefix)]


class Config(_Model):
    """The whole lightmem2 configuration."""

    mode: Mode = Field("normal", description="conservative | normal | aggressive")
    stabilizer: StabilizerConfig = Field(default_factory=StabilizerConfig)
    reduction: ReductionConfig = Field(default_factory=ReductionConfig)
    eviction: EvictionConfig = Field(default_factory=EvictionConfig)
    estimator: EstimatorConfig = Field(default_factory=EstimatorConfig)
    registry: RegistryConfig = Field(default_factory=RegistryConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    redaction: RedactionConfig = Field(default_factory=RedactionConfig)
    prices: dict[PriceKey, ModelPrice] = Field(
        default_factory=dict,
        description="Model name prefix -> its price in USD per million tokens ({input, cacheRead, "
        "cacheWrite5m, cacheWrite1h, output}), for the money status, report and visual show beside K. "
        "An entry here wins over the built-in list prices (lightmem_plugin/metering/prices.py); the "
        'longest matching prefix wins ("gpt-5" matches gpt-5 and gpt-5-2025-08-07, not gpt-5.5). '
        "A model neither names is shown without money.",
    )

    def mode_table(self) -> ModeTable:
        """Reduction table of the current mode."""
        return self.reduction.table(self.mode)


def config_path() -> Path:
    """Where the config file lives."""
    return home_dir() / "config.json"


def last_good_path(path: Path | None = None) -> Path:
    """Where the last valid config file is copied (beside it), for a process that starts on a bad file."""
    return (path or config_path()).with_name("config.last-good.json")


def _key_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key path in ``model``."""
    found = []
    for key, field in model.model_fields.items():
        found.append(f"{prefix}{key}")
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            found += _key_paths(sub, f"{prefix}{key}.")
    return found


def _where_key_is(name: str) -> list[str]:
    """The key paths an unknown key ``name`` was probably meant as (same name elsewhere, or a near one)."""
    paths = _key_paths(Config)
    close = difflib.get_close_matches(name, {p.rsplit(".", 1)[-1] for p in paths}, n=2, cutoff=0.8)
    return [p for p in paths if p.rsplit(".", 1)[-1] in close][:3]


def _describe(err: ValidationError, path: Path) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(root)"
    bad = _URL_PASSWORD.sub(r"\1:***@", json.dumps(first.get("input"), default=str))
    if len(bad) > 80:
        bad = bad[:77] + "..."
    if first["type"] == "extra_forbidden":
        places = _where_key_is(str(first["loc"][-1]))
        where = f" (did you mean {' or '.join(places)}?)" if places else ""
        return f"{path}: {loc} = {bad} is not a config key{where}; move it or remove it"
    allowed = ""
    ctx = first.get("ctx") or {}
    msg = first["msg"]
    if "expected" in ctx and str(ctx["expected"]) not in msg:
        allowed = f"; allowed: {ctx['expected']}"
    return f"{path}: {loc} = {bad} is invalid: {msg}{allowed}; fix the value or remove the key"


def parse_config(data: Any, path: Path) -> Config:
    """Validate ``data`` as a config, raising one-line :class:`ConfigError` naming ``path``."""
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_describe(err, path)) from None


def _read(path: Path) -> tuple[Config, str | None]:
    """(the config, the file's text); text None when there is no file (defaults)."""
    if not path.exists():
        return Config(), None
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read config: {err}; check the file's permissions") from None
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"{path}: not valid JSON at line {err.lineno} column {err.colno}: {err.msg}; fix the syntax"
        ) from None
    return parse_config(data, path), text


def load_config(path: Path | None = None) -> Config:
    """Load the config file (defaults when it does not exist)."""
    return _read(path or config_path())[0]


Source = Literal["file", "last-good", "defaults"]


class ConfigHolder:
    """Keeps the last good config in force when the file on disk turns bad.

    In this process: the previous good read. In a new process (a hook, ``status``, a restarted
    ``serve``) whose first read is bad: the copy of the last valid file (:func:`last_good_path`); with
    none, the defaults. :attr:`source` and :attr:`in_force` say which one runs.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or config_path()
        self.current = Config()
        self.last_error: str | None = None
        self.source: Source = "defaults"
        self._saved_at: float | None = None
        self._good = False
        self._mtime: float | None = None
        self.reload()

    @property
    def in_force(self) -> str:
        """Which config runs, in words (for ``status``)."""
        if self.source == "file":
            return f"{self.path}" if self.path.exists() else "defaults (no config file)"
        if self.source == "last-good":
            when = datetime.fromtimestamp(self._saved_at or 0).strftime("%Y-%m-%d %H:%M")
            return f"last good (mode {self.current.mode}, valid as of {when})"
        return "defaults (the file has not been valid since lightmem2 last read it)"

    def reload(self) -> Config:
        """Re-read the file if it changed; on error keep the last good config and remember why."""
        try:
            mtime = self.path.stat().st_mtime if self.path.exists() else None
        except OSError:
            mtime = None
        if mtime == self._mtime and self._mtime is not None:
            return self.current
        try:
            self.current, text = _read(self.path)
        except ConfigError as err:
            self.last_error = str(err)
            if not self._good:  # first read of this process: the last good file, else the defaults
                self._adopt_last_good()
        else:
            self.last_error = None
            self.source = "file"
            self._good = True
            self._remember(text)
        self._mtime = mtime
        return self.current

    def _adopt_last_good(self) -> None:
        copy = last_good_path(self.path)
        try:
            config = _read(copy)[0] if copy.exists() else None
            saved_at = copy.stat().st_mtime if config is not None else None
        except (ConfigError, OSError):
            config = None
        if config is not None:
            self.current, self.source, self._saved_at, self._good = config, "last-good", saved_at, True

    def _remember(self, text: str | None) -> None:
        """Keep a copy of the valid file (none when the file is absent: then the defaults are good)."""
        copy = last_good_path(self.path)
        with contextlib.suppress(OSError):  # best effort: a read-only home keeps the in-process memory
            if text is None:
                copy.unlink(missing_ok=True)
            elif not copy.exists() or copy.read_text(encoding="utf-8") != text:
                _atomic_write(copy, text)


def config_in_force(path: Path | None = None) -> tuple[Config, str | None]:
    """(the config a process starting now runs on, None or why the file was rejected and what runs).

    The one rule for every short-lived process (hooks, ``serve`` at start, ``doctor``): a typo in the
    file never stops lightmem2 or the host wired to it. The valid file; else the copy of the last valid
    one; else the defaults (:class:`ConfigHolder`). Measured before: with ``"mode": "turbo"`` the hooks
    raised (``/lightmem2 status`` then went to the model) and ``serve`` refused to start (exit 2), so
    ``claude -p`` hung with no request sent.
    """
    holder = ConfigHolder(path)
    why = f"{holder.last_error}; in force: {holder.in_force}" if holder.last_error else None
    return holder.current, why


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` atomically, 0600 in a 0700 dir (the file may hold an API key): :mod:`.atomic`."""
    write_private_text(path, text)


def _indent_of(text: str) -> int | str | None:
    """The indent a JSON text uses: spaces (a number), a tab, or None for one line."""
    m = re.search(r"\n([ \t]+)\S", text)
    if m is None:
        return None if text.strip() and "\n" not in text.strip() else 2
    lead = m.group(1)
    return "\t" if lead.startswith("\t") else len(lead)


def dump_like(data: Any, before: str | None) -> str:
    """``data`` as JSON text in the format of ``before`` (its indent; non-ASCII kept or escaped as it was).

    The one writer of the config file (``mode``, the installers' upstream edit): a user's file keeps its
    look. New files get 2 spaces.
    """
    indent = _indent_of(before) if before else 2
    ascii_only = bool(before) and bool(re.search(r"\\u[0-9a-fA-F]{4}", before or ""))
    return json.dumps(data, indent=indent, ensure_ascii=ascii_only) + "\n"


def write_config_data(data: dict[str, Any], path: Path | None = None) -> str:
    """Write config ``data`` (the user's keys, as parsed) in the file's own format; returns the text."""
    path = path or config_path()
    try:
        before: str | None = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        before = None
    text = dump_like(data, before)
    _atomic_write(path, text)
    return text


def _merged(base: dict[str, Any], keys: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for name, value in keys.items():
        old = out.get(name)
        out[name] = _merged(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out


def merge_config_keys(keys: dict[str, Any], path: Path | None = None) -> list[str]:
    """Set ``keys`` (a partial config, nested objects merged key by key) in the config file.

    What a host's own settings file holds for lightmem2 (OpenClaw's ``plugins.entries.lightmem2.config``)
    goes through here, so the CLI, ``doctor``, the hooks and ``serve`` all read one file. Every other
    key of the file stays as the user wrote it; nothing is written when the keys already hold these
    values. Returns the top-level keys that changed. ConfigError (file untouched) when the file is
    invalid already or the merge would make it invalid.
    """
    path = path or config_path()
    data: dict[str, Any] = {}
    if path.exists():
        load_config(path)  # refuse to rewrite a file that is already invalid
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: top level must be a JSON object; fix the file")
    merged = _merged(data, keys)
    changed = sorted(name for name in merged if merged.get(name) != data.get(name))
    if changed:
        parse_config(merged, path)
        write_config_data(merged, path)
    return changed


def save_config(config: Config, path: Path | None = None) -> Path:
    """Write ``config`` (only non-default keys are kept by callers that merge; here: all)."""
    path = path or config_path()
    write_config_data(config.model_dump(by_alias=True), path)
    return path


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the config file, as written to ``config.schema.json``."""
    schema = Config.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "lightmem2 config"
    return schema


def schema_text() -> str:
    """Canonical text of ``config.schema.json``."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
