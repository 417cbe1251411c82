"""HTML slimming: a web page becomes the text a reader would see, with headings, lists and links.

Why so careful about *when*: tool output is full of angle brackets that are not HTML
(``<class 'bytes'>``, ``wrapt<1.14,>=1.11``, XML, generics, shell redirects). Rewriting those is
silent corruption. So this pass only runs on a document: it starts (after at most a short preamble
such as HTTP headers) with a doctype, ``<html>``, ``<head>`` or ``<body>``, or it is dense with known
HTML tags; template sources (Jinja/Django/ERB/PHP) are left alone because an agent that reads one
is about to edit its markup. The original is archived by the caller, so the markup is recoverable.
"""

from __future__ import annotations

import re

from lxml import etree
from lxml import html as lxml_html

from .spec import PassSpec
from .work import Work

_DOC_START_RE = re.compile(r"^[ \t]*<(?:!doctype\s+html|html|head|body)(?=[\s>])", re.I | re.M)
_DOC_END_RE = re.compile(r"</html\s*>", re.I)
_TEMPLATE_RE = re.compile(r"\{%|\{\{|<%|<\?php")
_TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)(?=[\s/>])[^<>]{0,400}>")
_HIDDEN_STYLE_RE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_SPACE_RE = re.compile(r"[ \t\r\f\v\u00a0]+")


def _words(names: str) -> frozenset[str]:
    return frozenset(names.split())


MAX_PREAMBLE = 600
MAX_TRAILER = 600
MAX_HTML_CHARS = 8_000_000
DENSITY_SAMPLE = 200_000

KNOWN_TAGS = _words(
    "a abbr article aside b blockquote body br button caption code dd details div dl dt em fieldset "
    "figcaption figure footer form h1 h2 h3 h4 h5 h6 head header hr html i iframe img input label "
    "legend li link main meta nav noscript ol optgroup option p pre script section select small span "
    "strong style sub summary sup svg table tbody td template textarea tfoot th thead title tr u ul"
)
_DROP_TAGS = _words(
    "script style noscript template iframe object embed svg canvas head link meta button select textarea"
)
_BLOCK_TAGS = _words(
    "address article aside blockquote body caption dd details div dl dt fieldset figcaption figure "
    "footer form h1 h2 h3 h4 h5 h6 header hr li main nav ol p pre section summary table tbody tfoot "
    "thead tr ul title"
)


def _dense_with_tags(text: str) -> bool:
    """True when known HTML tags make up a large share of the text (a page without a doctype)."""
    sample = text[:DENSITY_SAMPLE]
    known = 0
    closing = 0
    names: set[str] = set()
    tag_chars = 0
    first: re.Match[str] | None = None
    for m in _TAG_RE.finditer(sample):
        name = m.group(2).lower()
        if name in KNOWN_TAGS:
            first = first or m
            known += 1
            tag_chars += m.end() - m.start()
            names.add(name)
            closing += m.group(1) == "/"
    if not (known >= 20 and len(names) >= 5 and closing * 4 >= known and tag_chars * 5 >= len(sample)):
        return False
    # markup from the start of a line, after at most a short preamble: a test run that prints a page
    # inside an assertion message (``left:  "<html lang=\\"en\\">...``) is a log, and its own lines
    # are what the agent reads
    if first is None or first.start() > MAX_PREAMBLE:
        return False
    line_start = sample.rfind("\n", 0, first.start()) + 1
    return not sample[line_start : first.start()].strip()


def document_span(text: str) -> tuple[int, int] | None:
    """(start, end) of the HTML document inside ``text``, or None when ``text`` is not a page.

    A short preamble (HTTP headers, a tool's envelope) and trailer may surround the document; they
    are kept verbatim by :func:`slim`.
    """
    if len(text) > MAX_HTML_CHARS or _TEMPLATE_RE.search(text):
        return None
    m = _DOC_START_RE.search(text, 0, MAX_PREAMBLE + 64)
    if m is not None and m.start() <= MAX_PREAMBLE:
        start = m.start()
        end = len(text)  # no </html> at all: a page cut short, e.g. by `| head`
        for end_match in _DOC_END_RE.finditer(text, start):
            end = end_match.end()
        if len(text) - end > MAX_TRAILER:
            return None  # a page followed by much more text: a source file holding a page, say
        return start, end
    if _dense_with_tags(text):
        return 0, len(text)
    return None


def _hidden(el: etree._Element) -> bool:
    attrib = el.attrib
    if "hidden" in attrib or attrib.get("aria-hidden", "").lower() == "true":
        return True
    if el.tag == "input" and attrib.get("type", "").lower() == "hidden":
        return True
    return bool(_HIDDEN_STYLE_RE.search(attrib.get("style", "")))


_PRE_LINE = "\x01"
"""Marks a line break inside <pre>, whose indentation must survive normalisation."""


def _inline(text: str, pre: bool) -> str:
    if pre:
        return text.replace("\n", "\n" + _PRE_LINE)
    return _SPACE_RE.sub(" ", text.replace("\n", " "))


def _text_of(root: etree._Element) -> list[str]:
    """Readable lines of a cleaned tree: block breaks, ``#`` headings, ``-`` list items, links."""
    out: list[str] = []
    pre = 0
    for event, el in etree.iterwalk(root, events=("start", "end")):
        tag = el.tag.lower() if isinstance(el.tag, str) else ""
        if event == "start":
            if tag in _BLOCK_TAGS or tag == "br":
                out.append("\n")
            if len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
                out.append("#" * int(tag[1]) + " ")
            elif tag == "li":
                out.append("- ")
            elif tag in ("td", "th"):
                out.append(" | ")
            elif tag == "img" and el.get("alt"):
                out.append(f"[image: {el.get('alt')}]")
            if tag == "pre":
                pre += 1
            if el.text:
                out.append(_inline(el.text, pre > 0))
            continue
        if tag == "a":
            href = (el.get("href") or "").strip()
            label = "".join(el.itertext()).strip()
            if href and not href.startswith(("#", "javascript:")) and href != label:
                out.append(f" ({href})")
        if tag == "pre":
            pre -= 1
        if tag in _BLOCK_TAGS:
            out.append("\n")
        if el.tail:
            out.append(_inline(el.tail, pre > 0))
    return out


def _normalise(chunks: list[str]) -> list[str]:
    """Non-empty lines only (a blank line before each heading), cell separators tidied."""
    lines: list[str] = []
    for raw in "".join(chunks).split("\n"):
        if raw.startswith(_PRE_LINE):
            line = raw.replace(_PRE_LINE, "").rstrip()
        else:
            line = raw.replace(_PRE_LINE, "").strip()
            if line.startswith("| "):
                line = line[2:]
        if not line.strip():
            continue
        if line.startswith("#") and lines:
            lines.append("")
        lines.append(line)
    return lines


def slim(text: str) -> str | None:
    """The page in ``text`` as readable text, preamble and trailer kept verbatim; None if not a page.

    Drops scripts, styles, comments, forms' widgets, the head (except the title) and hidden nodes.
    Never raises: anything lxml cannot read yields None and the caller keeps the input.
    """
    span = document_span(text)
    if span is None:
        return None
    start, end = span
    try:
        parser = lxml_html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)
        root = lxml_html.document_fromstring(text[start:end].encode("utf-8", "replace"), parser=parser)
        title = (root.findtext(".//title") or "").strip()
        doomed = [
            el
            for el in root.iter()
            if isinstance(el.tag, str) and (el.tag.lower() in _DROP_TAGS or _hidden(el))
        ]
        for el in doomed:
            if el.getparent() is not None:
                el.drop_tree()
        lines = _normalise(_text_of(root))
    except (etree.LxmlError, ValueError, RecursionError):
        return None
    head = [f"# {_SPACE_RE.sub(' ', title)}"] if title else []
    body = "\n".join(head + lines)
    return text[:start] + body + ("\n" if end < len(text) else "") + text[end:].lstrip("\n")


WHAT = "chars of HTML"


def clean_work(work: Work) -> Work | None:
    """The page's readable text as the new work text (line origins are lost), or None.

    Not for a file view (an agent that ``cat``s or reads an HTML file is about to edit its markup),
    nor for a test run or a build log that prints a page (the log's own lines are what it acts on)."""
    if work.kind in ("file_view", "test_run", "build_log"):
        return None
    text = slim("\n".join(work.lines))
    return None if text is None else work.derived(text.splitlines(), None, None, WHAT)


PASS = PassSpec("html", "clean", True, "an HTML document becomes the text a reader sees", clean_work, WHAT)
