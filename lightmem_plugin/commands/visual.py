"""visual [--session ID] [--out DIR] [--open]: draw a session as an HTML page and a PNG.

Per model call one stacked bar: cached tokens, uncached tokens, and tokens saved against what the host
alone would have sent (the summary and each bar's hover text also give money in USD as billed, output
included, against the same calls without lightmem2); a strip under the bars shows the mode; dashed purple lines mark eviction
batches and red lines prefix breaks. Hovering a bar shows its figures and, for a break, where and why.
The page is self-contained (inline SVG and a few lines of JS, a policy that forbids any network
request), so it opens offline and can be attached anywhere; the PNG is the same chart for chats that
show images. Files go to DIR (default: the data dir's ``visual/``); the same ledger always gives the
same bytes. Without ``--session``: the session recorded last.
"""

from __future__ import annotations

import argparse
import html
import io
import re
import webbrowser
from pathlib import Path

import xxhash

from ..atomic import write_private_bytes, write_private_text
from ..errors import UsageError
from ..metering.misses import CAUSES
from ..store.home import Home
from ..store.ledger import CallRecord, Ledger, summarize
from ..views import miss_report
from ..views.format import money_line, where
from .base import Command, Outcome
from .chart import HEIGHT, WIDTH, Chart, Label, Line, Rect, layout, render_png

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; color: #222; margin: 24px; background: #fff; }
h1 { font-size: 18px; margin: 0 0 4px; } h2 { font-size: 15px; margin: 20px 0 6px; }
.summary { color: #555; margin: 0 0 12px; }
.chart { position: relative; width: 1100px; }
#tip { position: absolute; white-space: pre; background: #222; color: #fff; font-size: 12px;
  padding: 6px 8px; border-radius: 4px; pointer-events: none; }
g.bar:hover rect.v { opacity: 0.75; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border-bottom: 1px solid #ddd; padding: 3px 10px; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
"""
_SCRIPT = """
(function () {
  "use strict";
  var tip = document.getElementById("tip");
  var bars = document.querySelectorAll("g.bar");
  function show(ev) {
    var box = tip.parentNode.getBoundingClientRect();
    tip.textContent = ev.currentTarget.getAttribute("data-tip");
    tip.hidden = false;
    tip.style.left = (ev.clientX - box.left + 14) + "px";
    tip.style.top = (ev.clientY - box.top + 14) + "px";
  }
  function hide() { tip.hidden = true; }
  for (var i = 0; i < bars.length; i++) {
    bars[i].addEventListener("mousemove", show);
    bars[i].addEventListener("mouseleave", hide);
  }
  var done = document.createElement("div");
  done.id = "lm-render";
  done.hidden = true;
  done.setAttribute("data-bars", String(bars.length));
  var want = Number(document.body.getAttribute("data-calls"));
  done.setAttribute("data-status", bars.length === want ? "ok" : "mismatch");
  document.body.appendChild(done);
})();
"""


def _attr(value: str) -> str:
    return html.escape(value, quote=True).replace("\n", "&#10;")


def _num(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".")


def _svg_shape(shape: Rect | Line | Label) -> str:
    if isinstance(shape, Rect):
        cls = ' class="v"' if shape.kind in ("cached", "uncached", "saved") else ""
        return (
            f'<rect{cls} x="{_num(shape.x)}" y="{_num(shape.y)}" width="{_num(shape.w)}" '
            f'height="{_num(shape.h)}" fill="{shape.fill}"/>'
        )
    if isinstance(shape, Line):
        dash = ' stroke-dasharray="4 4" stroke-width="2"' if shape.dashed else ' stroke-width="1"'
        return (
            f'<line x1="{_num(shape.x1)}" y1="{_num(shape.y1)}" x2="{_num(shape.x2)}" y2="{_num(shape.y2)}" '
            f'stroke="{shape.color}"{dash}/>'
        )
    return (
        f'<text x="{_num(shape.x)}" y="{_num(shape.y)}" text-anchor="{shape.anchor}" '
        f'font-size="{shape.size}">{html.escape(shape.text)}</text>'
    )


def svg(chart: Chart) -> str:
    """The chart as an inline SVG element; each call is a ``g.bar`` with its hover text."""
    out = [
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="{_attr(chart.title)}" font-family="sans-serif" fill="#222">',
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>',
    ]
    out += [_svg_shape(s) for s in chart.background]
    top, bottom = 44, HEIGHT - 96 + 16
    for bar in chart.bars:
        out.append(f'<g class="bar" data-tip="{_attr(bar.tip)}"><title>{html.escape(bar.tip)}</title>')
        out.append(
            f'<rect x="{_num(bar.x)}" y="{top}" width="{_num(bar.slot)}" height="{bottom - top}" '
            'fill="none" pointer-events="all"/>'
        )
        out += [_svg_shape(r) for r in bar.shapes]
        out.append("</g>")
    out += [_svg_shape(s) for s in chart.foreground]
    out.append("</svg>")
    return "\n".join(out)


def _tables(calls: list[CallRecord]) -> str:
    rows = "".join(
        f'<tr><td class="n">{c.call_index}</td><td>{html.escape(where(c))}</td>'
        f"<td>{html.escape(c.break_reason or 'unknown')}</td></tr>"
        for c in calls
        if c.prefix_break_at is not None
    )
    out = "<h2>Cache killers</h2>"
    out += f"<table><tr><th>call</th><th>where</th><th>why</th></tr>{rows}</table>" if rows else "<p>none</p>"
    evictions = "".join(
        f'<tr><td class="n">{c.call_index}</td><td class="n">{c.evicted_tokens:,}</td></tr>'
        for c in calls
        if c.evicted_tokens
    )
    out += "<h2>Evictions</h2>"
    out += f"<table><tr><th>call</th><th>tokens</th></tr>{evictions}</table>" if evictions else "<p>none</p>"
    return out + _causes(calls)


def _causes(calls: list[CallRecord]) -> str:
    """The uncached input by cause (:mod:`..views.miss_report`), and each call's causes past new content."""
    totals, per_call, _ = miss_report.session_causes(calls)
    out = "<h2>Uncached input by cause</h2>"
    if not totals.uncached:
        return out + "<p>none</p>"

    def usd(v: float | None) -> str:
        return "-" if v is None else f"${v:.4f}"

    rows = "".join(
        f'<tr><td>{html.escape(cause)}</td><td class="n">{n:,}</td>'
        f'<td class="n">{100 * n / totals.uncached:.1f}%</td><td class="n">{usd(totals.usd.get(cause))}</td></tr>'
        for cause in CAUSES
        if (n := totals.tokens.get(cause, 0))
    )
    out += f"<table><tr><th>cause</th><th>tokens</th><th>share</th><th>money</th></tr>{rows}</table>"
    past = "".join(
        f'<tr><td class="n">{call}</td><td>{html.escape(c.cause)}</td><td class="n">{c.tokens:,}</td>'
        f'<td class="n">{usd(c.usd)}</td><td>{html.escape(c.detail)}</td></tr>'
        for call, causes in per_call
        for c in causes
        if c.cause != "new content"
    )
    if past:
        out += "<h2>Misses past new content</h2><table><tr><th>call</th><th>cause</th><th>tokens</th>"
        out += f"<th>money</th><th>what happened</th></tr>{past}</table>"
    return out


def page(session_id: str, calls: list[CallRecord]) -> str:
    """The whole self-contained HTML page for one session."""
    t = summarize(session_id, calls)
    rate, real = t.hit_rate()
    title = f"lightmem2 · session {session_id}"
    summary = (
        f"{t.calls} calls · mode {t.mode} · hit rate {100 * rate:.1f}% ({'real' if real else 'simulated'}) · "
        f"K {t.k:,.0f} vs {t.k_baseline:,.0f} vanilla estimate ({t.k_saved_pct:.1f}% saved) · "
        f"{t.evictions} evictions · {t.prefix_breaks} prefix breaks · {money_line(t)}"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n"
        f'<body data-calls="{len(calls)}">\n<h1>{html.escape(title)}</h1>\n'
        f'<p class="summary">{html.escape(summary)}</p>\n'
        f'<div class="chart">\n{svg(layout(title, calls))}\n<div id="tip" hidden></div>\n</div>\n'
        f"{_tables(calls)}\n<script>{_SCRIPT}</script>\n</body>\n</html>\n"
    )


def file_stem(session_id: str) -> str:
    """A safe, stable file name for a session id (a short hash keeps rewritten ids apart)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", session_id)[:80].lstrip(".") or "session"
    if safe != session_id:
        safe += "-" + xxhash.xxh3_64_hexdigest(session_id.encode("utf-8"))[:8]
    return f"lightmem2-{safe}"


def run(
    ledger: Ledger, session_id: str | None = None, out_dir: Path | None = None, open_browser: bool = False
) -> str:
    """Write the page and the PNG; returns their paths, one per line."""
    sid = ledger.resolve(session_id)
    if sid is None:
        raise UsageError(f"no calls recorded yet in {ledger.path}; run a session (or `lightmem2 demo`) first")
    calls = ledger.calls(sid)
    out = Path(out_dir) if out_dir is not None else Home.default().visual_dir
    try:
        out.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as err:
        raise UsageError(
            f"cannot create output dir {out}: {err.strerror}; pass a writable --out DIR"
        ) from None
    stem = file_stem(sid)
    html_path, png_path = out / f"{stem}.html", out / f"{stem}.png"
    # private, as the ledger they are drawn from (measured before: 0644 in any --out DIR): the page
    # names the session's commands and files
    write_private_text(html_path, page(sid, calls))
    png = io.BytesIO()
    render_png(layout(f"lightmem2 · session {sid}", calls), png)
    write_private_bytes(png_path, png.getvalue())
    if open_browser:
        webbrowser.open(html_path.resolve().as_uri())
    return f"{html_path}\n{png_path}"


def configure(parser: argparse.ArgumentParser) -> None:
    """``--session ID``, ``--out DIR``, ``--open``."""
    parser.add_argument("--session", metavar="ID")
    parser.add_argument("--out", metavar="DIR")
    parser.add_argument("--open", action="store_true")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 visual`` on the user's ledger."""
    return run(Ledger.default(), args.session, Path(args.out) if args.out else None, args.open)


COMMAND = Command("visual", __doc__, configure, main)
