"""doctor's view of the host agents on this machine: installed, which version, lightmem2 wired in.

The hosts themselves (executable, supported versions, where each keeps lightmem2's wiring) are the
registry's (:mod:`lightmem_plugin.hosts`); this module turns one into a doctor line. How the machine
is looked at (:class:`Probe`) and the version policy are explained in :mod:`lightmem_plugin.hosts.base`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..hosts import HOSTS
from ..hosts.base import Host, Probe, Status, http_get, run_command

__all__ = ["HOSTS", "Check", "Host", "Probe", "check_host", "http_get", "parse_version", "run_command"]

_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class Check:
    """One doctor line: ``[status] name: detail`` and, when something is wrong, how to fix it."""

    name: str
    status: Status
    detail: str
    fix: str | None = None
    wired: bool = False  # a host check: lightmem2 is wired into this host (it relies on `serve`)


def parse_version(text: str) -> tuple[int, int, int] | None:
    """The first ``A.B.C`` in a ``--version`` output."""
    m = _VERSION_RE.search(text)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


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
    wired, where = host.wired(exe, probe)
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
