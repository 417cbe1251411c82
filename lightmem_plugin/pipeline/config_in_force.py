"""When an edit of each config key reaches a running lightmem2 (DESIGN "A session follows its config").

A user who edits ``config.json`` while a host runs expects the next call to act on it; some keys
cannot, because what they configure is opened or decided once. :data:`KEYS` says which is which for
every key of :class:`~lightmem_plugin.config.Config`, with the reason, and a test holds the code to it
(``tests/test_config_in_force.py``: a key that follows is edited mid-session and the next call must
act differently; a key the table does not name fails the test). :data:`CONFIG_IN_FORCE` is the same
by section, in words, for ``status`` readers and the docs.
"""

from __future__ import annotations

from typing import Literal

from ..config import MODES

When = Literal["each call", "new content", "each request", "new session", "process start"]
"""- ``each call``: the next model call of a running session acts on it;
- ``new content``: the next call too, but only on what arrives from then on (a reduction already
  made stays as the model saw it: redoing it would break the cached prefix, DESIGN I3);
- ``each request``: ``serve`` reads it at each HTTP request (or memory sweep);
- ``new session``: a session decides it at its first call and keeps it;
- ``process start``: read once when a process starts (``serve``, a hook, a command)."""

FOLLOWS: frozenset[When] = frozenset({"each call", "new content", "each request"})
"""The classes whose keys a running process follows (the test edits each one mid-session)."""

_TABLE: dict[str, When] = {
    "triggerChars": "new content",
    "capChars": "new content",
    "headChars": "new content",
    "tailChars": "new content",
    "passes": "new content",
    "fileViewChars": "new content",
    "keepErrorLines": "new content",
    "eviction": "each call",
    "reduceAtColdStart": "each call",
    "deferredViewChars": "each call",
}
_OPENED_ONCE = "the archive is opened once per process (its directory, size cap and sealer)"
_STORES_ONCE = "the stores are opened once per process (a pool, a schema check, a lock wait)"
_REDACTOR_ONCE = "its patterns are compiled once per process, for the archive and serve's log"

KEYS: dict[str, tuple[When, str]] = {
    "mode": ("new content", "the mode's table reduces what arrives next; eviction follows at once"),
    "stabilizer.enabled": ("each call", "the stabilizer reads it at each call"),
    "stabilizer.placeholders": ("each call", "the stabilizer rescans with the new set"),
    "stabilizer.canonicalToolOrder": ("each call", "the stabilizer reads it at each call"),
    "stabilizer.headMessages": (
        "new session",
        "the head a session keeps byte-stable is one of its decisions (another length would move "
        "the cached prefix on every call after)",
    ),
    "stabilizer.shortCallIds": ("each call", "each request decides whether its ids go out short"),
    "stabilizer.thinkingBinding": ("each call", "the proxy reads it for each Anthropic request"),
    "stabilizer.cacheTtl": ("each call", "each request's breakpoints ask the TTL in force"),
    **{
        f"reduction.{mode}.{key}": (when, f"the {mode} table as the pass context reads it")
        for mode in MODES
        for key, when in _TABLE.items()
    },
    "reduction.recoverHint": ("new content", "stubs made from then on name the new recovery"),
    "reduction.hardCapChars": ("new content", "the pass context of each new output"),
    "reduction.imageBitmapMaxBytes": ("new content", "the pass context of each new image"),
    "reduction.imageSvgMaxBytes": ("new content", "the pass context of each new image"),
    "reduction.imageMaxSidePx": ("new content", "the pass context of each new image"),
    "reduction.dedupMaxRepeats": ("new content", "the dedup index bounds the repeats that come next"),
    **{
        f"eviction.{key}": ("each call", "the evictor reads its config at each use")
        for key in (
            "batchTurns",
            "keepRecentTurns",
            "expectedRemainingCalls",
            "finishedTasks",
            "goalKeepChars",
            "argumentsOnArrival",
            "argumentMinChars",
            "minSavingRatio",
            "recordLevel",
            "cacheModel",
            "cacheTtlS",
            "compactBeforeHost",
            "compactAtTokens",
            "compactMarginTokens",
            "compactKeepTokens",
            "compactThinking",
        )
    },
    **{
        f"estimator.{key}": ("each call", "the estimator is rebuilt, the tasks it tracked kept")
        for key in ("kind", "proxyBaseUrl", "proxyApiKey", "model", "timeoutS", "retries")
    },
    "registry.dir": ("process start", _OPENED_ONCE),
    "registry.maxBytes": ("process start", _OPENED_ONCE),
    "registry.encrypt": ("process start", _OPENED_ONCE + "; the session store's cipher too"),
    "server.host": ("process start", "serve binds once; hooks and doctor read it when they start"),
    "server.port": ("process start", "serve binds once; hooks and doctor read it when they start"),
    "server.upstreams.openai": ("each request", "each request picks its upstream"),
    "server.upstreams.anthropic": ("each request", "each request picks its upstream"),
    "server.upstreams.named": ("each request", "each request picks its upstream"),
    "server.maxRequestBytes": ("each request", "each body is read against it"),
    "server.upstreamTimeoutS": ("each request", "each upstream request is sent with the timeout in force"),
    "server.commandTimeoutS": ("each request", "each sidecar command waits at most this"),
    "server.commandMaxChars": ("each request", "each sidecar command reply is cut to it"),
    "server.sessionIdleS": ("each request", "each session lookup and memory sweep reads it"),
    "server.maxSessions": ("each request", "each session lookup reads it"),
    "store.url": ("process start", _STORES_ONCE),
    "store.poolSize": ("process start", _STORES_ONCE),
    "store.connectTimeoutS": ("process start", _STORES_ONCE),
    "store.lockTimeoutS": ("process start", _STORES_ONCE),
    "store.responseTimeoutS": ("process start", _STORES_ONCE),
    "gateway.users": ("each request", "each request's token is checked against the users in force"),
    "redaction.enabled": ("process start", _REDACTOR_ONCE),
    "redaction.extraPatterns": ("process start", _REDACTOR_ONCE),
    "prices": (
        "each call",
        "each call's ledger row is priced with the table in force (rows already written keep theirs)",
    ),
}
"""Every leaf key of the config (dotted, as in config.json): when an edit reaches a running process,
and why then."""

CONFIG_IN_FORCE: dict[str, str] = {
    "mode": "each call; a reduction already made stays as the model saw it (new content only)",
    "stabilizer": "each call; headMessages only in a new session (the head it keeps stable is decided once)",
    "reduction": "each call; a reduction already made stays as the model saw it (new content only)",
    "eviction": "each call",
    "estimator": "each call (the estimator is rebuilt, the tasks it tracked kept)",
    "registry": "the next start of the process (the archive is opened once)",
    "server": "each request; host and port at the next start of serve",
    "store": "the next start of the process (the stores are opened once)",
    "gateway": "each request (serve reads its users and tokens at each request)",
    "redaction": "the next start of the process (its patterns are compiled once)",
    "prices": "each call (calls already recorded keep the money they were priced at)",
}
"""When an edit of each config section reaches a running session, in words (:data:`KEYS` per key)."""
