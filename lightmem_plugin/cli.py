"""``lightmem2`` command line: argument parsing only; each command lives in ``lightmem_plugin.commands``.

Exit codes: 0 ok, 2 bad usage or bad input (one line on stderr: what, the bad value, the fix), 1 an
internal failure.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from . import __version__
from .errors import LightMemError, UsageError

if TYPE_CHECKING:
    from .pipeline import LightMem


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line (UsageError) instead of a usage dump."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}; see '{self.prog} --help'")


def _doc(module: object) -> str:
    return (getattr(module, "__doc__", "") or "").strip()


def build_parser() -> argparse.ArgumentParser:
    """The full parser; also used to generate the CLI section of the README."""
    from .commands import (
        config_cmd,
        demo,
        doctor,
        export,
        hook_cmd,
        install_cmd,
        mode,
        recover,
        replay_cmd,
        report,
        resume,
        search,
        serve_cmd,
        status,
        visual,
    )

    p = _Parser(prog="lightmem2", description="Cache-stable, reduced context for long-running LLM agents.")
    p.add_argument("--version", action="version", version=f"lightmem2 {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def add(name: str, module: object) -> argparse.ArgumentParser:
        text = _doc(module)
        return sub.add_parser(name, help=text.splitlines()[0], description=text)

    st = add("status", status)
    st.add_argument("--session", metavar="ID")
    st.add_argument("--json", action="store_true")
    rp = add("report", report)
    group = rp.add_mutually_exclusive_group()
    group.add_argument("--session", metavar="ID")
    group.add_argument("--all", action="store_true")
    rp.add_argument("--json", action="store_true")
    dr = add("doctor", doctor)
    dr.add_argument("--json", action="store_true")
    dr.add_argument("--fix", action="store_true", help="rebuild the search index if missing or stale")
    vi = add("visual", visual)
    vi.add_argument("--session", metavar="ID")
    vi.add_argument("--out", metavar="DIR")
    vi.add_argument("--open", action="store_true")
    rs = add("resume", resume)
    rs.add_argument("--level", default="standard", choices=["critical", "standard", "full"])
    rs.add_argument("--session", metavar="ID")
    rs.add_argument("--at-turn", type=int, metavar="N")
    rs.add_argument("--trace", metavar="PATH")
    m = add("mode", mode)
    m.add_argument("value", nargs="?", metavar="conservative|normal|aggressive")
    r = add("recover", recover)
    r.add_argument("key", help="artifact key from a stub (32 hex chars)")
    r.add_argument("--lines", metavar="A:B", help="1-based inclusive line range")
    c = add("config", config_cmd)
    c.add_argument("action", choices=["path", "show", "validate", "secret-path"])
    rl = add("replay", replay_cmd)
    rl.add_argument("paths", nargs="+", metavar="PATH")
    rl.add_argument("--mode", default="normal", choices=replay_cmd.POLICIES)
    rl.add_argument("--provider", choices=["deepseek", "openai", "anthropic", "vllm"])
    rl.add_argument("--head", default="plain", choices=["plain", "volatile"])
    rl.add_argument("--dump-requests", metavar="DIR")
    rl.add_argument("--json", action="store_true")
    se = add("search", search)
    se.add_argument("query", metavar="QUERY")
    sg = se.add_mutually_exclusive_group()
    sg.add_argument("--session", metavar="ID")
    sg.add_argument("--all", action="store_true")
    se.add_argument("--regex", action="store_true")
    se.add_argument("--limit", type=int, default=10, metavar="N")
    se.add_argument("--json", action="store_true")
    ex = add("export", export)
    ex.add_argument("--format", required=True, choices=["json", "markdown", "canvas"])
    ex.add_argument("--session", metavar="ID")
    sv = add("serve", serve_cmd)
    sv.add_argument("--host")
    sv.add_argument("--port", type=int)
    sv.add_argument("--allow-remote", action="store_true")
    ins = add("install", install_cmd)
    ins.add_argument("host", choices=install_cmd.HOSTS)
    ins.add_argument("--uninstall", action="store_true")
    ins.add_argument("--project", metavar="DIR")
    hk = add("hook", hook_cmd)
    hk.add_argument("host", choices=["claude-code", "codex"])
    hk.add_argument("event")
    d = add("demo", demo)
    d.add_argument("--trace", help="a trace file to use instead of the bundled session")
    return p


def _dispatch(args: argparse.Namespace) -> tuple[str, int]:
    """Run the chosen command; returns its text and exit code."""
    from .commands import (
        config_cmd,
        demo,
        doctor,
        export,
        install_cmd,
        mode,
        recover,
        replay_cmd,
        report,
        resume,
        search,
        serve_cmd,
        visual,
    )
    from .config import data_dir
    from .eviction.record_store import RecordStore
    from .ledger import Ledger
    from .search_index import SearchIndex

    cmd = args.command
    if cmd == "doctor":
        text, ok = doctor.run(as_json=args.json)
        if args.fix:
            text = search.fix_index(_plugin().registry) + "\n" + text
        return text, 0 if ok else 1
    table: dict[str, Callable[[], str]] = {
        "status": lambda: _status(args),
        "report": lambda: report.run(Ledger.default(), args.session, args.all, args.json),
        "visual": lambda: visual.run(
            Ledger.default(), args.session, Path(args.out) if args.out else None, args.open
        ),
        "mode": lambda: mode.run(args.value),
        "resume": lambda: resume.run(
            RecordStore(data_dir() / "records"), args.level, args.session, args.at_turn, args.trace
        ),
        "recover": lambda: recover.run(_plugin().registry, args.key, args.lines),
        "config": lambda: config_cmd.run(args.action),
        "replay": lambda: replay_cmd.run(
            args.paths,
            args.mode,
            args.provider,
            args.head,
            args.dump_requests,
            args.json,
            sys.stderr.isatty(),
        ),
        "demo": lambda: demo.run(args.trace),
        "serve": lambda: serve_cmd.run(args.host, args.port, args.allow_remote),
        "search": lambda: search.run(
            SearchIndex.default(), args.query, args.session, args.all, args.regex, args.limit, args.json
        ),
        "export": lambda: export.run(args.format, args.session),
        "install": lambda: install_cmd.run(args.host, args.uninstall, args.project),
    }
    return table[cmd](), 0


def _status(args: argparse.Namespace) -> str:
    from .commands import status
    from .ledger import Ledger

    plugin = _plugin()
    return status.run(Ledger.default(), plugin.registry, plugin.config, args.session, args.json)


def _plugin() -> LightMem:
    from .pipeline import LightMem

    return LightMem.from_config()


def chat_argv(line: str) -> list[str]:
    """The CLI arguments of a chat line (``/lightmem2 mode x`` -> ``["mode", "x"]``; empty is status).

    ValueError when the quoting is broken.
    """
    import shlex

    text = line.strip()
    for prefix in ("/lightmem2", "lightmem2"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    return shlex.split(text) or ["status"]


def run_line(line: str) -> tuple[str, int]:
    """Run a chat command such as ``/lightmem2 mode aggressive``: (text to show, exit code).

    What hosts call for ``/lightmem2 ...`` typed in chat: the same code and text as the CLI; errors come
    back as their one-line message instead of raising, so the host always has something to show.
    """
    try:
        argv = chat_argv(line)
        if argv[0] in {"serve", "demo", "replay", "install", "hook"}:
            raise UsageError(f'"{argv[0]}" is not available in chat; run `lightmem2 {argv[0]}` in a terminal')
        return _dispatch(build_parser().parse_args(argv))
    except ValueError as err:
        return f"lightmem2: cannot parse {line.strip()!r}: {err}", 2
    except LightMemError as err:
        return f"lightmem2: {err}", err.exit_code
    except SystemExit as exit_:  # --help / --version print and exit inside argparse
        return "", int(exit_.code or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lightmem2`` console script."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["hook"]:
        # before argparse: a host reads exit code 2 as "blocking error", so no usage error may escape
        from .hooks import exit_with

        exit_with(*([*args_list[1:3], "", ""][:2]))
    try:
        args = build_parser().parse_args(argv)
        text, code = _dispatch(args)
    except LightMemError as err:
        print(f"lightmem2: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    if args.command == "recover":  # byte-exact: no newline added, undecodable bytes restored
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
        sys.stdout.buffer.flush()
    elif text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
