"""Redacts known credential patterns from text before it is persisted or logged (DESIGN I6).

Why only on persistence: the model already saw the text in its context; what we must not do is copy a
secret into files that outlive the session (artifacts, ledger, logs). Replacement is
``[REDACTED:<kind>]`` so a reader knows what was there, and it is deterministic so archive keys stay
stable. The patterns live in :mod:`.redaction_rules`; every one is linear-time, and a rule runs only
when one of its needles occurs in the text, so ordinary output costs one ``str.lower`` and a few
substring searches (about 0.1 us per char; 0.4 us per char for text built to hit every rule).

Why views: a tool shows a file as it shows it, not as the file is (a line number or ``path:12:``
before each line, a diff's ``+``, a JSON string's escapes), and rules that read a line's start or a
block of lines then missed the secret (19 of the 120 sample kinds reached ``search.sqlite3`` so, the
base64 Kubernetes secret of issue #39 among them). When a text has such a form the rules run first on
a view of it with the decoration taken off, and the characters their secrets came from are replaced
in the text (:mod:`.redaction_views`); plain text pays a few counts more.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..errors import ConfigError
from .redaction_rules import ALT_KINDS, CHECKS, INNER, KINDS, RULES, SCHEME_WINDOW
from .redaction_views import joined, line_pieces, replace_spans, views

__all__ = ["KINDS", "LogRedactor", "Redactor", "Rule", "builtin_rules", "install_log_redaction"]

BINARY_SNIFF = 8192
"""Bytes with a NUL in this prefix are binary (images, archives) and are stored unchanged."""


@dataclass(frozen=True)
class Rule:
    """One credential pattern: its kind, compiled regex and the needles that gate it.

    ``check`` (given the match and the secret) must also pass, else the match is left as it is;
    ``inner`` makes the secret group a block in which each match's group ``v`` is replaced.
    """

    kind: str
    regex: re.Pattern[str]
    needles: tuple[str, ...]
    alt: tuple[str, re.Pattern[str]] | None = None
    alt_off: bool = False
    check: Callable[[re.Match[str], str], bool] | None = None
    inner: re.Pattern[str] | None = None

    def spans(self, m: re.Match[str]) -> list[tuple[int, int, str]]:
        """Where in ``m.string`` the secret(s) are that :meth:`replacer` would replace, with the tag it
        would put there (none when it would keep the match)."""
        tag = f"[REDACTED:{self.kind}]"
        alt = self.alt
        if alt is not None and alt[1].search(m.string, max(0, m.start() - SCHEME_WINDOW), m.start()):
            if self.alt_off:
                return []
            tag = f"[REDACTED:{alt[0]}]"
        for name in _secret_groups(self.regex):
            start = m.start(name)
            if start >= 0:
                secret = m.group(name)
                if self.check is not None and not self.check(m, secret):
                    return []
                if self.inner is not None:
                    return [
                        (start + v.start("v"), start + v.end("v"), tag) for v in self.inner.finditer(secret)
                    ]
                return [(*m.span(name), tag)]
        return [(*m.span(), tag)]

    def replacer(self) -> Callable[[re.Match[str]], str]:
        """Replaces the secret group (or the whole match) with the rule's tag."""
        tag = f"[REDACTED:{self.kind}]"
        names = _secret_groups(self.regex)
        alt, check, inner = self.alt, self.check, self.inner

        def repl(m: re.Match[str]) -> str:
            base = m.start()
            mark = tag
            if alt is not None and alt[1].search(m.string, max(0, base - SCHEME_WINDOW), base):
                if self.alt_off:
                    return m.group(0)
                mark = f"[REDACTED:{alt[0]}]"
            for name in names:
                start, end = m.span(name)
                if start >= 0:
                    whole = m.group(0)
                    secret = whole[start - base : end - base]
                    if check is not None and not check(m, secret):
                        return whole
                    if inner is not None:
                        secret = inner.sub(lambda v: v.group(0)[: v.start("v") - v.start()] + mark, secret)
                    else:
                        secret = mark
                    return whole[: start - base] + secret + whole[end - base :]
            return mark

        return repl


def _secret_groups(regex: re.Pattern[str]) -> list[str]:
    """The groups of ``regex`` that hold the secret (``s``, ``s1``, ``s2``, ...)."""
    return [n for n in regex.groupindex if n == "s" or (n[0] == "s" and n[1:].isdigit())]


def builtin_rules(exclude: Iterable[str] = ()) -> list[Rule]:
    """The built-in rules, less the kinds in ``exclude``."""
    skip = set(exclude)
    return [
        Rule(
            kind,
            re.compile(pat),
            needles,
            ALT_KINDS.get(kind),
            ALT_KINDS.get(kind, ("",))[0] in skip,
            CHECKS.get(kind),
            re.compile(INNER[kind]) if kind in INNER else None,
        )
        for kind, pat, needles in RULES
        if kind not in skip
    ]


def _needle_parents(needles: set[str]) -> dict[str, str]:
    """For each needle, the longest other needle inside it: when that one is absent, so is the needle."""
    parents: dict[str, str] = {}
    for needle in needles:
        inner = [n for n in needles if n != needle and n in needle]
        if inner:
            parents[needle] = max(inner, key=lambda n: (len(n), n))
    return parents


class Redactor:
    """Applies the built-in patterns plus user ``extraPatterns`` (kind ``custom``).

    ``extra_patterns`` are the user's own regexes: they run on every text (no needles) and their
    running time is the user's to keep linear. ``exclude_kinds`` turns built-in kinds off.
    """

    def __init__(
        self, enabled: bool = True, extra_patterns: Iterable[str] = (), exclude_kinds: Iterable[str] = ()
    ) -> None:
        self.enabled = enabled
        unknown = sorted(set(exclude_kinds) - set(KINDS))
        if unknown:
            raise ConfigError(
                f'unknown redaction kind "{unknown[0]}"; known kinds: {", ".join(KINDS)}; fix the name'
            )
        rules = builtin_rules(exclude_kinds)
        for i, pat in enumerate(extra_patterns):
            try:
                rules.append(Rule("custom", re.compile(pat), ()))
            except re.error as err:
                raise ConfigError(
                    f'redaction.extraPatterns[{i}] "{pat[:80]}" is not a valid regex ({err}); fix or remove it'
                ) from None
        self._rules = [(rule, rule.replacer()) for rule in rules]
        self._parents = _needle_parents({n for rule in rules for n in rule.needles})

    def _has(self, needle: str, lowered: str, seen: dict[str, bool]) -> bool:
        """Whether ``needle`` occurs; a needle whose shorter part (its parent) is absent is absent."""
        found = seen.get(needle)
        if found is None:
            parent = self._parents.get(needle)
            found = (parent is None or self._has(parent, lowered, seen)) and needle in lowered
            seen[needle] = found
        return found

    def redact(self, text: str) -> str:
        """``text`` with every credential match replaced by ``[REDACTED:<kind>]``."""
        if not self.enabled or not text:
            return text
        text = self._in_views(text)
        lowered = text.lower()
        seen: dict[str, bool] = {}
        for rule, repl in self._rules:
            if rule.needles and not any(self._has(n, lowered, seen) for n in rule.needles):
                continue
            text = rule.regex.sub(repl, text)
        return text

    def _in_views(self, text: str) -> str:
        """``text`` with every secret a rule finds in one of its views (:mod:`.redaction_views`: line
        numbers, ``path:N:`` prefixes, a diff's markers or JSON escapes taken off) replaced by the tag,
        where that secret stands in ``text``; ``text`` itself when it has no such form."""
        spans: list[tuple[int, int, str]] = []
        for view in views(text):
            lowered = view.text.lower()
            seen: dict[str, bool] = {}
            for rule, _repl in self._rules:
                if rule.needles and not any(self._has(n, lowered, seen) for n in rule.needles):
                    continue
                for m in rule.regex.finditer(view.text):
                    for start, end, tag in rule.spans(m):
                        found = [view.span(*piece) for piece in line_pieces(view.text, start, end)]
                        spans += [(s, e, tag) for s, e in joined(text, found)]
        return replace_spans(text, spans) if spans else text

    def redact_bytes(self, data: bytes) -> bytes:
        """Redact text; binary data (a NUL in the first 8 KiB: images, archives) passes unchanged.

        Text that is not valid UTF-8 (a lone surrogate, a stray Latin-1 byte) is still redacted: bad
        bytes are carried through ``surrogateescape`` and come back out exactly as they went in.
        """
        if not self.enabled or b"\x00" in data[:BINARY_SNIFF]:
            return data
        text = data.decode("utf-8", "surrogateescape")
        out = self.redact(text)
        return data if out == text else out.encode("utf-8", "surrogateescape")


LOGGERS = ("lightmem2", "httpx", "httpcore", "uvicorn", "uvicorn.error", "uvicorn.access")
"""Loggers that can see request URLs or headers: the proxy, its HTTP client and its server."""


class LogRedactor(logging.Filter):
    """A logging filter that redacts credentials from each record's message (and never drops one)."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redactor = redactor or Redactor()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the logging module's to report, not ours
            return True
        clean = self.redactor.redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def install_log_redaction(redactor: Redactor | None = None, names: Iterable[str] = LOGGERS) -> LogRedactor:
    """Attach one :class:`LogRedactor` to each named logger (idempotent); returns the filter."""
    filt = LogRedactor(redactor)
    for name in names:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, LogRedactor)]:
            logger.removeFilter(old)
        logger.addFilter(filt)
    return filt
