"""What a tool call does to files: reads, writes (whole-file or in place), deletes, and its kind.

Why from the command text alone: the session record and the heuristic estimator must agree on "which
files did the agent touch" without executing anything, deterministically, on any host. Coding agents
edit through the shell (``sed -i``, ``cat > f << EOF``, ``python fix.py`` that opens a file for writing,
``patch``/``git apply``) or through editor tools (``str_replace_editor`` with a ``path``); both land here.
:class:`FileTracker` carries the little state that needs (the work directory, texts of scripts and
patches written earlier in the session), so it must see the calls in order.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Literal

from ..reduction.kinds import runs_tests
from ..reduction.shell import SimpleCommand, split_commands, strip_prefixes
from .pysource import file_uses

Kind = Literal["test", "run", "write", "install", "vcs", "read", "explore", "other"]
KIND_ORDER: tuple[Kind, ...] = ("test", "run", "write", "install", "vcs", "read", "explore", "other")

_READERS = frozenset(
    {"cat", "head", "tail", "less", "more", "nl", "bat", "wc", "stat", "xxd", "od", "strings"}
)
_EXPLORERS = frozenset({"ls", "find", "tree", "pwd", "which", "whereis", "type", "du", "locate", "realpath"})
_GREPS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack"})
_INSTALLERS = frozenset({"pip", "pip3", "conda", "apt", "apt-get", "npm", "yarn", "poetry", "uv", "pipx"})
_TESTERS = frozenset({"pytest", "py.test", "tox", "nox", "nosetests", "trial", "runtests.py"})
_INSTALL_VERBS = frozenset({"install", "i", "ci", "add", "sync", "update", "upgrade", "remove", "uninstall"})
_OPT_WITH_VALUE = {
    "head": {"-n", "-c"},
    "tail": {"-n", "-c"},
    "grep": {"-e", "-f", "-m", "-A", "-B", "-C", "--include", "--exclude", "--exclude-dir"},
    "sed": {"-e", "-f", "-l"},
    "awk": {"-f", "-v", "-F"},
    "checkout": {"-b", "-B", "--orphan"},
    "restore": {"-s", "--source"},
}
_VERSION_TAG = re.compile(r"v?\d+(?:\.\d+)+\S*")  # git checkout v2.9.0: a tag, not a file
_PATCH_TARGET = re.compile(r"^\+\+\+ (?P<path>[^\t\n]+)", re.M)
_MAX_TEXT = 200_000
_SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm")  # never taken for the work directory
_NOT_A_PATH = re.compile(r"[$*?{}`\n<>|]")


@dataclass(slots=True)
class Effects:
    """File effects and kind of one tool call; paths relative to the work directory where possible."""

    kind: Kind = "other"
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    whole: list[str] = field(default_factory=list)  # subset of writes that replace the entire file
    full: list[str] = field(default_factory=list)  # subset of reads that show the entire file
    deletes: list[str] = field(default_factory=list)
    benign_rc1: bool = False  # grep/diff exit 1 means "no match"/"differs", not failure

    def add_kind(self, kind: Kind) -> None:
        if KIND_ORDER.index(kind) < KIND_ORDER.index(self.kind):
            self.kind = kind


def add_path(target: list[str], path: str | None) -> None:
    """Append ``path`` to ``target`` unless it is None or already there (keeps first-seen order)."""
    if path and path not in target:
        target.append(path)


class FileTracker:
    """Reads tool calls in session order and says what each did to which files."""

    def __init__(self) -> None:
        self.workdir: str | None = None
        self.texts: dict[str, str] = {}

    def norm(self, path: str, cwd: str | None) -> str | None:
        """Canonical form of ``path``: normalised, relative to the work directory when under it."""
        if not path or path.startswith(("-", "~", "/dev/", "/proc/")) or _NOT_A_PATH.search(path):
            return None
        if not path.startswith("/") and cwd:
            path = posixpath.join(cwd, path)
        path = posixpath.normpath(path)
        if self.workdir and path.startswith(self.workdir + "/"):
            path = path[len(self.workdir) + 1 :]
        return None if path in (".", "..", "/") else path

    def shell(self, command: str, depth: int = 0) -> Effects:
        """Effects of a shell command line."""
        fx = Effects()
        cwd: str | None = None
        commands = split_commands(command)
        for pos, cmd in enumerate(commands):
            argv = strip_prefixes(cmd.argv)
            if argv and argv[0] == "cd":
                target = argv[1] if len(argv) > 1 else ""
                if target.startswith("/"):
                    cwd = posixpath.normpath(target)
                    if self.workdir is None and not cwd.startswith(_SCRATCH_DIRS):
                        self.workdir = cwd
                elif target and cwd and not target.startswith(("~", "-", "$")):
                    cwd = posixpath.normpath(posixpath.join(cwd, target))
                continue
            self._redirects(cmd, cwd, fx)
            if argv:
                self._command(argv, cmd, cwd, fx, depth)
            piped_out = pos + 1 < len(commands) and commands[pos + 1].piped_in
            if argv and argv[0] == "cat" and not piped_out and not cmd.redirects:
                fx.full.extend(f for f in self._files(argv, cwd) if f not in fx.full)
        return fx

    def _redirects(self, cmd: SimpleCommand, cwd: str | None, fx: Effects) -> None:
        for op, target in cmd.redirects:
            path = self.norm(target, cwd) if op not in (">&", "<&") else None
            if path is None:
                continue
            if op in (">", ">|", "&>"):
                add_path(fx.writes, path)
                add_path(fx.whole, path)
                fx.add_kind("write")
                if cmd.stdin_text is not None and len(cmd.stdin_text) <= _MAX_TEXT:
                    self.texts[path] = cmd.stdin_text
            elif op in (">>", "&>>"):
                add_path(fx.writes, path)
                fx.add_kind("write")
            elif op == "<":
                add_path(fx.reads, path)

    def _files(self, argv: list[str], cwd: str | None, drop_first: bool = False) -> list[str]:
        """Normalised positional arguments (option values skipped; the first dropped if asked)."""
        opts = _OPT_WITH_VALUE.get(posixpath.basename(argv[0]), set())
        words: list[str] = []
        skip = False
        for word in argv[1:]:
            if skip:
                skip = False
            elif word in opts:
                skip = True
            elif not word.startswith(("-", "+")) or word == "-":
                words.append(word)
        out: list[str] = []
        for word in words[1:] if drop_first else words:
            add_path(out, self.norm(word, cwd))
        return out

    def _command(self, argv: list[str], cmd: SimpleCommand, cwd: str | None, fx: Effects, depth: int) -> None:
        name = posixpath.basename(argv[0])
        if name in _READERS:
            files = self._files(argv, cwd)
            fx.reads.extend(f for f in files if f not in fx.reads)
            fx.add_kind("read" if files else "other")
        elif name in ("sed", "awk", "gawk"):
            self._sed_awk(name, argv, cwd, fx)
        elif name in _GREPS:
            fx.benign_rc1 = True
            files = self._files(argv, cwd, drop_first=not any(a in ("-e", "-f") for a in argv))
            recursive = any(a[:1] == "-" and a[1:2] != "-" and "r" in a.lower() for a in argv[1:])
            if files and not recursive:
                fx.reads.extend(f for f in files if f not in fx.reads)
                fx.add_kind("read")
            else:
                fx.add_kind("explore")
        elif name in _EXPLORERS:
            fx.add_kind("explore")
        elif name in ("diff", "cmp"):
            fx.benign_rc1 = True
            fx.reads.extend(f for f in self._files(argv, cwd) if f not in fx.reads)
            fx.add_kind("read")
        elif name in ("cp", "mv", "rm", "touch", "tee"):
            self._file_ops(name, argv, cwd, fx)
        elif name in _INSTALLERS and next((a for a in argv[1:] if a[:1] != "-"), "") in _INSTALL_VERBS:
            fx.add_kind("install")  # `pip install pytest` installs; `npm test`, `uv run pytest` test
        elif name in _TESTERS or runs_tests(argv):
            fx.add_kind("test")
        elif name in _INSTALLERS:
            fx.add_kind("install")
        elif name == "git":
            self._git(argv, cwd, fx)
        elif name == "patch":
            self._patch(argv, cmd, cwd, fx)
        elif re.fullmatch(r"python[\d.]*|pypy[\d.]*", name):
            self._python(argv, cmd, cwd, fx)
        elif name in ("bash", "sh") and len(argv) > 2 and argv[1] in ("-c", "-lc") and depth < 2:
            inner = self.shell(argv[2], depth + 1)
            for attr in ("reads", "writes", "whole", "deletes"):
                getattr(fx, attr).extend(p for p in getattr(inner, attr) if p not in getattr(fx, attr))
            fx.add_kind(inner.kind)
        elif name.endswith(".sh") or name in ("bash", "sh", "node", "ruby", "go", "cargo"):
            fx.add_kind("run")

    def _sed_awk(self, name: str, argv: list[str], cwd: str | None, fx: Effects) -> None:
        inplace = any(a.startswith("-i") or a in ("--in-place", "inplace") for a in argv[1:])
        has_script_opt = any(a in ("-e", "-f") for a in argv[1:])
        words = [a for a in argv[1:] if a not in ("inplace",)]
        files = self._files([name, *words], cwd, drop_first=not has_script_opt)
        if inplace:
            fx.writes.extend(f for f in files if f not in fx.writes)
            fx.add_kind("write")
        else:
            fx.reads.extend(f for f in files if f not in fx.reads)
            fx.add_kind("read" if files else "other")

    def _file_ops(self, name: str, argv: list[str], cwd: str | None, fx: Effects) -> None:
        files = self._files(argv, cwd)
        if name in ("rm", "touch", "tee"):
            target = fx.deletes if name == "rm" else fx.writes
            target.extend(f for f in files if f not in target)
            if name == "touch":
                fx.whole.extend(f for f in files if f not in fx.whole)
            fx.add_kind("write" if files else "other")
            return
        if len(files) < 2:
            return
        dest, sources = files[-1], files[:-1]
        raw_dest = [a for a in argv if not a.startswith("-")][-1]
        for src in sources:
            dst = dest
            if raw_dest.endswith("/") or len(sources) > 1:
                dst = posixpath.normpath(posixpath.join(dest, posixpath.basename(src)))
            add_path(fx.writes, dst)
            add_path(fx.whole, dst)
            add_path(fx.deletes if name == "mv" else fx.reads, src)
            if src in self.texts:
                self.texts[dst] = self.texts[src]
        fx.add_kind("write")

    def _git(self, argv: list[str], cwd: str | None, fx: Effects) -> None:
        sub = next(
            (
                a
                for i, a in enumerate(argv)
                if i and not a.startswith("-") and argv[i - 1] not in ("-C", "-c")
            ),
            "",
        )
        if sub == "apply":
            for patch_file in self._files(argv[1:], cwd):
                self._patch_targets(self.texts.get(patch_file, ""), 1, cwd, fx)
            fx.add_kind("write")
        elif sub in ("checkout", "restore"):
            for f in self._checkout_paths(sub, argv[argv.index(sub) + 1 :], cwd):
                add_path(fx.writes, f)
            fx.add_kind("write" if fx.writes else "vcs")
        else:
            fx.add_kind("vcs")

    def _checkout_paths(self, sub: str, args: list[str], cwd: str | None) -> list[str]:
        """The files ``git checkout``/``git restore`` rewrites: what follows ``--`` when it is there,
        else the words after a checkout's tree-ish (``git checkout v2.9.0 a.py``), a word without a
        dot alone read as a branch. Why: the session record listed the tag ``v2.9.0`` among the files
        a task modified, from ``git checkout v2.9.0 -- astroid/modutils.py``."""
        if "--" in args:
            return self._files([sub, *args[args.index("--") + 1 :]], cwd)
        words = self._files([sub, *args], cwd)  # option values skipped (_OPT_WITH_VALUE)
        if sub == "checkout" and len(words) > 1:
            words = words[1:]
        return [w for w in words if "." in posixpath.basename(w) and not _VERSION_TAG.fullmatch(w)]

    def _patch(self, argv: list[str], cmd: SimpleCommand, cwd: str | None, fx: Effects) -> None:
        strip = next((int(a[2:]) for a in argv if re.fullmatch(r"-p\d", a)), 0)
        text = cmd.stdin_text or ""
        for op, target in cmd.redirects:
            if op == "<":
                text = self.texts.get(self.norm(target, cwd) or "", text)
        args = [f for f in self._files(argv, cwd) if not re.fullmatch(r"p?\d", f)]
        if "-i" in argv and args:
            text = self.texts.get(args[-1], text)
        elif args and not text:
            add_path(fx.writes, args[0])  # `patch FILE PATCHFILE`
        self._patch_targets(text, strip, cwd, fx)
        fx.add_kind("write")

    def _patch_targets(self, text: str, strip: int, cwd: str | None, fx: Effects) -> None:
        for m in _PATCH_TARGET.finditer(text):
            parts = m.group("path").strip().split("/")
            path = "/".join(parts[strip:]) if strip else m.group("path").strip()
            add_path(fx.writes, self.norm(path, cwd))

    def _python(self, argv: list[str], cmd: SimpleCommand, cwd: str | None, fx: Effects) -> None:
        i = 1
        while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-c", "-m", "-"):
            i += 2 if argv[i] in ("-W", "-X") else 1
        rest = argv[i:]
        if rest[:1] == ["-m"] and len(rest) > 1:
            module = rest[1]
            fx.add_kind(
                "test"
                if module in ("pytest", "unittest", "nose", "tox") or rest[1:3] == ["django", "test"]
                else "install"
                if module == "pip"
                else "run"
            )
        elif rest[:1] == ["-c"] and len(rest) > 1:
            self.code(rest[1], cwd, fx)
            fx.add_kind("run")
        elif rest and rest[0] != "-":
            script = self.norm(rest[0], cwd)
            if script:
                self.code(self.texts.get(script, ""), cwd, fx)
            base = posixpath.basename(rest[0])
            fx.add_kind(
                "test" if base in ("runtests.py", "manage.py") and "test" in " ".join(rest) else "run"
            )
        else:
            self.code(cmd.stdin_text or "", cwd, fx)
            fx.add_kind("run")

    def code(self, source: str, cwd: str | None, fx: Effects) -> None:
        """Add the files a Python source opens (see :mod:`pysource`) to ``fx``."""
        reads, writes, whole = file_uses(source)
        for raw in reads:
            add_path(fx.reads, self.norm(raw, cwd))
        for raw in writes:
            add_path(fx.writes, self.norm(raw, cwd))
        for raw in whole:
            add_path(fx.whole, self.norm(raw, cwd))
        if any(self.norm(raw, cwd) for raw in writes):
            fx.add_kind("write")
