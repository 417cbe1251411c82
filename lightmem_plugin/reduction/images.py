"""Image pass: downsample large bitmaps so a screenshot does not cost thousands of tokens.

Why these rules: models see images at a bounded resolution anyway, so a bitmap above
``imageBitmapMaxBytes`` is scaled to ``imageMaxSidePx`` on its longest side (aspect ratio kept) and
re-encoded with fixed settings and no metadata, which makes the output a pure function of the input
bytes (DESIGN I1). JPEG stays JPEG; other formats become PNG, or JPEG when that is smaller and the
image has no transparency. The original is archived byte-exact first.

SVG is text: it is rasterised only when a rasteriser is importable (``cairosvg``); none is a
dependency, so by default large SVGs are left as they are. Anything unreadable, truncated, too large
to decode safely (decompression bombs) or not an image yields None: the caller keeps the original.
"""

from __future__ import annotations

import importlib
import io
import warnings
from typing import Any

from PIL import Image, UnidentifiedImageError

from .base import PassContext
from .spec import PassSpec

MAX_PIXELS = 16_000_000
"""Refuse to decode images above this many pixels: a small file can expand to gigabytes."""

JPEG_QUALITY = 85
BITMAP_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
SVG_TYPES = ("image/svg+xml", "image/svg")


def _encode(img: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    if fmt == "JPEG":
        img.convert("RGB").save(
            buf, "JPEG", quality=JPEG_QUALITY, optimize=False, progressive=False, subsampling=2
        )
    else:
        img.save(buf, "PNG", optimize=False, compress_level=6)
    return buf.getvalue()


def _has_alpha(img: Image.Image) -> bool:
    return img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info)


def _downsample(data: bytes, max_side: int) -> tuple[bytes, str] | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        with Image.open(io.BytesIO(data)) as img:
            fmt = img.format or ""
            if fmt not in BITMAP_FORMATS:
                return None
            width, height = img.size
            if width <= 0 or height <= 0 or width * height > MAX_PIXELS:
                return None
            img.seek(0)
            img.load()
            frame: Image.Image = img.copy()
    if frame.mode not in ("RGB", "RGBA", "L", "LA"):
        frame = frame.convert("RGBA" if _has_alpha(frame) else "RGB")
    scale = max_side / max(width, height)
    if scale < 1:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        frame = frame.resize(size, Image.Resampling.LANCZOS)
    candidates: list[tuple[bytes, str]] = []
    if fmt == "JPEG":
        candidates.append((_encode(frame, "JPEG"), "image/jpeg"))
    else:
        candidates.append((_encode(frame, "PNG"), "image/png"))
        if not _has_alpha(frame):
            candidates.append((_encode(frame, "JPEG"), "image/jpeg"))
    best = min(candidates, key=lambda c: len(c[0]))
    return best if len(best[0]) < len(data) else None


def _rasterise_svg(data: bytes, max_side: int) -> bytes | None:
    """PNG of an SVG when cairosvg is importable, else None."""
    try:
        cairosvg: Any = importlib.import_module("cairosvg")
    except ImportError:
        return None
    try:
        png = cairosvg.svg2png(bytestring=data, output_width=max_side, unsafe=False)
    except Exception:  # a third-party renderer on untrusted input: any failure means "leave it"
        return None
    return png if isinstance(png, bytes) else None


def reduce_image(data: bytes, media_type: str, ctx: PassContext) -> tuple[bytes, str] | None:
    """A smaller (bytes, media type) for a large image, the original archived; None to keep it."""
    cfg = ctx.reduction
    mt = media_type.lower().split(";")[0].strip()
    if mt in SVG_TYPES:
        if len(data) <= cfg.imageSvgMaxBytes:
            return None
        png = _rasterise_svg(data, cfg.imageMaxSidePx)
        if png is None or len(png) >= len(data):
            return None
        ctx.archive(data)
        return png, "image/png"
    if len(data) <= cfg.imageBitmapMaxBytes:
        return None
    try:
        result = _downsample(data, cfg.imageMaxSidePx)
    except (OSError, ValueError, SyntaxError, UnidentifiedImageError, Image.DecompressionBombError, EOFError):
        return None
    if result is None:
        return None
    ctx.archive(data)
    return result


PASS = PassSpec("images", "media", True, "downsample bitmaps and SVGs above their size limits", reduce_image)
