from __future__ import annotations

import pytest
from crossproc import SEEDS, outputs
from hypothesis import given
from hypothesis import strategies as st

from lightmem_plugin.reduction.html import document_span, slim

PAGE = (
    "<!DOCTYPE html>\n<html lang='en'><head><title>Widget 2.0 — release notes</title>\n"
    "<meta charset='utf-8'><link rel='stylesheet' href='/site.css'>\n"
    "<style>body { font: 14px sans-serif } .ad { color: red }</style>\n"
    "<script>window.dataLayer = [{'event': 'pageview'}]; if (a < b && c > d) { track(); }</script>\n"
    "</head>\n<body>\n<!-- build 8412, do not edit -->\n"
    "<nav><ul><li><a href='/'>Home</a></li><li><a href='/docs/'>Docs</a></li></ul></nav>\n"
    "<div hidden>hidden by attribute</div><div style='display: none'>hidden by style</div>\n"
    "<span aria-hidden='true'>icon text</span>\n"
    "<main><h1>Widget 2.0 released</h1>\n"
    "<p>We are happy to announce <b>Widget 2.0</b>. Read the\n <a href='https://example.com/changelog'>full"
    " changelog</a>.</p>\n<h2>Breaking changes</h2>\n"
    "<ul><li>Removed <code>old_api()</code></li><li>Python 3.8 is no longer supported</li></ul>\n"
    "<table><tr><th>Version</th><th>Date</th></tr><tr><td>2.0</td><td>2024-05-01</td></tr></table>\n"
    "<pre>\npip install widget==2.0\n    --no-deps\n</pre>\n"
    "<form><input type='hidden' name='csrf' value='tok123'><button>Subscribe</button></form>\n"
    "<noscript>enable javascript</noscript><svg><text>svg label</text></svg>\n"
    "<img src='/logo.png' alt='Widget logo'>\n</main></body></html>\n"
)


def test_page_becomes_readable_text() -> None:
    out = slim(PAGE)
    assert out is not None
    lines = out.splitlines()
    assert lines[0] == "# Widget 2.0 — release notes"
    assert "# Widget 2.0 released" in lines
    assert "## Breaking changes" in lines
    assert "- Removed old_api()" in lines
    assert "- Docs (/docs/)" in lines
    assert any("full changelog (https://example.com/changelog)" in line for line in lines)
    assert "Version | Date" in lines and "2.0 | 2024-05-01" in lines
    assert "pip install widget==2.0" in lines and "    --no-deps" in lines
    assert "[image: Widget logo]" in out


@pytest.mark.parametrize(
    "gone",
    [
        "dataLayer",
        "font: 14px",
        "build 8412",
        "hidden by attribute",
        "hidden by style",
        "icon text",
        "tok123",
        "Subscribe",
        "enable javascript",
        "svg label",
        "site.css",
    ],
)
def test_scripts_styles_comments_and_hidden_nodes_are_dropped(gone: str) -> None:
    out = slim(PAGE)
    assert out is not None and gone not in out


def test_preamble_and_trailer_are_kept_verbatim() -> None:
    text = "<returncode>0</returncode>\n<output>\nHTTP/1.1 200 OK\n\n" + PAGE + "</output>"
    out = slim(text)
    assert out is not None
    assert out.startswith("<returncode>0</returncode>\n<output>\nHTTP/1.1 200 OK\n\n# Widget")
    assert out.endswith("\n</output>")


@pytest.mark.parametrize(
    "text",
    [
        "<class 'bytes'>\n" * 50,
        "Requirement already satisfied: wrapt<1.14,>=1.11 in /usr/lib/python3/site-packages\n" * 40,
        "<returncode>0</returncode>\n<output>\nfoo = List<String>()\nif a<b and c>d: pass\n</output>\n" * 30,
        "<?xml version='1.0'?>\n<project><modelVersion>4.0.0</modelVersion><groupId>x</groupId></project>\n"
        * 30,
        "{% extends 'base.html' %}\n<html><body>{% block content %}<p>{{ user.name }}</p>"
        "{% endblock %}</body></html>\n",
        "def render():\n    return '<html><body><p>hi</p></body></html>'\n" + "x = 1\n" * 200,
        '"""\n<!DOCTYPE html>\n<html><body><p>fixture</p></body></html>\n"""\n'
        + "def test_x():\n    pass\n" * 60,
        "plain text without any markup at all\n" * 100,
        "",
    ],
    ids=[
        "python-repr",
        "pip-specifier",
        "generics",
        "xml",
        "template",
        "code-with-html-string",
        "code-after-a-page",
        "plain",
        "empty",
    ],
)
def test_non_documents_are_never_touched(text: str) -> None:
    assert document_span(text) is None
    assert slim(text) is None


def test_a_fragment_dense_with_known_tags_counts_as_a_page() -> None:
    rows = "".join(
        f"<tr><td><a href='/item/{i}'>item {i}</a></td><td><span>{i * 3}</span></td></tr>" for i in range(30)
    )
    text = (
        f"<div class='list'><table><thead><tr><th>Name</th></tr></thead><tbody>{rows}</tbody></table></div>"
    )
    out = slim(text)
    assert out is not None
    assert "item 7 (/item/7) | 21" in out


def test_a_test_run_that_prints_a_page_in_an_assertion_stays_a_log() -> None:
    """Seen in a recorded Claude Code session (``mix test``): an ExUnit failure whose ``left:`` value is
    a rendered page was taken for a page and turned into one line of text, its newlines and the
    failing test's name, file and line gone."""
    rows = "".join(f'<li><a href=\\"/s/{i}\\">session {i}</a> <span>ok</span></li>' for i in range(40))
    page = f'<html lang=\\"en\\"><head><title>Spotter</title></head><body><ul>{rows}</ul></body></html>'
    log = (
        "Exit code 2\nRunning ExUnit with seed: 685587, max_cases: 32\n\n..........\n\n"
        "  1) test subagent rows have a badge (SpotterWeb.SessionLiveTest)\n"
        "     test/spotter_web/live/session_live_test.exs:146\n"
        "     Assertion with =~ failed\n"
        '     code:  assert html =~ ">agent</span>"\n'
        f'     left:  "{page}"\n'
        "\nFinished in 0.4 seconds\n12 tests, 1 failure\n"
    )
    assert document_span(log) is None
    assert slim(log) is None
    # the same markup starting a line is a page fragment, as before
    assert document_span(page.replace('\\"', '"')) is not None


@pytest.mark.parametrize(
    "text",
    [
        "<!DOCTYPE html><html><body><div><p>unclosed <b>bold <i>italic</div></span></body>",
        "<html><body>" + "<div>" * 5000 + "deep" + "</div>" * 5000 + "</body></html>",
        "<!doctype html><html><body>\ud800 lone surrogate \udfff</body></html>",
        '<!DOCTYPE html><html><body><p title="unterminated>text</body></html>',
        "<!DOCTYPE html>",
        "<html>",
    ],
)
def test_malformed_pages_never_raise(text: str) -> None:
    out = slim(text)
    assert out is None or isinstance(out, str)


SLIM_PAGE = (
    "# Widget 2.0 — release notes\n- Home (/)\n- Docs (/docs/)\n\n# Widget 2.0 released\n"
    "We are happy to announce Widget 2.0. Read the full changelog (https://example.com/changelog).\n\n"
    "## Breaking changes\n- Removed old_api()\n- Python 3.8 is no longer supported\n"
    "Version | Date\n2.0 | 2024-05-01\npip install widget==2.0\n    --no-deps\n[image: Widget logo]\n"
)


def test_slim_output_is_exact() -> None:
    assert slim(PAGE) == SLIM_PAGE


def test_deterministic_across_processes() -> None:
    code = (
        "import sys\nfrom lightmem_plugin.reduction.html import slim\n"
        "sys.stdout.buffer.write(slim(sys.stdin.buffer.read().decode()).encode())\n"
    )
    got = outputs(code, stdin=PAGE.encode())
    assert len(got) == len(SEEDS) and len(set(got)) == 1, "slim output depends on the hash seed"
    assert got[0] == SLIM_PAGE.encode()


@given(st.text(alphabet="<>/!abdhlmoptyHTML \n'\"=-", max_size=300))
def test_never_raises_on_angle_bracket_soup(text: str) -> None:
    out = slim(text)
    assert out is None or isinstance(out, str)
