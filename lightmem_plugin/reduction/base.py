"""What every reduction pass shares: its context, the archive callback and the stub format.

Why a callback instead of the registry object: passes stay pure functions of (content, settings)
plus "store these bytes and give me their key". The key is the xxh3-128 of the bytes, so the same
input always yields the same stub (DESIGN I1, I3) whether or not the store already had it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from .kinds import ToolCall


class ModeSettings(Protocol):
    """What the passes read of a mode's table (``config.ModeTable`` provides it).

    A protocol, not the config class: the config builds its pass names from this package, so this
    package must not import the config back, not even for types (it stays a leaf below it).
    """

    @property
    def triggerChars(self) -> int: ...
    @property
    def capChars(self) -> int: ...
    @property
    def headChars(self) -> int: ...
    @property
    def tailChars(self) -> int: ...
    @property
    def fileViewChars(self) -> int: ...
    @property
    def keepErrorLines(self) -> bool: ...
    @property
    def passes(self) -> Sequence[str]: ...


class ReductionSettings(Protocol):
    """What the passes read of the reduction config (``config.ReductionConfig`` provides it)."""

    @property
    def hardCapChars(self) -> int: ...
    @property
    def recoverHint(self) -> str: ...
    @property
    def imageBitmapMaxBytes(self) -> int: ...
    @property
    def imageSvgMaxBytes(self) -> int: ...
    @property
    def imageMaxSidePx(self) -> int: ...


Archiver = Callable[[bytes], str]
"""Stores bytes in the artifact registry and returns the name a stub gives them: the shortest
claimed prefix of their content key, 12 to 32 hex chars (:meth:`Registry.short`)."""

STUB_PREFIX = "[lightmem2: "
STUB_RE = re.compile(r"\[lightmem2: [^\]\n]*?(?:archived as|lightmem2 recover) ([0-9a-f]{12,32})\b[^\]\n]*\]")


@dataclass(frozen=True)
class Elided:
    """A text an earlier stage derived from ``original`` by replacing runs of lines with one marker
    line each: for every line of the derived text, the first and last original line (0-based) it
    stands for. The text passes reduce the derived text but archive ``original`` and name its line
    numbers, so every stub points at the original (before: 8 of 241 truncation stubs on the swe
    traces pointed at intermediate text holding repeat markers)."""

    original: str
    first: list[int]
    last: list[int]


@dataclass(frozen=True)
class PassContext:
    """Settings of the current mode plus the archive callback."""

    table: ModeSettings
    reduction: ReductionSettings
    archive: Archiver
    call: ToolCall | None = None  # the tool call that produced the output (its command names the kind)
    prefer_shell: bool = False  # the host offers a shell but no lightmem2_recover tool (recoverHint auto)
    base: Elided | None = None  # the text being reduced was derived from this original
    ids_as_sent: bool = True  # the call ids we see are the ones the model sees (see dedup.reference)
    respell: Callable[[str], str | None] | None = None
    """How the model reads a host call id, when not as the host sent it (short call ids: the id it
    reads; None from it: the spelling is not known here, so a reference names no call)."""


def stub(
    key: str, chars: int, lines: tuple[int, int] | None = None, what: str = "chars", shell: bool = False
) -> str:
    """The byte-stable stub left where content was removed.

    ``lines`` names the 1-based inclusive line range of the original that was cut, so the agent can
    ask for exactly that part. No clock, no path: only the size, the key and how to recover. The key
    appears once: every stub is re-read on every later call, so each token in it is paid many times
    (naming the key twice cost 28 more tokens per stub). ``shell`` gives the hint that works in a host
    without the recover tool (``reduction.recoverHint = "shell"``): the command line to run. Both forms
    say "archived": ``chars`` is what the archive holds, which for a whole-output stub is the whole
    output (the shell form said "elided" before, so a Claude Code agent read "3,131 chars (head, tail
    and error lines shown) elided" above the lines it was shown).
    """
    if shell:
        rng = f" --lines {lines[0]}:{lines[1]}" if lines else ""
        return f"{STUB_PREFIX}{chars:,} {what} archived; run: lightmem2 recover {key}{rng}]"
    hint = f', lines="{lines[0]}:{lines[1]}"' if lines else ""
    return f"{STUB_PREFIX}{chars:,} {what} archived as {key}; recover with lightmem2_recover(key{hint})]"


def shell_hint(ctx: PassContext) -> bool:
    """True when stubs should name the shell command rather than the tool (the host has no tool)."""
    hint = ctx.reduction.recoverHint
    return hint == "shell" or (hint == "auto" and ctx.prefer_shell)


SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "local_shell", "run_shell_command", "exec"})
"""Tools that run a command line. ``exec`` is Codex's code mode (a script calling ``tools.exec_command``)
and OpenClaw's shell: in code mode Codex lists our MCP tools only in a deferred ``mcp__lightmem2``
namespace, so a stub naming ``lightmem2_recover(...)`` named a function the script cannot call
(measured on 0.169 and 0.171); ``lightmem2 recover KEY`` runs through ``exec_command``."""


def prefers_shell(tool_names: list[str]) -> bool:
    """True for a tool list with a shell and no ``lightmem2_recover`` (Claude Code without our MCP
    server): a stub there must name ``lightmem2 recover KEY``, which the agent can run."""
    if any(name.endswith("lightmem2_recover") for name in tool_names):
        return False
    return any(name.lower() in SHELL_TOOLS for name in tool_names)


def stub_keys(text: str) -> list[str]:
    """Artifact keys named by stubs inside ``text``, in order of appearance."""
    return STUB_RE.findall(text)


def already_reduced(text: str) -> bool:
    """True when ``text`` already carries a lightmem2 stub (reduced by a hook or an earlier pass)."""
    return STUB_RE.search(text) is not None
