"""Finding volatile values in prompt text, and putting real values back into what the model writes.

Why a module of its own: detection is pure text work (regular expressions, no session state), so it
is tested apart from the stateful :class:`~lightmem_plugin.prefix.stabilizer.Stabilizer` and kept cheap.
Everything here is deterministic: patterns are built from sorted inputs and scanned left to right.

Two families of values (DESIGN section 4):

- *session* values stay the same for a whole session (working dir, home dir, session and agent ids,
  UUIDs); they are named by value, so a value keeps its placeholder forever;
- *per-call* values change on every call (timestamps, dates, runtime counters such as "tokens used:
  12345", long digit runs like epoch milliseconds); they are named by position in the head, so the
  n-th one always gets the same placeholder whatever its value. Runtime counters use the
  ``LONG_NUMBER`` placeholder family (the configured names have no other numeric slot).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

CALL_KINDS = ("TIMESTAMP", "CURRENT_DATE", "LONG_NUMBER")  # the rest of PLACEHOLDERS are session kinds

_WEEKDAY = (
    r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|Mon|Tues|Tue|Wed|Thurs|Thu|Fri|Sat|Sun)"
)
_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?"
)
_WD = rf"(?:\b{_WEEKDAY},?\s+)?"
_ORD = r"(?:st|nd|rd|th)?"
_AMPM = r"(?:\s?(?:[AaPp]\.[Mm]\.|[AaPp][Mm]\b))"
_TIME = rf"\d{{1,2}}:\d{{2}}(?::\d{{2}}(?:[.,]\d{{1,9}})?)?{_AMPM}?"
_ZONE = (
    r"(?:\s?(?:Z|[+-]\d{2}:?\d{2})(?!\w)|\s?(?:UTC|GMT)(?:[+-]\d{1,2}(?::?\d{2})?)?(?!\w)"
    r"|\s[A-Z]{1,3}[DS]?T(?!\w))?"
)
_THEN = r"(?:,?\s+(?:at\s+)?|\s+[—–-]\s+)"  # between a written date and its time
_TIMESTAMPS = (
    rf"{_WD}\d{{4}}-\d{{2}}-\d{{2}}[T ]{_TIME}{_ZONE}",
    rf"{_WD}\d{{4}}/\d{{2}}/\d{{2}}[T ,]\s*{_TIME}{_ZONE}",
    rf"{_WD}\d{{1,2}}[/.]\d{{1,2}}[/.]\d{{4}},?\s+{_TIME}{_ZONE}",
    rf"\b{_WEEKDAY}\s+{_MONTH}\s+\d{{1,2}}\s+\d{{1,2}}:\d{{2}}:\d{{2}}(?:\s+[A-Z]{{2,5}})?\s+\d{{4}}",
    rf"{_WD}\d{{1,2}}{_ORD}\s+{_MONTH},?\s+\d{{4}}{_THEN}{_TIME}{_ZONE}",
    rf"{_WD}\b{_MONTH}\s+\d{{1,2}}{_ORD},?\s+\d{{4}}{_THEN}{_TIME}{_ZONE}",
    rf"\d{{1,2}}:\d{{2}}:\d{{2}}(?:[.,]\d{{1,9}})?{_AMPM}?{_ZONE}",
    rf"\d{{1,2}}:\d{{2}}{_AMPM}",
)
_DATES = (
    rf"{_WD}\d{{4}}-\d{{2}}-\d{{2}}",
    rf"{_WD}\d{{4}}/\d{{2}}/\d{{2}}",
    rf"{_WD}\d{{1,2}}[/.]\d{{1,2}}[/.]\d{{4}}",
    rf"{_WD}\d{{1,2}}{_ORD}\s+(?:of\s+)?{_MONTH},?\s+\d{{4}}",
    rf"{_WD}\b{_MONTH}\s+\d{{1,2}}{_ORD},?\s+\d{{4}}",
)
_STAT_WORDS = (
    r"tokens?|calls?|turns?|steps?|requests?|iterations?|messages?|cost|usage|elapsed|uptime|runtime|duration"
)
_STAT_LABEL = (
    rf"(?i:\b(?:{_STAT_WORDS})\b(?:[ \t_-]+[a-z]+){{0,3}}[ \t]*(?:[:=#]|\bis\b)[ \t]*\$?"
    r"|\b(?:call|turn|step|request|iteration|run)[ \t]*#[ \t]*"
    r"|\b(?:call|turn)[ \t]+(?=\d+(?:[ \t]*(?:,|;|\)|$))))"
)
_TIME_LABEL = r"(?i:\b(?:current\s+|local\s+)?time\b)[ \t]*(?:is\b[ \t]*)?[:=]?[ \t]*"
_UUID = r"(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])"

_PATH = r"(?:/|~/|[A-Za-z]:[\\/])[^\s`\"'<>;,|()\[\]{}]*"
_SEP = r"[ \t]*(?:is\b[ \t]*:?|[:=])[ \t]*[`\"'(]?"
_WORKDIR_RES = (
    re.compile(
        r"(?i:\b(?:primary\s+|current\s+)?(?:working\s+dir(?:ectory)?|work\s*dir|cwd|workspace(?:\s+dir(?:ectory)?)?"
        rf"|project\s+(?:root|dir(?:ectory)?))\b){_SEP}(?P<v>{_PATH})"
    ),
    re.compile(rf"<cwd>\s*(?P<v>{_PATH})\s*</cwd>"),
)
_HOME_RE = re.compile(
    rf"(?:\$HOME\b|(?i:\b(?:home\s+dir(?:ectory)?|user\s+home|home)\b)){_SEP}(?P<v>{_PATH})"
)
_HOME_IN_PATH = re.compile(
    r"(?<![\w.-])(/home/[\w.-]+|/Users/(?!Shared\b)[\w.-]+|/root|[A-Za-z]:\\Users\\[\w.-]+)(?![\w.-])"
)
_ID_RE = re.compile(
    r"(?i:\b(?P<k>session|conversation|thread|agent)[ \t_-]?id\b)[\"']?"
    rf"{_SEP}(?P<v>[A-Za-z0-9][A-Za-z0-9._:-]{{5,}}[A-Za-z0-9])"
)
_HOST_BLOCK = re.compile(r"<(system-reminder|environment_context|env|environment)>(.*?)</\1>", re.S)
_DIGIT = re.compile(r"[0-9]")
_LABELLED = {"STAT": "LONG_NUMBER", "TIME": "TIMESTAMP"}  # value groups that follow a kept label
_SUFFIX = re.compile(r"_[0-9]+$")
PLACEHOLDER_RE = re.compile(r"<([A-Z][A-Z_]*[A-Z](?:_[0-9]+)?)>")
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.S)


def placeholder_name(kind: str, n: int) -> str:
    """Name of the ``n``-th (1-based) placeholder of ``kind``: ``UUID``, ``UUID_2``, ..."""
    return kind if n == 1 else f"{kind}_{n}"


def host_blocks(text: str) -> list[str]:
    """``text`` cut into ``[outside, inside, outside, ..., outside]`` around host context blocks
    (``<system-reminder>``, ``<environment_context>``, ``<env>``, ``<environment>``).

    In a user message only the inside pieces are scanned: the user's own words (a task statement
    quoting a date or a traceback path) are content, not volatile environment.
    """
    pieces: list[str] = []
    pos = 0
    for m in _HOST_BLOCK.finditer(text):
        pieces += (text[pos : m.start(2)], m[2])
        pos = m.end(2)
    pieces.append(text[pos:])
    return pieces


def kind_of(name: str) -> str:
    """The kind of a placeholder name: ``UUID_2`` -> ``UUID``."""
    return _SUFFIX.sub("", name)


def render_values(prefix: str, pairs: Iterable[tuple[str, str]]) -> str:
    """A values block: ``PREFIX<NAME>=value; <NAME_2>=value]`` (values never hold ``;`` or newlines)."""
    return prefix + "; ".join(f"<{name}>={value}" for name, value in pairs) + "]"


def _clean_path(raw: str) -> str | None:
    path = raw.rstrip(".:").rstrip("/\\")
    return path if len(path) >= 2 else None


def learn_values(line: str, enabled: Iterable[str]) -> list[tuple[str, str]]:
    """Session values named explicitly in ``line``: ``(kind, value)`` in a fixed order, no duplicates.

    Working and home dirs come from labelled text ("Working directory: /x", ``<cwd>/x</cwd>``,
    "HOME=/home/a"); a home dir is also inferred from a work dir under ``/home/NAME``,
    ``/Users/NAME`` or ``/root``. Ids need a label ("session id: ...") and at least 8 characters
    with a digit, so a word like "main" is never taken. Cheap substring checks skip the regexes
    on lines that cannot match.
    """
    on = set(enabled)
    low = line.lower()
    found: list[tuple[str, str]] = []

    def add(kind: str, value: str | None) -> None:
        if value is not None and kind in on and all(v != value for _, v in found):
            found.append((kind, value))

    workdirs: list[str | None] = []
    if any(word in low for word in ("dir", "cwd", "workspace", "project")):
        workdirs = [_clean_path(m["v"]) for rx in _WORKDIR_RES for m in rx.finditer(line)]
    for wd in workdirs:
        add("WORKDIR", wd)
    if "home" in low:
        for m in _HOME_RE.finditer(line):
            add("HOME", _clean_path(m["v"]))
    for wd in workdirs:
        add("HOME", home_in_text(wd or "", anchored=True))
    if "id" in low:
        for m in _ID_RE.finditer(line):
            value = m["v"]
            if len(value) >= 8 and any(c.isdigit() for c in value):
                add("AGENT_ID" if m["k"].lower() == "agent" else "SESSION_ID", value)
    return found


def home_in_text(text: str, *, anchored: bool = False) -> str | None:
    """The first home-like dir (``/home/NAME``, ``/Users/NAME``, ``/root``, ``C:\\Users\\NAME``)
    in ``text``, or at its start when ``anchored``."""
    if not anchored and not any(root in text for root in ("/home/", "/Users/", "/root", ":\\Users\\")):
        return None
    m = _HOME_IN_PATH.match(text) if anchored else _HOME_IN_PATH.search(text)
    return m[1] if m else None


@lru_cache(maxsize=64)
def detector(enabled: frozenset[str], literals: tuple[str, ...]) -> re.Pattern[str]:
    """One left-to-right pattern for everything to replace; ``literals`` are known session values.

    Alternatives are ordered so that at one position the more specific wins: known values (longest
    first), UUIDs, timestamps, dates, runtime counters, long digit runs.
    """
    alts: list[str] = []
    if literals:
        lits = "|".join(re.escape(v) for v in sorted(literals, key=lambda v: (-len(v), v)))
        alts.append(rf"(?<![\w.-])(?P<lit>{lits})(?![\w-]|\.\w)")
    if "UUID" in enabled:
        alts.append(rf"(?=[0-9a-fA-F]{{8}}-)(?P<UUID>{_UUID})")
    if "TIMESTAMP" in enabled:
        alts.append(rf"(?<![\w:.])(?=[0-9A-Z])(?P<TIMESTAMP>{'|'.join(_TIMESTAMPS)})(?![\d:])")
        alts.append(rf"(?P<time_label>{_TIME_LABEL})(?P<TIME>{_TIME})(?![\d:])")
    if "CURRENT_DATE" in enabled:
        alts.append(rf"(?<![\w./-])(?=[0-9A-Z])(?P<CURRENT_DATE>{'|'.join(_DATES)})(?![\d/-]|\.\d)")
    if "LONG_NUMBER" in enabled:
        alts.append(
            rf"(?P<stat_label>{_STAT_LABEL})(?P<STAT>\d+(?:[.,]\d+)*)(?![.,]\d)(?=[A-Za-z%]{{0,3}}(?!\w))"
        )
        alts.append(r"(?<![\w.])(?P<LONG_NUMBER>\d{10,}(?:\.\d+)?)(?!\w|\.\d)")
    # every alternative starts after a non-word character, and most check their first character
    # before anything else: inside words and at lowercase words the scan fails in a step or two
    return re.compile(r"(?<!\w)(?:" + "|".join(alts) + ")" if alts else r"(?!)")


@dataclass(frozen=True)
class LineScan:
    """One line cut at its volatile values: ``pieces`` around ``matches`` (kind, value)."""

    pieces: tuple[str, ...]
    matches: tuple[tuple[str, str], ...] = ()


def scan_line(line: str, pattern: re.Pattern[str], literals: tuple[str, ...]) -> LineScan:
    """Find the values to replace in one line (no digit and no known value: nothing to find)."""
    if not _DIGIT.search(line) and not any(v in line for v in literals):
        return LineScan((line,))
    pieces: list[str] = []
    matches: list[tuple[str, str]] = []
    pos = 0
    for m in pattern.finditer(line):
        kind = m.lastgroup or ""
        pieces.append(line[pos : m.start(kind)])
        matches.append((_LABELLED.get(kind, kind), m[kind]))
        pos = m.end(kind)
    pieces.append(line[pos:])
    return LineScan(tuple(pieces), tuple(matches))


@dataclass
class Scan:
    """Result of stabilising the head texts of one call."""

    texts: list[str] = field(default_factory=list)
    session_names: list[str] = field(default_factory=list)  # used, first appearance first, each once
    per_call: list[tuple[str, str]] = field(default_factory=list)  # (name, this call's value), in order


def scan_texts(
    texts: Iterable[str], line_scan: Callable[[str], LineScan], name_of: Callable[[str, str], str]
) -> Scan:
    """Replace the values that ``line_scan`` finds in ``texts`` by placeholders.

    ``name_of(kind, value)`` names a session value (the caller keeps the value -> name map);
    per-call values are numbered here, by position, across all texts of the head.
    """
    scan = Scan()
    counts = dict.fromkeys(CALL_KINDS, 0)
    for text in texts:
        lines = text.split("\n")
        for k, line in enumerate(lines):
            cut = line_scan(line)
            if not cut.matches:
                continue
            out = [cut.pieces[0]]
            for (kind, value), piece in zip(cut.matches, cut.pieces[1:], strict=True):
                if kind in CALL_KINDS:
                    counts[kind] += 1
                    name = placeholder_name(kind, counts[kind])
                    scan.per_call.append((name, value))
                else:
                    name = name_of(kind, value)
                    if name not in scan.session_names:
                        scan.session_names.append(name)
                out += (f"<{name}>", piece)
            lines[k] = "".join(out)
        scan.texts.append("\n".join(lines))
    return scan


def restore_text(text: str, values: Mapping[str, str]) -> str:
    """``text`` with every known placeholder replaced by its value; unknown ones stay as written."""
    if "<" not in text or not values:
        return text
    return PLACEHOLDER_RE.sub(lambda m: values.get(m[1], m[0]), text)


def restore_json(text: str, values: Mapping[str, str]) -> str:
    """Like :func:`restore_text` for JSON text: inside strings a value is JSON-escaped.

    Only placeholders change; every other byte stays as the model wrote it (no re-serialising).
    Unterminated strings (a partial stream) are handled as strings.
    """
    if "<" not in text or not values:
        return text

    def in_string(m: re.Match[str]) -> str:
        name = m[1]
        return json.dumps(values[name], ensure_ascii=False)[1:-1] if name in values else m[0]

    out: list[str] = []
    pos = 0
    for s in _JSON_STRING.finditer(text):
        out.append(restore_text(text[pos : s.start()], values))
        out.append(PLACEHOLDER_RE.sub(in_string, s[0]))
        pos = s.end()
    out.append(restore_text(text[pos:], values))
    return "".join(out)
