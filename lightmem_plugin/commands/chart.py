"""The per-call chart of a session as plain shapes, and its PNG rendering with pillow.

Why shapes first: the HTML page (SVG) and the PNG must show the same chart, so :func:`layout` turns
ledger rows into rectangles, lines and labels once, with coordinates rounded to 0.01 px, and each
renderer only draws them. Same rows -> same shapes -> same bytes (no clock, no randomness).
Per call one stacked bar: cached tokens, uncached tokens (misses and cache writes), and tokens saved
against what the host alone would have sent; under it a strip coloured by mode; dashed purple lines
mark eviction batches, red lines prefix breaks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

from PIL import Image, ImageDraw, ImageFont

from ..store.ledger import CallRecord
from ..views.format import usd

WIDTH, HEIGHT = 1100, 440
LEFT, RIGHT, TOP, BOTTOM = 72, 20, 44, 96
COLORS = {
    "cached": "#4c78a8",
    "uncached": "#f58518",
    "saved": "#a6d49a",
    "eviction": "#7b4fa0",
    "break": "#d62728",
    "conservative": "#8fb8de",
    "normal": "#a9a9a9",
    "aggressive": "#e07b6f",
    "axis": "#444444",
    "grid": "#e3e3e3",
    "text": "#222222",
}


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str
    kind: str


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    color: str
    dashed: bool = False


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    anchor: str = "start"  # SVG text-anchor: start | middle | end
    size: int = 11


@dataclass(frozen=True)
class Bar:
    """One call: its slot on the x axis, its shapes and the hover text."""

    call: CallRecord
    x: float
    slot: float
    shapes: list[Rect]
    tip: str


@dataclass
class Chart:
    """Everything to draw, back to front."""

    title: str
    background: list[Rect | Line | Label] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    foreground: list[Rect | Line | Label] = field(default_factory=list)


def parts(c: CallRecord) -> tuple[int, int, int]:
    """(cached, uncached, saved) tokens of a call: provider figures when reported, else simulated."""
    real_hit = c.real_hit_tokens
    if c.real_input_tokens is not None and real_hit is not None:
        cached, uncached = real_hit, max(0, c.real_input_tokens - real_hit)
    else:
        cached, uncached = c.hit_tokens, c.miss_tokens + c.write_tokens
    return cached, uncached, max(0, c.baseline_tokens - c.input_tokens)


def _nice_max(value: int) -> int:
    step = 1
    while step * 10 <= value:
        step *= 10
    for mult in (1, 2, 2.5, 5, 10):
        if value <= step * mult:
            return int(step * mult)
    return step * 10


def _short(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:g}M"
    return f"{n / 1000:g}k" if n >= 1000 else str(n)


def _tip(c: CallRecord, cached: int, uncached: int, saved: int) -> str:
    rate, real = c.hit_rate()
    lines = [
        f"call {c.call_index} · {c.mode}",
        f"cached {cached:,} · uncached {uncached:,} · saved {saved:,}",
        f"hit rate {100 * rate:.1f}% ({'real' if real else 'simulated'})",
        f"K {c.k:,.0f} vs {c.k_baseline:,.0f} vanilla",
    ]
    if c.cost_usd is not None:
        lines.append(f"money {usd(c.cost_usd)} vs {usd(c.cost_without_usd)} without lightmem2")
    if c.evicted_tokens:
        lines.append(f"eviction: {c.evicted_tokens:,} tokens paged out")
    if c.prefix_break_at is not None:
        msg, off = c.prefix_break_at
        lines.append(f"prefix break at message {msg}, char {off}: {c.break_reason or 'unknown'}")
    return "\n".join(lines)


def layout(title: str, calls: list[CallRecord]) -> Chart:
    """The chart of ``calls`` (ordered by call index) in a WIDTH x HEIGHT canvas."""
    chart = Chart(title)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    base = TOP + plot_h
    totals = [sum(parts(c)) for c in calls]
    top = _nice_max(max([*totals, 1]))
    bg = chart.background
    bg.append(Label(LEFT, 24, title, "start", 14))
    for i in range(6):
        y = round(base - plot_h * i / 5, 2)
        bg.append(Line(LEFT, y, WIDTH - RIGHT, y, COLORS["grid" if i else "axis"]))
        bg.append(Label(LEFT - 6, y + 4, _short(top * i // 5), "end"))
    slot = plot_w / max(len(calls), 1)
    every = max(1, -(-len(calls) // 20))
    for i, c in enumerate(calls):
        x = round(LEFT + i * slot, 2)
        width = round(max(slot * 0.8, 1.0), 2)
        bx = round(x + (slot - width) / 2, 2)
        shapes, y = [], float(base)
        for kind, value in zip(("cached", "uncached", "saved"), parts(c), strict=True):
            h = round(plot_h * value / top, 2)
            if h > 0:
                y = round(y - h, 2)
                shapes.append(Rect(bx, y, width, h, COLORS[kind], kind))
        shapes.append(Rect(x, base + 6, round(slot, 2), 10, COLORS.get(c.mode, COLORS["normal"]), "mode"))
        chart.bars.append(Bar(c, x, round(slot, 2), shapes, _tip(c, *parts(c))))
        center = round(x + slot / 2, 2)
        if i % every == 0:
            bg.append(Label(center, base + 30, str(c.call_index), "middle", 10))
        if c.evicted_tokens:
            ex = round(center - 3, 2)
            chart.foreground.append(Line(ex, TOP, ex, base, COLORS["eviction"], dashed=True))
            chart.foreground.append(Rect(round(ex - 4, 2), TOP - 10, 8, 8, COLORS["eviction"], "marker"))
        if c.prefix_break_at is not None:
            chart.foreground.append(Line(center, TOP, center, base, COLORS["break"]))
            chart.foreground.append(Rect(round(center - 4, 2), TOP - 10, 8, 8, COLORS["break"], "marker"))
    legend = [("cached", "cached"), ("uncached", "uncached"), ("saved", "saved vs host alone")]
    legend += [("eviction", "eviction batch"), ("break", "prefix break")]
    legend += [(m, f"mode {m}") for m in ("conservative", "normal", "aggressive")]
    lx = float(LEFT)
    for key, text in legend:
        chart.foreground.append(Rect(lx, HEIGHT - 30, 12, 12, COLORS[key], "legend"))
        chart.foreground.append(Label(lx + 16, HEIGHT - 20, text, "start", 11))
        lx += 24 + 7 * len(text)
    chart.foreground.append(Label(LEFT - 6, base + 15, "mode", "end", 10))
    chart.foreground.append(Label(LEFT + plot_w / 2, base + 46, "model call", "middle", 11))
    return chart


@lru_cache(maxsize=8)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """Pillow's bundled font at ``size`` (its bitmap font where pillow lacks FreeType)."""
    try:
        return ImageFont.load_default(size=size)
    except ImportError:
        return ImageFont.load_default()


def _draw(draw: ImageDraw.ImageDraw, shape: Rect | Line | Label) -> None:
    if isinstance(shape, Rect):
        x0, y0 = round(shape.x), round(shape.y)
        x1, y1 = max(x0, round(shape.x + shape.w) - 1), max(y0, round(shape.y + shape.h) - 1)
        draw.rectangle((x0, y0, x1, y1), fill=shape.fill)
    elif isinstance(shape, Line):
        x, y1, y2 = round(shape.x1), round(shape.y1), round(shape.y2)
        if shape.dashed and x == round(shape.x2):
            for start in range(y1, y2, 8):
                draw.line((x, start, x, min(start + 4, y2)), fill=shape.color, width=2)
        else:
            draw.line((round(shape.x1), y1, round(shape.x2), y2), fill=shape.color, width=1)
    else:
        font = _font(shape.size)
        anchor = {"start": "ls", "middle": "ms", "end": "rs"}[shape.anchor]
        draw.text((round(shape.x), round(shape.y)), shape.text, fill=COLORS["text"], font=font, anchor=anchor)


def render_png(chart: Chart, path: Path | BinaryIO) -> Path | BinaryIO:
    """Draw ``chart`` with pillow and save it as PNG at ``path`` (a file name or an open binary file)."""
    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    for shape in chart.background:
        _draw(draw, shape)
    for bar in chart.bars:
        for rect in bar.shapes:
            _draw(draw, rect)
    for shape in chart.foreground:
        _draw(draw, shape)
    image.save(path, format="PNG", optimize=False)
    return path
