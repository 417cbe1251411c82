"""What a search command searched for: the patterns of its ``grep``/``rg``/``ag``/``ack``/``git grep``.

Why: search results keep their match lines (DESIGN 4), and only the command says which lines of a
``grep -B5 -A5 NAME file`` output are the matches and which are context. The repeat pass folds lines
the model was already shown; without the pattern it folded the matches themselves when an earlier
file view had shown those lines, leaving ``[lightmem2 repeat: lines 2:26 ...]`` as the answer to the
search (measured on the swe traces in normal mode with ``benchmarks/frame_audit.py``: 77 of 1,229
searches had a match line behind a marker).

A pattern is read as a Python regular expression: a basic ``grep`` pattern (no ``-E``/``-P``) with
its ``\\|``, ``\\(``... spelled as extended ones first; ``-F``/``fgrep`` is a fixed string, ``-i`` and
``-w`` are honoured; one that does not compile is matched as the literal text. What cannot be read
(no search program, an unbalanced quote, patterns from a file) gives no pattern: the output is then
reduced as before, never worse.
"""

from __future__ import annotations

import json
import re

from .kinds import XARGS_VALUE_OPTIONS, ToolCall, kind_of_command
from .shell import split_commands, strip_prefixes

_PROGRAMS = {"grep", "egrep", "fgrep", "rg", "ag", "ack"}
_WITH_VALUE = {"-A", "-B", "-C", "-m", "-d", "-D", "-g", "-t", "-T", "-M", "-j", "--include", "--exclude"}
_WITH_VALUE |= {"--exclude-dir", "--glob", "--type", "--max-count", "--context", "--after-context"}
_WITH_VALUE |= {"--before-context", "--max-depth", "--color", "--colour"}
_PATTERN_OPTS = {"-e", "--regexp"}
_FILE_OPTS = {"-f", "--file"}
_BRE = ((r"\|", "|"), (r"\(", "("), (r"\)", ")"), (r"\+", "+"), (r"\?", "?"), (r"\{", "{"), (r"\}", "}"))


def _compile(pattern: str, fixed: bool, flags: int, words: bool, basic: bool = False) -> re.Pattern[str]:
    text = re.escape(pattern) if fixed else pattern
    if basic and not fixed:
        for bre, ere in _BRE:
            text = text.replace(bre, ere)
    if words:
        text = rf"\b(?:{text})\b"
    try:
        return re.compile(text, flags)
    except re.error:
        return re.compile(re.escape(pattern), flags)


def _from_argv(argv: list[str]) -> list[re.Pattern[str]]:
    """The patterns of one search program's words (``argv[0]`` is the program)."""
    name = argv[0].rsplit("/", 1)[-1]
    rest = argv[1:]
    if name == "git":
        if not rest or rest[0] != "grep":
            return []
        rest = rest[1:]
    fixed, flags, words = name == "fgrep", 0, False
    basic = name == "grep" or name == "git"  # egrep, rg, ag, ack read extended patterns
    found: list[str] = []
    positional: str | None = None
    i = 0
    while i < len(rest):
        word = rest[i]
        if word == "--":  # no options after it: the pattern, if none came yet, then files
            if positional is None and i + 1 < len(rest):
                positional = rest[i + 1]
            break
        if word in _PATTERN_OPTS and i + 1 < len(rest):
            found.append(rest[i + 1])
            i += 2
            continue
        if word.startswith("--regexp="):
            found.append(word.split("=", 1)[1])
        elif word in _FILE_OPTS:
            return []  # patterns read from a file: not known here
        elif word.startswith("-") and len(word) > 1:
            if word in _WITH_VALUE:
                i += 1
            elif not word.startswith("--"):
                letters = word[1:]
                basic = basic and not ("E" in letters or "P" in letters)
                fixed = fixed or "F" in letters
                words = words or "w" in letters
                flags |= re.IGNORECASE if "i" in letters else 0
                if letters[-1:] == "e" and i + 1 < len(rest):  # -ie PATTERN
                    found.append(rest[i + 1])
                    i += 1
            else:
                basic = basic and word not in ("--extended-regexp", "--perl-regexp")
                fixed = fixed or word == "--fixed-strings"
                words = words or word == "--word-regexp"
                flags |= re.IGNORECASE if word == "--ignore-case" else 0
        elif positional is None and not found:
            positional = word
        i += 1
    if not found and positional is not None:
        found = [positional]
    return [_compile(p, fixed, flags, words, basic) for p in found if p]


def search_patterns(call: ToolCall | None) -> list[re.Pattern[str]]:
    """The compiled patterns ``call`` searched for, when its output is search results
    (:func:`~.kinds.kind_of_command`): every search program of its command line, or a named search
    tool's ``pattern`` argument (Claude Code's ``Grep``); [] when none can be read."""
    if call is None or kind_of_command(call) != "search":
        return []
    if call.name.lower() in ("grep", "search"):
        try:
            args = json.loads(call.arguments)
        except ValueError:
            return []
        pattern = args.get("pattern") if isinstance(args, dict) else None
        flags = re.IGNORECASE if isinstance(args, dict) and args.get("-i") else 0
        return [_compile(pattern, False, flags, False)] if isinstance(pattern, str) and pattern else []
    out: list[re.Pattern[str]] = []
    for command in split_commands(call.command):
        argv = _searching(strip_prefixes(command.argv))
        if argv and argv[0].rsplit("/", 1)[-1] in _PROGRAMS | {"git"}:
            out.extend(_from_argv(argv))
    return out


_XARGS_WITH_VALUE = frozenset(f"-{c}" for c in XARGS_VALUE_OPTIONS)


def _searching(argv: list[str]) -> list[str]:
    """The words of the program that prints: ``xargs [options] grep ...`` runs ``grep ...``, and
    ``find ... -exec grep ... {} ;`` runs the ``grep`` between ``-exec`` and ``;``/``+``."""
    if argv and argv[0] == "xargs":
        i = 1
        while i < len(argv) and argv[i].startswith("-"):
            i += 2 if argv[i] in _XARGS_WITH_VALUE else 1
        return argv[i:]
    if argv and argv[0] == "find":
        for i, word in enumerate(argv):
            if word in ("-exec", "-execdir"):
                end = next((j for j in range(i + 1, len(argv)) if argv[j] in (";", "+", "\\;")), len(argv))
                return argv[i + 1 : end]
    return argv
