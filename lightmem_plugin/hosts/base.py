"""What lightmem2 knows of one host agent, and how doctor looks at the machine.

Why one object per host: installing, uninstalling, doctor's probe (is it installed, which version,
is lightmem2 wired in) and the hook events a host sends were string switches in four modules. A
:class:`Host` holds all of them; :mod:`lightmem_plugin.hosts` lists the hosts, one line each, and the
install command, the hook command and doctor read that list.

Why a :class:`Probe`: every outside fact doctor needs (an executable on PATH, a command's output, an
HTTP status, the user's home, where it runs) goes through one small object, so tests swap in a fake
machine and the real one is only touched through time-bounded calls (5 s per subprocess, 2 s per
HTTP request). Supported versions are the ones DESIGN section 6 was verified on (and the e2e tests
run): from ``minimum`` up to the newest tested series pass; a newer version is a warning (it is likely
to work, it was not tested), only one older than ``minimum`` fails when lightmem2 is wired in.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..hookspec import Handler

SUBPROCESS_TIMEOUT_S = 5.0
HTTP_TIMEOUT_S = 2.0

Version = tuple[int, int, int]
Support = Literal["supported", "newer", "older"]
Status = Literal["pass", "warn", "fail"]


def run_command(cmd: list[str]) -> tuple[int, str]:
    """(exit code, stdout + stderr) of ``cmd``, killed after 5 s (code 124) or 127 if it cannot start."""
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {SUBPROCESS_TIMEOUT_S:g} s"
    except OSError as err:
        return 127, str(err)
    return done.returncode, (done.stdout or "") + (done.stderr or "")


def http_get(url: str, headers: dict[str, str]) -> tuple[int | None, str]:
    """(HTTP status, "") or (None, why it could not connect), with a short timeout."""
    import httpx  # lazy: ~0.15 s that every hook process would pay for doctor's probe

    try:
        resp = httpx.get(url, headers=headers, timeout=HTTP_TIMEOUT_S, follow_redirects=False)
    except httpx.HTTPError as err:
        return None, f"{type(err).__name__}: {err}"[:160]
    return resp.status_code, ""


@dataclass
class Probe:
    """How doctor looks at the machine; tests pass a fake."""

    which: Callable[[str], str | None] = shutil.which
    run: Callable[[list[str]], tuple[int, str]] = run_command
    get: Callable[[str, dict[str, str]], tuple[int | None, str]] = http_get
    home: Path = field(default_factory=Path.home)
    cwd: Path = field(default_factory=Path.cwd)
    """Where doctor runs: a project installed with ``--project`` is wired in for sessions started there."""

    def project_dirs(self) -> list[Path]:
        """``cwd`` and its parents, nearest first, up to (not including) the home directory."""
        out: list[Path] = []
        for folder in (self.cwd, *self.cwd.parents):
            if folder == self.home:
                break
            out.append(folder)
        return out


Wired = Callable[[str, Probe], "tuple[bool | None, str]"]
"""(lightmem2 wired in?, where doctor looked) for the host's executable; None: its config is unreadable."""


def first_wired(paths: list[Path], wired: Callable[[Path], bool], label: str) -> tuple[bool | None, str]:
    """(wired?, where) from the first of ``paths`` that wires lightmem2 in; the last one looked at when
    none does (the user's own file); None when one that exists cannot be read."""
    for path in paths:
        if not path.exists():
            continue
        try:
            if wired(path):
                return True, f"{label} {path}"
        except (OSError, ValueError, AttributeError) as err:
            return None, f"{path} unreadable: {err}"
    return False, str(paths[-1])


@dataclass(frozen=True)
class Host:
    """A host agent: its executable, the versions we support, how to wire lightmem2 in and out, how
    to tell it is wired in, and the hook events it sends us.

    ``installer`` names the module whose ``run(uninstall, project)`` edits the host's files, and
    ``hooks`` the module whose ``handle(event, payload, run_line)`` answers its hook events (a
    :class:`~lightmem_plugin.hookspec.HostHooks`' method per event; None: the host runs no lightmem2
    hook, as OpenClaw, a plugin); each is imported when it is used, so a hook does not load the
    installers, nor doctor the hooks. Both live in the host's folder (``hosts/<name>/install.py``,
    ``hooks.py``), its doctor probe is ``wired``, and its host-side files are in ``adapters/<name>``."""

    name: str
    exe: str
    minimum: Version
    """The oldest version lightmem2 works with."""
    tested: tuple[tuple[int, int], ...]
    """The (major, minor) series the e2e tests run, oldest first."""
    installer: str
    wired: Wired
    hooks: str | None = None

    @property
    def handle(self) -> Handler | None:
        """The hook handler (from the ``hooks`` module), or None for a host without hooks."""
        if self.hooks is None:
            return None
        handler: Handler = importlib.import_module(self.hooks).handle
        return handler

    @property
    def install_fix(self) -> str:
        """The command that wires lightmem2 into this host."""
        return f"lightmem2 install {self.name}"

    def install(self, uninstall: bool = False, project: str | None = None) -> str:
        """Wire lightmem2 in (or out, ``uninstall``); the text ``lightmem2 install`` prints."""
        module = importlib.import_module(self.installer)
        text: str = module.run(uninstall=uninstall, project=project)
        return text

    @property
    def supported_text(self) -> str:
        """The supported range in words."""
        lo = ".".join(map(str, self.minimum[:2]))
        hi = ".".join(map(str, self.tested[-1]))
        return f"{lo}.x" if lo == hi else f"{lo}.x to {hi}.x"

    @property
    def tested_text(self) -> str:
        """The tested series in words."""
        return " and ".join(f"{a}.{b}.x" for a, b in self.tested)

    def judge(self, version: Version) -> Support:
        """Older than the minimum, within what was tested (or between), or newer than tested."""
        if version < self.minimum:
            return "older"
        return "supported" if version[:2] <= self.tested[-1] else "newer"
