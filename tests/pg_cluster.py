"""A throwaway PostgreSQL cluster for the tests marked ``postgres`` (``make pg``).

``initdb`` into a temp dir, ``postgres`` on 127.0.0.1 on a free port with its unix socket in that dir,
bounded in time, stopped by PID (SIGINT: a fast shutdown; SIGKILL if it does not stop), the dir
removed. A test can also freeze it (SIGSTOP of the postmaster and its children, as a network partition
without a reset looks to its clients) and restart it on the same port. PostgreSQL refuses to run as root: as root the cluster runs as ``nobody`` (the dir is made
its own). Binaries: ``$LIGHTMEM2_PG_BIN``, else ``initdb`` on PATH, else Debian's
``/usr/lib/postgresql/<version>/bin`` (its package does not put them on PATH).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

START_S = 30.0
STOP_S = 30.0


def find_bin() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``, None when PostgreSQL is not installed."""
    env = os.environ.get("LIGHTMEM2_PG_BIN")
    if env:
        return Path(env) if (Path(env) / "initdb").exists() else None
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return debian[-1].parent if debian else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgCluster:
    """One running cluster; ``url(db)`` names a database on it (user ``postgres``, trust on loopback)."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="lightmem2-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.port = free_port()
        self.user: str | None = "nobody" if os.geteuid() == 0 else None
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self.root.chmod(0o700)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> PgCluster:
        """initdb, then start the server and wait until it accepts connections (bounded)."""
        subprocess.run(
            [str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
             "--no-sync", "-E", "UTF8", "--locale=C"],
            user=self.user, check=True, capture_output=True, timeout=120, cwd=self.root,
        )  # fmt: skip
        return self._launch()

    def _launch(self) -> PgCluster:
        """Start the server on the data dir and port, and wait until it accepts connections (bounded)."""
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(self.bin_dir / "postgres"), "-D", str(self.data), "-h", "127.0.0.1",
                 "-p", str(self.port), "-k", str(self.root), "-F", "-c", "max_connections=300",
                 "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
                user=self.user, stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
                start_new_session=True,
            )  # fmt: skip
        if self.user:
            os.chown(self.log, pwd.getpwnam(self.user).pw_uid, -1)
        import psycopg

        deadline = time.monotonic() + START_S
        while True:
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return self
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"postgres did not start: {self.log_tail()}") from None
                time.sleep(0.1)

    def url(self, db: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-2000:]
        return "(no log)"

    def create_db(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_db(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def server_pids(self) -> list[int]:
        """The postmaster's PID, then its children's (backends and background workers, from ``/proc``)."""
        assert self.proc is not None, "the cluster is not running"
        pids = [self.proc.pid]
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    if int(fields[1]) == self.proc.pid:
                        pids.append(int(entry.name))
        return pids

    @contextlib.contextmanager
    def frozen(self) -> Iterator[list[int]]:
        """The whole server stopped (SIGSTOP) inside the block: its sockets stay open and the kernel
        still accepts and acknowledges, but nothing answers. The postmaster first, so it forks no new
        backend, then its children until none is left running; SIGCONT to each on the way out, always."""
        if not Path("/proc/self/stat").exists():
            raise RuntimeError("freezing the cluster needs /proc (Linux)")
        stopped: list[int] = []
        try:
            while True:
                fresh = [pid for pid in self.server_pids() if pid not in stopped]
                if not fresh:
                    break
                for pid in fresh:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
            yield stopped
        finally:
            for pid in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def restart(self) -> None:
        """What ``pg_ctl restart -m fast`` does, by PID: a fast shutdown (the server ends every client
        connection), then the server again on the same data dir and port."""
        self._shutdown()
        self._launch()

    def _shutdown(self) -> None:
        """Stop the server by its PID (fast shutdown, then SIGKILL)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: postmaster and its children
                proc.wait(timeout=10)

    def stop(self) -> None:
        """Stop the server by its PID (fast shutdown, then SIGKILL) and remove the temp dir."""
        self._shutdown()
        shutil.rmtree(self.root, ignore_errors=True)
