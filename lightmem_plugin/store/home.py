"""The data dir and everything lightmem2 keeps in it, named once and opened through one object.

Why one object: the layout of the data dir was spelled by hand in 23 places (``data_dir() /
"artifacts"``, ``/ "records"``, ``/ "serve.pid"``, ...), and ``status``, ``recover``, ``doctor`` and
the MCP server built a whole plugin (config holder, token counter, search hook, session table) only to
reach its artifact registry. :class:`Home` names every file of the data dir (each store's ``default()``
opens its file here) and opens the artifact registry with the settings of the config in force; :meth:`Home.default` follows ``$LIGHTMEM2_HOME`` (every test sets
it), and ``Home(path)`` points anywhere else.

Why it stays light: a host runs a hook process on every tool call, and the hooks reach the fault sink,
the pid files and the transcripts index through here; the stores themselves are imported only by the
method that opens them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..paths import data_dir

if TYPE_CHECKING:
    from ..config import Config
    from ..errors import LightMemError
    from .registry import Registry

ARTIFACTS_DIR = "artifacts"
LEDGER_FILE = "ledger.sqlite3"
STATE_FILE = "sessions.sqlite3"
INDEX_FILE = "search.sqlite3"
FAULTS_FILE = "faults.sqlite3"
RECORDS_DIR = "records"
TRANSCRIPTS_FILE = "transcripts.json"
SECRET_FILE = "sidecar.secret"
HOOKS_LOG = "hooks.log"
SERVE_PID = "serve.pid"
SERVE_CHILD_PID = "serve.child.pid"
SERVE_LOCK = "serve.lock"
SERVE_LOG = "serve.log"
VISUAL_DIR = "visual"


@dataclass(frozen=True)
class Home:
    """One data dir: where each file is, and the stores in it opened with a config's settings."""

    root: Path

    @classmethod
    def default(cls) -> Home:
        """The user's data dir (``$LIGHTMEM2_HOME``, else the platform's)."""
        return cls(data_dir())

    @property
    def ledger_file(self) -> Path:
        """One row per model call (:mod:`.ledger`)."""
        return self.root / LEDGER_FILE

    @property
    def states_file(self) -> Path:
        """The sessions' persisted decisions (:mod:`.session_state`)."""
        return self.root / STATE_FILE

    @property
    def index_file(self) -> Path:
        """The search index of archived text (:mod:`.search_index`)."""
        return self.root / INDEX_FILE

    @property
    def faults_file(self) -> Path:
        """Failures of every surface, for status and doctor (:mod:`lightmem_plugin.faults`)."""
        return self.root / FAULTS_FILE

    @property
    def records_dir(self) -> Path:
        """Session records: goals, decisions, task status (``resume``, ``export``)."""
        return self.root / RECORDS_DIR

    @property
    def compaction_notes_dir(self) -> Path:
        """What lightmem2 put in the context after each host compaction (:mod:`.compaction_notes`)."""
        return self.root / RECORDS_DIR / "compactions"

    @property
    def transcripts_file(self) -> Path:
        """Which host transcript belongs to which session (the hooks write it)."""
        return self.root / TRANSCRIPTS_FILE

    @property
    def secret_file(self) -> Path:
        """The per-install secret of the sidecar routes."""
        return self.root / SECRET_FILE

    @property
    def hooks_log(self) -> Path:
        """One line per hook that failed or ran out of time."""
        return self.root / HOOKS_LOG

    @property
    def serve_pid(self) -> Path:
        """The pid of a proxy a hook started (its supervisor)."""
        return self.root / SERVE_PID

    @property
    def serve_child_pid(self) -> Path:
        """The pid of the proxy the supervisor runs now."""
        return self.root / SERVE_CHILD_PID

    @property
    def serve_lock(self) -> Path:
        """Held while a hook starts the proxy, so two hooks never start two."""
        return self.root / SERVE_LOCK

    @property
    def serve_log(self) -> Path:
        """What a proxy a hook started prints (its supervisor appends here)."""
        return self.root / SERVE_LOG

    @property
    def visual_dir(self) -> Path:
        """Where ``lightmem2 visual`` writes its pages by default."""
        return self.root / VISUAL_DIR

    def artifacts_dir(self, config: Config) -> Path:
        """The artifact registry's folder: ``registry.dir`` when set, else ``artifacts/`` here."""
        return Path(config.registry.dir) if config.registry.dir else self.root / ARTIFACTS_DIR

    def registry(
        self, config: Config, on_key_error: Callable[[LightMemError], None] | None = None
    ) -> Registry:
        """The artifact registry here, with ``config``'s size cap, redaction and sealing (on PostgreSQL,
        ``Stores.registry_like`` wraps it). Without an archive key where sealing is on, archives are
        redacted instead, and ``on_key_error`` hears why (the plugin reports it to the fault sink); it
        never stops the host."""
        from ..errors import LightMemError
        from ..security.redaction import Redactor
        from .registry import Registry
        from .sealing import Sealer

        sealer = None
        if config.registry.encrypt:
            try:
                sealer = Sealer.from_home()
            except LightMemError as err:
                if on_key_error is not None:
                    on_key_error(err)
        redactor = Redactor(config.redaction.enabled, config.redaction.extraPatterns)
        return Registry(self.artifacts_dir(config), config.registry.maxBytes, redactor, sealer=sealer)
