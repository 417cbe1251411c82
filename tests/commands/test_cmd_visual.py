from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from ledger_rows import fill, make_session, realistic_sessions
from PIL import Image

from lightmem_plugin.commands import visual
from lightmem_plugin.commands.chart import HEIGHT, WIDTH, layout
from lightmem_plugin.errors import UsageError
from lightmem_plugin.store.ledger import Ledger

CHROMIUM = Path("/usr/bin/chromium")
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)"
)


def chromium(page: Path, tmp: Path, *mode: str) -> tuple[str, list[str]]:
    """Load ``page`` in headless Chromium; (stdout, console lines from stderr)."""
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'chromium-profile'}",
        "--window-size=1200,800",
        "--enable-logging=stderr",
        "--v=0",
        *mode,
        page.resolve().as_uri(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    return done.stdout, console


def test_writes_page_and_png(ledger: Ledger, tmp_path: Path) -> None:
    out = visual.run(ledger, session_id="cc-7f3a2b", out_dir=tmp_path / "v")
    html_path, png_path = (Path(p) for p in out.splitlines())
    assert html_path == tmp_path / "v" / "lightmem2-cc-7f3a2b.html"
    page = html_path.read_text(encoding="utf-8")
    assert page.count('<g class="bar"') == 27 and 'data-calls="27"' in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"https?://|\bsrc=|@import|url\(", page), "the page must not reach the network"
    assert "message 31, char 512" in page and "pass html changed message 31" in page
    assert page.count('stroke-dasharray="4 4"') == 2  # two eviction batches
    with Image.open(png_path) as img:
        assert img.format == "PNG" and img.size == (WIDTH, HEIGHT)
    # private as the ledger they show (before: 0644 in any --out DIR, the dir 0755)
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in (html_path, png_path, html_path.parent)}
    assert modes == {html_path.name: "0o600", png_path.name: "0o600", "v": "0o700"}


def test_png_is_the_same_chart(ledger: Ledger, tmp_path: Path) -> None:
    """Every bar segment of the layout (which the SVG draws) has its colour at its centre in the PNG."""
    calls = ledger.calls("swe-astropy-12907")
    png = Path(visual.run(ledger, session_id="swe-astropy-12907", out_dir=tmp_path).splitlines()[1])
    chart = layout("lightmem2 · session swe-astropy-12907", calls)
    checked = 0
    with Image.open(png) as img:
        rgb = img.convert("RGB")
        for bar in chart.bars:
            for rect in bar.shapes:
                if rect.w < 4 or rect.h < 4:
                    continue
                cx, cy = int(rect.x + rect.w / 2), int(rect.y + rect.h / 2)
                if any(abs(cx - (b.x + b.slot / 2)) < 6 for b in chart.bars if b.call.prefix_break_at):
                    continue  # a prefix-break line is drawn over this bar
                pixel = rgb.getpixel((cx, cy))
                assert isinstance(pixel, tuple)
                assert "#{:02x}{:02x}{:02x}".format(*pixel) == rect.fill
                checked += 1
    assert checked > 60
    kinds = {r.kind for b in chart.bars for r in b.shapes}
    assert {"cached", "uncached", "saved", "mode"} <= kinds


def test_same_ledger_same_bytes(tmp_path: Path) -> None:
    outputs = []
    for name in ("a", "b"):
        with Ledger(tmp_path / name / "l.sqlite3") as led:
            fill(led, realistic_sessions())
            paths = visual.run(
                led, session_id="swe-astropy-12907", out_dir=tmp_path / name / "out"
            ).splitlines()
            outputs.append([Path(p).read_bytes() for p in paths])
    assert outputs[0] == outputs[1]


def test_hostile_session_id_is_escaped(tmp_path: Path) -> None:
    sid = '<script>alert("x")</script>/../../etc'
    with Ledger(tmp_path / "l.sqlite3") as led:
        fill(led, [make_session(sid, "normal", 5)])
        html_path, png_path = (Path(p) for p in visual.run(led, out_dir=tmp_path / "out").splitlines())
    assert html_path.parent == tmp_path / "out" and png_path.parent == tmp_path / "out"
    assert re.fullmatch(r"lightmem2-[A-Za-z0-9._-]+-[0-9a-f]{8}\.html", html_path.name)
    assert html_path.name.startswith("lightmem2-_script_alert")
    page = html_path.read_text(encoding="utf-8")
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page


def test_long_session_keeps_axis_readable(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite3") as led:
        fill(led, [make_session("long", "normal", 600, breaks={300: (0, 12, "placeholder UUID changed")})])
        chart = layout("t", led.calls("long"))
    assert len(chart.bars) == 600
    ticks = [s for s in chart.background if getattr(s, "size", 0) == 10]
    assert 15 <= len(ticks) <= 21
    assert all(r.w >= 1 for b in chart.bars for r in b.shapes)


def test_default_out_dir_and_open(
    ledger: Ledger, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", opened.append)
    html_path = Path(visual.run(ledger, open_browser=True).splitlines()[0])
    assert html_path == isolated_home / "visual" / "lightmem2-openclaw-main.html"
    assert opened == [html_path.resolve().as_uri()]


def test_bad_arguments(ledger: Ledger, empty_ledger: Ledger, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match='unknown session "nope"; known sessions: swe-astropy-12907') as err:
        visual.run(ledger, session_id="nope", out_dir=tmp_path)
    assert err.value.exit_code == 2
    with pytest.raises(UsageError, match="no calls recorded yet"):
        visual.run(empty_ledger, out_dir=tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="pass a writable --out DIR"):
        visual.run(ledger, out_dir=blocker / "sub")


@needs_chromium
def test_renders_in_headless_chromium(ledger: Ledger, tmp_path: Path) -> None:
    html_path = Path(visual.run(ledger, session_id="cc-7f3a2b", out_dir=tmp_path).splitlines()[0])
    shot = tmp_path / "screenshot.png"
    _, console = chromium(html_path, tmp_path, f"--screenshot={shot}")
    assert console == []
    with Image.open(shot) as img:
        assert img.format == "PNG" and img.size == (1200, 800)
        colors = {c for _, c in img.convert("RGB").getcolors(1_000_000) or []}
    assert (0x4C, 0x78, 0xA8) in colors and (0xF5, 0x85, 0x18) in colors  # cached and uncached bars drawn
    dom, console = chromium(html_path, tmp_path, "--dump-dom")
    assert console == []
    assert re.search(r'<div id="lm-render" hidden="" data-bars="27" data-status="ok"></div>', dom), dom[-500:]


@needs_chromium
def test_hover_shows_the_call(ledger: Ledger, tmp_path: Path) -> None:
    html_path = Path(visual.run(ledger, session_id="cc-7f3a2b", out_dir=tmp_path).splitlines()[0])
    hover = (
        "<script>var g = document.querySelectorAll('g.bar')[22];"
        "g.dispatchEvent(new MouseEvent('mousemove', {clientX: 300, clientY: 300, bubbles: true}));</script>"
    )
    probe = tmp_path / "hover.html"
    probe.write_text(
        html_path.read_text(encoding="utf-8").replace("</body>", hover + "</body>"), encoding="utf-8"
    )
    dom, console = chromium(probe, tmp_path, "--dump-dom")
    assert console == []
    tip = re.search(r'<div id="tip"([^>]*)>([^<]*)</div>', dom)
    assert tip is not None and "hidden" not in tip.group(1)
    assert tip.group(2).startswith("call 23 · aggressive")
    assert "prefix break at message 31, char 512: pass html changed message 31" in tip.group(2)


@needs_chromium
def test_console_errors_are_detected(tmp_path: Path) -> None:
    """The check above can fail: a page whose script throws is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><script>notDefined();</script></body></html>")
    _, console = chromium(bad, tmp_path, "--dump-dom")
    assert any("Uncaught ReferenceError" in line for line in console)


def test_money_in_the_summary_and_the_hover(tmp_path: Path) -> None:
    from ledger_rows import priced

    calls = priced(make_session("cc-money", "aggressive", 6, "anthropic"), "claude-opus-4-6")
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        fill(ledger, [calls])
        t = ledger.totals("cc-money")
        page = Path(visual.run(ledger, out_dir=tmp_path / "v").splitlines()[0]).read_text(encoding="utf-8")
    assert f"money: ${t.cost_usd:,.4f} vs ${t.cost_without_usd:,.4f} without lightmem2" in page
    first = calls[0]
    assert f"money ${first.cost_usd:,.4f} vs ${first.cost_without_usd:,.4f} without lightmem2" in page
