"""Split a shell command line into simple commands, without running it.

Why our own splitter: agents send whole scripts as one ``bash`` call (``cd /repo && cat > f.py << 'EOF'``,
multi-line ``python -c "..."``, pipes), and ``shlex`` loses the separators (newlines, ``&&``) and knows no
heredocs. One compiled regex consumes leading blanks plus one whole token per step (a word with all its
quoted parts, an operator, a redirection), and a heredoc body is skipped with one search, which matters
because the estimator re-reads the session every few turns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PIECE = (
    r"'[^']*'"
    r'|"(?:[^"\\]|\\.)*"'
    r"|\$'(?:[^'\\]|\\.)*'"
    r"""|\$\((?:[^()'"]|'[^']*'|"(?:[^"\\]|\\.)*"|\((?:[^()]|\([^()]*\))*\))*\)"""
    r"|`[^`]*`"
    r"|\\."
    r"|[^\s'\"\\|&;()<>`$]+"
    r"|\$"
)
_TOKEN = re.compile(
    r"(?:[ \t]+|\\\r?\n)*(?:"
    r"(?P<nl>\r?\n)"
    r"|(?P<redir>&>>|&>|\d*(?:>>|>&|>\||>)|<<<|<<-|<<|<&|<>|\d*<)"
    r"|(?P<op>&&|\|\||;;|\|&|[|;&()])"
    r"|(?P<word>(?:" + _PIECE + r")+)"
    r"|(?P<any>.)"
    r"|$)",
    re.S,
)
_SPLIT_PIECES = re.compile(_PIECE, re.S)
_SKIP = frozenset(
    {"do", "then", "else", "elif", "if", "while", "until", "!", "{", "}", "time"}
    | {"sudo", "nohup", "command", "exec", "env", "nice"}
)


@dataclass(slots=True)
class SimpleCommand:
    """One command of a command line: its words, redirections, stdin text, and pipe position."""

    argv: list[str] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)
    stdin_text: str | None = None
    piped_in: bool = False


def _unquote(word: str) -> str:
    if "'" not in word and '"' not in word and "\\" not in word:
        return word
    out: list[str] = []
    for piece in _SPLIT_PIECES.findall(word):
        if piece.startswith("'"):
            out.append(piece[1:-1])
        elif piece.startswith('"'):
            out.append(re.sub(r"\\([\\\"$`\n])", r"\1", piece[1:-1]))
        elif piece.startswith("$'"):
            out.append(piece[2:-1])
        elif piece.startswith("\\"):
            out.append(piece[1:])
        else:
            out.append(piece)
    return "".join(out)


def _heredoc_end(text: str, pos: int, delim: str, strip_tabs: bool) -> tuple[int, int]:
    """Where the body starting at ``pos`` ends and where scanning resumes after its delimiter line."""
    tabs = r"\t*" if strip_tabs else ""
    found = re.compile(r"^" + tabs + re.escape(delim) + r"[ \t]*$", re.M).search(text, pos)
    if found is None:
        return len(text), len(text)
    resume = found.end()
    return found.start(), resume + 1 if text.startswith("\n", resume) else resume


def split_commands(text: str) -> list[SimpleCommand]:
    """The simple commands of ``text`` in order (control keywords and ``VAR=value`` prefixes kept)."""
    commands: list[SimpleCommand] = []
    current = SimpleCommand()
    pending_redir: str | None = None
    heredocs: list[tuple[SimpleCommand, str, bool]] = []
    pos, n = 0, len(text)

    def close(piped: bool) -> SimpleCommand:
        if current.argv or current.redirects or current.stdin_text is not None:
            commands.append(current)
        return SimpleCommand(piped_in=piped)

    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
        kind = m.lastgroup
        tok = m.group(kind) if kind else ""
        if kind == "word" or kind == "any":
            if pending_redir is None and tok.startswith("#") and kind == "word":
                eol = text.find("\n", pos)
                pos = n if eol < 0 else eol
                continue
            word = _unquote(tok)
            if pending_redir is None:
                current.argv.append(word)
            elif pending_redir in ("<<", "<<-"):
                heredocs.append((current, word, pending_redir == "<<-"))
            elif pending_redir == "<<<":
                current.stdin_text = word
            else:
                current.redirects.append((pending_redir, word))
            pending_redir = None
        elif kind == "redir":
            pending_redir = tok.lstrip("0123456789")
        elif kind == "op":
            current = close(tok in ("|", "|&"))
            pending_redir = None
        elif kind == "nl":
            current = close(False)
            pending_redir = None
            for command, delim, strip_tabs in heredocs:
                end, resume = _heredoc_end(text, pos, delim, strip_tabs)
                command.stdin_text = text[pos:end]
                pos = resume
            heredocs.clear()
    close(False)
    for command, _, _ in heredocs:
        command.stdin_text = ""
    return commands


def strip_prefixes(argv: list[str]) -> list[str]:
    """``argv`` without control keywords, ``VAR=value`` assignments and wrappers like ``timeout 60``."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in _SKIP or re.match(r"^[A-Za-z_]\w*=", word):
            i += 1
        elif word == "timeout":
            i += 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 2 if argv[i] in ("-s", "-k", "--signal", "--kill-after") else 1
            i += 1  # the duration
        else:
            break
    return argv[i:]
