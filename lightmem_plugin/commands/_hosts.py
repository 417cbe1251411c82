"""doctor's view of the outside world: the host agents on this machine and whether lightmem2 is wired in.

Why a :class:`Probe`: every outside fact doctor needs (an executable on PATH, a command's output, an
HTTP status, the user's home) goes through one small object, so tests swap in a fake machine and the
real one is only touched through time-bounded calls (5 s per subprocess, 2 s per HTTP request).
Supported versions are the ones DESIGN section 6 was verified on (and the e2e tests run): from
``minimum`` up to the newest tested series pass; a newer version is a warning (it is likely to work,
it was not tested), only one older than ``minimum`` fails when lightmem2 is wired in.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import httpx

Status = Literal["pass", "warn", "fail"]
SUBPROCESS_TIMEOUT_S = 5.0
HTTP_TIMEOUT_S = 2.0
_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class Check:
    """One doctor line: ``[status] name: detail`` and, when something is wrong, how to fix it."""

    name: str
    status: Status
    detail: str
    fix: str | None = None
    wired: bool = False  # a host check: lightmem2 is wired into this host (it relies on `serve`)


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


Version = tuple[int, int, int]
Support = Literal["supported", "newer", "older"]


@dataclass(frozen=True)
class Host:
    """A host agent: its executable, the versions we support, and how to tell lightmem2 is wired in."""

    name: str
    exe: str
    minimum: Version
    """The oldest version lightmem2 works with."""
    tested: tuple[tuple[int, int], ...]
    """The (major, minor) series the e2e tests run, oldest first."""
    install_fix: str

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


HOSTS = (
    Host("openclaw", "openclaw", (2026, 9, 0), ((2026, 9),), "lightmem2 install openclaw"),
    Host("claude-code", "claude", (2, 1, 0), ((2, 1),), "lightmem2 install claude-code"),
    Host("codex", "codex", (0, 160, 0), ((0, 169), (0, 171)), "lightmem2 install codex"),
)


def parse_version(text: str) -> tuple[int, int, int] | None:
    """The first ``A.B.C`` in a ``--version`` output."""
    m = _VERSION_RE.search(text)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _wired(host: Host, exe: str, probe: Probe) -> tuple[bool | None, str]:
    """(lightmem2 wired in?, where we looked); None when the host's own config cannot be read."""
    if host.name == "openclaw":
        code, out = probe.run([exe, "plugins", "list"])
        if code != 0:
            return None, f"`openclaw plugins list` failed (exit {code}): {out.strip()[:120]}"
        return "lightmem2" in out, "openclaw plugins list"
    if host.name == "claude-code":
        # the project's own settings first (`install claude-code --project DIR`), then the user's
        files = [
            d / ".claude" / name
            for d in probe.project_dirs()
            for name in ("settings.json", "settings.local.json")
        ]
        return _first_wired([*files, probe.home / ".claude" / "settings.json"], _claude_wired, "hooks in")
    files = [d / ".codex" / "config.toml" for d in probe.project_dirs()]
    return _first_wired(
        [*files, probe.home / ".codex" / "config.toml"], _codex_wired, "[model_providers.lightmem2] in"
    )


def _claude_wired(path: Path) -> bool:
    hooks = json.loads(path.read_text(encoding="utf-8")).get("hooks") or {}
    return "lightmem2" in json.dumps(hooks)


def _codex_wired(path: Path) -> bool:
    providers = tomllib.loads(path.read_text(encoding="utf-8")).get("model_providers") or {}
    return isinstance(providers, dict) and "lightmem2" in providers


def _first_wired(paths: list[Path], wired: Callable[[Path], bool], label: str) -> tuple[bool | None, str]:
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


def check_host(host: Host, probe: Probe) -> Check:
    """One line for one host: installed?, version supported?, lightmem2 wired in?"""
    exe = probe.which(host.exe)
    if exe is None:
        return Check(
            host.name, "warn", f"not installed (`{host.exe}` is not on PATH); skip unless you use it"
        )
    code, out = probe.run([exe, "--version"])
    version = parse_version(out) if code == 0 else None
    if version is None:
        why = f"exit {code}" if code else f"no version in {out.strip()[:60]!r}"
        return Check(
            host.name, "fail", f"`{host.exe} --version` failed ({why})", f"reinstall {host.name} or fix PATH"
        )
    shown = ".".join(map(str, version))
    judged = host.judge(version)
    wired, where = _wired(host, exe, probe)
    if wired is None:
        return Check(host.name, "fail", f"{shown}: {where}", f"fix the file or rerun `{host.install_fix}`")
    support = {
        "supported": "supported",
        "newer": f"newer than tested {'.'.join(map(str, host.tested[-1]))}.x; the e2e tests run "
        f"{host.tested_text}",
        "older": f"older than supported {host.supported_text}",
    }[judged]
    if wired and judged == "supported":
        return Check(host.name, "pass", f"{shown} (supported), lightmem2 wired in ({where})", wired=True)
    if wired and judged == "newer":
        return Check(
            host.name,
            "warn",
            f"{shown} ({support}), lightmem2 wired in ({where})",
            "likely fine; if a hook or the proxy misbehaves, run `lightmem2 doctor` and report it with "
            "the host version",
            wired=True,
        )
    if wired:
        return Check(
            host.name,
            "fail",
            f"{shown} ({support}) with lightmem2 wired in ({where})",
            f"upgrade {host.name} to {host.supported_text}, or run `{host.install_fix} --uninstall`",
            wired=True,
        )
    return Check(
        host.name,
        "warn",
        f"{shown} ({support}); lightmem2 not wired in ({where})",
        f"run `{host.install_fix}`",
    )
