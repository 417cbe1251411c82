"""doctor [--json]: check the installation, one ``[pass]``, ``[warn]`` or ``[fail]`` line per check.

Checks: the config file against the schema; the artifact registry directory (writable, private 0700);
the shared database when ``store.url`` names one (reachable, schema version, its search index in step
with its artifacts, room for the pool);
the shipped tokenizer file (present, sha256 verified); the ``lightmem2 serve`` proxy (not running is
only a warning); each host agent (OpenClaw, Claude Code, Codex: installed, version supported,
lightmem2 wired in); the LLM estimator endpoint when ``estimator.kind`` is ``llm``; errors that any
surface (proxy, sidecar, hooks, MCP tools, the Python API) reported into the fault sink, by surface and
step (the ledger's per-call counts when no sink exists yet). Every failure comes with a fix. Exit code 1
when any check fails.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..config import Config, config_in_force, config_path, load_config
from ..errors import ConfigError, LightMemError, StoreError, TokenizerError
from ..faults import Fault, FaultSink
from ..store import home, open_stores
from ..store.home import Home
from ..store.ledger import Ledger
from ..store.sealing import KEY_ENV, key_path, load_key
from ..store.search_index import SearchIndex
from ..store.session_state import StateStore
from ..store.sqlite_store import move_aside
from ..tokens import RANKS_SHA256, ranks_bytes
from ..views.format import to_json
from ._disk import disk_failure
from ._hosts import HOSTS, Check, Probe, check_host
from .base import Command, Outcome
from .search import fix_index

RECENT_CALLS = 200


def check_config(path: Path) -> tuple[Check, Config]:
    """The config file validates. When it does not, the other checks look at the config every process
    runs on meanwhile (the last good one, else the defaults: :func:`~..config.config_in_force`), so
    ``doctor`` probes the port the proxy really listens on (measured before: 8787, the default)."""
    try:
        config = load_config(path)
    except ConfigError as err:
        in_force, why = config_in_force(path)
        running = (why or "").rpartition("; in force: ")[2] or "defaults"
        return Check(
            "config",
            "fail",
            f"{err}; lightmem2 runs on the {running} meanwhile",
            f"edit {path}, then run `lightmem2 config validate`",
        ), in_force
    where = f"{path} is valid" if path.exists() else f"{path} absent, defaults in force"
    return Check("config", "pass", f"{where} (mode {config.mode})"), config


def check_registry(config: Config) -> Check:
    """The registry dir is (or can be made) writable and is private."""
    root = Home.default().artifacts_dir(config)
    if not root.exists():
        parent = next((p for p in root.parents if p.exists()), None)
        if parent is not None and os.access(parent, os.W_OK | os.X_OK):
            return Check("registry", "pass", f"{root} absent, created 0700 on first use")
        return Check(
            "registry", "fail", f"{root} cannot be created ({parent} not writable)", "set registry.dir"
        )
    if not root.is_dir():
        return Check("registry", "fail", f"{root} is not a directory", "remove it or set registry.dir")
    try:
        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as err:
        return Check("registry", "fail", f"{root} not writable: {err.strerror}", f"chown/chmod u+rwx {root}")
    mode = stat.S_IMODE(root.stat().st_mode)
    if mode & 0o077:
        return Check(
            "registry", "fail", f"{root} is {mode:04o}, readable by others", f"chmod 700 {root} (DESIGN I6)"
        )
    return Check("registry", "pass", f"{root} writable, {mode:04o}")


def check_archive_key(config: Config) -> Check:
    """Archives are sealed with a usable key (else they fall back to redaction, not byte-exact)."""
    if not config.registry.encrypt:
        return Check(
            "archive key",
            "warn",
            "registry.encrypt is off: archives are redacted, so recover is not byte-exact",
            "lightmem2 config set registry.encrypt true",
        )
    if os.environ.get(KEY_ENV):
        where = f"${KEY_ENV}"
    else:
        path = key_path()
        if not path.exists():
            return Check("archive key", "pass", f"{path} absent, created 0600 on first archive")
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            return Check(
                "archive key", "fail", f"{path} is {mode:04o}, readable by others", f"chmod 600 {path}"
            )
        where = str(path)
    try:
        load_key()
    except LightMemError as err:
        return Check("archive key", "fail", str(err).split("; ")[0], f"restore the key or set ${KEY_ENV}")
    return Check("archive key", "pass", f"archives sealed (AES-GCM) with the key in {where}")


def check_database(config: Config) -> Check:
    """``store.url``'s database (only when one is set): reachable, schema version, room for the pool."""

    try:
        stores = open_stores(config)
    except StoreError as err:
        text = str(err)
        detail, _, fix = text.partition("; ")
        return Check("database", "fail", detail, fix or "check store.url")
    try:
        backend = stores.states.backend  # type: ignore[union-attr]
        with backend.pool.connection() as conn:
            row = conn.execute("SELECT current_setting('max_connections')::int").fetchone()
        limit = int(row[0]) if row else 0
        sessions = len(stores.states.sessions()) if stores.states is not None else 0
        index = stores.search_index()
        indexed = len(index.keys())
        stale = index.stale(stores.registry_like(Home.default().registry(config)))
    except LightMemError as err:
        return Check("database", "fail", str(err).split("; ")[0], "check store.url and the server's log")
    finally:
        stores.close()
    pool = config.store.poolSize
    detail = (
        f"{backend.where} reachable, schema version {stores.schema_version}, {sessions} sessions with "
        f"state, search index of {indexed} artifacts ({stale} stale); pool {pool} connections per "
        f"process, server max_connections {limit} (room for {limit // pool} processes)"
    )
    if limit < pool:
        return Check(
            "database", "fail", detail, f"lower store.poolSize below {limit} or raise max_connections"
        )
    if stale:
        return Check("database", "warn", detail, "run `lightmem2 doctor --fix` to re-index the artifacts")
    return Check("database", "pass", detail)


def check_tokenizer() -> Check:
    """The shipped o200k_base ranks file is present and matches its pinned sha256."""
    try:
        ranks_bytes()
    except TokenizerError as err:
        return Check("tokenizer", "fail", str(err), "pip install --force-reinstall lightmem2")
    return Check("tokenizer", "pass", f"o200k_base ranks verified (sha256 {RANKS_SHA256[:12]}...)")


def check_server(config: Config, probe: Probe) -> Check:
    """``GET /healthz`` on the configured proxy; not running is a warning (only proxy hosts need it)."""
    from ..server import url_host

    url = f"http://{url_host(config.server.host)}:{config.server.port}/healthz"
    code, _why = probe.get(url, {})
    if code is None:
        return Check(
            "server", "warn", f"not running at {url}", "start it with `lightmem2 serve` if a host uses it"
        )
    if code != 200:
        return Check(
            "server",
            "fail",
            f"{url} answered HTTP {code}",
            "stop whatever holds the port, or change server.port",
        )
    return Check("server", "pass", f"running at {url}")


def server_for_hosts(server: Check, hosts: list[Check]) -> Check:
    """A proxy that is not running is a failure, naming them, once hosts are wired to it: their
    requests (Claude Code, Codex) or lightmem2's work in them (OpenClaw, which then passes through)
    stop until it is back."""
    wired = [h.name for h in hosts if h.wired]
    if server.status != "warn" or not wired:
        return server
    return Check(
        "server",
        "fail",
        f"{server.detail}, and {', '.join(wired)} {'is' if len(wired) == 1 else 'are'} wired to it",
        "start it with `lightmem2 serve`; a hook also starts it again on the next prompt or tool call",
    )


def check_estimator(config: Config, probe: Probe) -> Check:
    """The LLM estimator endpoint answers (the heuristic one needs nothing)."""
    est = config.estimator
    if est.kind != "llm":
        return Check("estimator", "pass", "heuristic (no endpoint needed)")
    if not est.proxyBaseUrl:
        return Check(
            "estimator",
            "fail",
            "kind is llm but estimator.proxyBaseUrl is not set",
            "set it or kind=heuristic",
        )
    url = est.proxyBaseUrl.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {est.proxyApiKey}"} if est.proxyApiKey else {}
    code, why = probe.get(url, headers)
    if code is None:
        return Check("estimator", "fail", f"{url} unreachable ({why})", "check estimator.proxyBaseUrl")
    if code in (401, 403):
        return Check(
            "estimator", "fail", f"{url} rejected the API key (HTTP {code})", "check estimator.proxyApiKey"
        )
    if code >= 500:
        return Check("estimator", "fail", f"{url} answered HTTP {code}", "check the endpoint's server")
    if code != 200:
        return Check(
            "estimator", "warn", f"{url} reachable but answered HTTP {code}", "check the base URL ends in /v1"
        )
    return Check("estimator", "pass", f"{url} reachable (model {est.model or 'unset'})")


STORES: tuple[tuple[str, str, Callable[[Path], object]], ...] = (
    ("ledger", home.LEDGER_FILE, Ledger),
    ("session state", home.STATE_FILE, StateStore),
    ("search index", home.INDEX_FILE, SearchIndex),
    ("fault sink", home.FAULTS_FILE, FaultSink),
)
"""The private SQLite stores of the data dir: (name, file, how to open it)."""


def damaged_stores(root: Path) -> list[tuple[str, Path]]:
    """(name, path) of each store that exists and does not open as a database."""
    bad: list[tuple[str, Path]] = []
    for name, file, opener in STORES:
        path = root / file
        if not path.exists():
            continue
        try:
            store = opener(path)
        except StoreError:
            bad.append((name, path))
            continue
        except (OSError, sqlite3.Error):
            continue  # it cannot be opened for writing (a read-only or full disk): check_data_dir says so
        close = getattr(store, "close", None)
        if close is not None:
            close()
    return bad


def check_data_dir(root: Path) -> Check | None:
    """A ``fail`` when the data dir cannot be written (a read-only or full disk, no permission): every
    store then stops, and lightmem2 passes the hosts' traffic through unreduced; None when it can."""
    if not root.exists():
        return None
    try:
        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as err:
        detail, _, fix = disk_failure(err).partition("; ")
        return Check("data dir", "fail", f"{detail}: outputs pass through unreduced meanwhile", fix)
    disk = os.statvfs(root)
    free = disk.f_bavail * disk.f_frsize
    if free < MIN_FREE_BYTES:
        return Check(
            "data dir",
            "fail",
            f"{root} has {free:,} bytes free: outputs pass through unreduced once nothing fits",
            "free space on its disk, or set LIGHTMEM2_HOME to a dir on another disk",
        )
    return None


MIN_FREE_BYTES = 1 << 20
"""Below this, the data dir counts as full (an archive, a ledger row or a WAL page no longer fits)."""


def check_stores(root: Path) -> Check:
    """Every store that exists opens as a database (a damaged one is a ``fail`` naming its file)."""
    bad = damaged_stores(root)
    if bad:
        return Check(
            "stores",
            "fail",
            "not a usable SQLite database: " + ", ".join(f"{name} ({path})" for name, path in bad),
            "run `lightmem2 doctor --fix`: it moves the damaged files aside and new ones are started",
        )
    return Check("stores", "pass", "ledger, session state, search index and fault sink open")


def fix_stores(root: Path) -> list[str]:
    """``doctor --fix``: move each damaged store aside; one line per store moved."""
    return [
        f"[fixed] {name}: {path} was not a database; moved to {move_aside(path).name}, a new one starts"
        for name, path in damaged_stores(root)
    ]


CONFIG_FAULT = "ConfigError: "
"""How a fault the user's config file caused starts (their typo to fix, not an error of ours to file)."""


def check_faults(faults: list[Fault]) -> Check:
    """What the fault sink holds: each surface/step that failed, how often, and its latest error."""
    if not faults:
        return Check("errors", "pass", "none reported by any surface")
    if all(f.last_error.startswith(CONFIG_FAULT) for f in faults):
        return Check(
            "errors",
            "warn",
            "; ".join(f"{f.where} x{f.count} (last: {f.last_error})" for f in faults[:3]),
            "the config file was invalid then; fix it (`lightmem2 config validate`), nothing to file",
        )
    parts = []
    for f in faults[:6]:
        sid = f" in session {f.last_session}" if f.last_session else ""
        parts.append(f"{f.where} x{f.count} (last{sid}: {f.last_error})")
    more = f"; {len(faults) - 6} more" if len(faults) > 6 else ""
    return Check(
        "errors",
        "warn",
        "; ".join(parts) + more,
        "the host's payloads were passed through unchanged; file the error with this line",
    )


def check_pass_errors(ledger: Ledger | None) -> Check:
    """Pass failures in the most recent calls (fail-open kept the originals, but something is wrong)."""
    if ledger is None:
        return Check("errors", "pass", "no calls recorded yet")
    calls = ledger.recent_calls(RECENT_CALLS)
    totals: dict[str, int] = {}
    last = None
    for c in calls:
        for name, n in c.errors.items():
            totals[name] = totals.get(name, 0) + n
        if c.errors:
            last = c
    if last is None:
        return Check("errors", "pass", f"none in the last {len(calls)} calls")
    counts = ", ".join(f"{n} x{v}" for n, v in sorted(totals.items()))
    detail = (
        f"{counts} in the last {len(calls)} calls (last: session {last.session_id} call {last.call_index}"
    )
    detail += f": {last.last_error})" if last.last_error else ")"
    return Check(
        "errors",
        "warn",
        detail,
        "originals were passed through; see `lightmem2 report` and file the error",
    )


def _errors_check(ledger: Ledger | None) -> Check:
    """One truth for errors: the fault sink when there is one, else the ledger's per-call counts."""
    try:
        return _errors_from_stores(ledger)
    except (OSError, sqlite3.Error) as err:
        return Check("errors", "warn", f"cannot read them: {err}", "see the data dir check above")
    except StoreError:
        return Check(
            "errors", "warn", "cannot read them: a store is damaged (see stores)", "lightmem2 doctor --fix"
        )


def _errors_from_stores(ledger: Ledger | None) -> Check:
    if Home.default().faults_file.exists():
        sink = FaultSink.default()
        try:
            faults = sink.summary()
        finally:
            sink.close()
        if faults or ledger is None:
            return check_faults(faults)
    if ledger is None and Home.default().ledger_file.exists():
        with Ledger.default() as own:
            return check_pass_errors(own)
    return check_pass_errors(ledger)


def run(
    ledger: Ledger | None = None,
    as_json: bool = False,
    probe: Probe | None = None,
    config_file: Path | None = None,
) -> tuple[str, bool]:
    """(text or JSON, ok): ok is False when any check failed (the CLI then exits 1)."""
    probe = probe or Probe()
    config_check, config = check_config(config_file or config_path())
    checks = [
        config_check,
        check_registry(config),
        check_archive_key(config),
        *[c for c in [check_data_dir(Home.default().root)] if c is not None],
        check_stores(Home.default().root),
        *([check_database(config)] if config.store.url else []),
        check_tokenizer(),
    ]
    server = check_server(config, probe)
    hosts = [check_host(host, probe) for host in HOSTS]
    checks.append(server_for_hosts(server, hosts))
    checks += hosts
    checks.append(check_estimator(config, probe))
    checks.append(_errors_check(ledger))
    ok = all(c.status != "fail" for c in checks)
    if as_json:
        data = [{"check": c.name, "status": c.status, "detail": c.detail, "fix": c.fix} for c in checks]
        return to_json({"ok": ok, "checks": data}), ok
    lines: list[str] = []
    for c in checks:
        lines.append(f"[{c.status}] {c.name}: {c.detail}")
        if c.fix and c.status != "pass":
            lines.append(f"       fix: {c.fix}")
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("pass", "warn", "fail")}
    lines.append(f"doctor: {counts['pass']} pass, {counts['warn']} warn, {counts['fail']} fail")
    return "\n".join(lines), ok


def configure(parser: argparse.ArgumentParser) -> None:
    """``--json``, ``--fix``."""
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--fix",
        action="store_true",
        help="rebuild the search index (the database's with store.url) if missing or stale",
    )


def _fix_index() -> str:
    """``--fix``: the search index of the stores the config names (the database's with ``store.url``),
    rebuilt against their archives where it is missing or stale."""
    config = config_in_force()[0]
    stores = open_stores(config)
    try:
        return fix_index(stores.registry_like(Home.default().registry(config)), stores.search_index())
    finally:
        stores.close()


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 doctor``: exit code 1 when a check failed."""
    fixed = fix_stores(Home.default().root) if args.fix else []
    text, ok = run(as_json=args.json)
    if args.fix:
        text = "\n".join([*fixed, _fix_index(), text])
    return text, 0 if ok else 1


COMMAND = Command("doctor", __doc__, configure, main)
