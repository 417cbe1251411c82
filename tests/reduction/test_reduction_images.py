from __future__ import annotations

import io
import random

import pytest
import xxhash
from PIL import Image

from lightmem_plugin.config import ReductionConfig
from lightmem_plugin.reduction.base import PassContext
from lightmem_plugin.reduction.images import reduce_image


class FakeArchive:
    def __init__(self) -> None:
        self.store: dict[str, bytes] = {}

    def __call__(self, data: bytes) -> str:
        key: str = xxhash.xxh3_128_hexdigest(data)
        self.store[key] = data
        return key


def _ctx(archive: FakeArchive | None = None) -> PassContext:
    cfg = ReductionConfig()
    return PassContext(cfg.table("normal"), cfg, archive or FakeArchive())


def _noise(width: int, height: int, mode: str = "RGB", seed: int = 7) -> Image.Image:
    rng = random.Random(seed)
    bands = len(mode)
    return Image.frombytes(mode, (width, height), rng.randbytes(width * height * bands))


def _encode(img: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("fmt", "mode", "size", "out_type"),
    [
        ("PNG", "RGB", (1600, 900), "image/jpeg"),
        ("PNG", "RGBA", (1200, 1500), "image/png"),
        ("JPEG", "RGB", (3000, 2000), "image/jpeg"),
        ("WEBP", "RGB", (2400, 1200), "image/jpeg"),
        ("GIF", "L", (1500, 1500), "image/jpeg"),
    ],
)
def test_large_bitmaps_are_downsampled_keeping_aspect(
    fmt: str, mode: str, size: tuple[int, int], out_type: str
) -> None:
    kw: dict[str, object] = {"quality": 95} if fmt in ("JPEG", "WEBP") else {}
    data = _encode(_noise(*size, mode=mode), fmt, **kw)
    assert len(data) > ReductionConfig().imageBitmapMaxBytes
    archive = FakeArchive()
    out = reduce_image(data, f"image/{fmt.lower()}", _ctx(archive))
    assert out is not None
    new, media_type = out
    assert media_type == out_type and len(new) < len(data)
    with Image.open(io.BytesIO(new)) as img:
        assert max(img.size) == 1024
        assert abs(img.size[0] / img.size[1] - size[0] / size[1]) < 0.01
        assert not img.info.get("exif")
    assert archive.store == {xxhash.xxh3_128_hexdigest(data): data}


def test_output_is_deterministic() -> None:
    data = _encode(_noise(1400, 1000), "PNG")
    a, b = reduce_image(data, "image/png", _ctx()), reduce_image(data, "image/png", _ctx())
    assert a is not None and a == b


def test_small_images_are_left_alone() -> None:
    data = _encode(_noise(64, 64), "PNG")
    archive = FakeArchive()
    assert reduce_image(data, "image/png", _ctx(archive)) is None
    assert archive.store == {}


def test_svg_without_a_rasteriser_is_left_alone() -> None:
    rects = "".join(
        f'<rect x="{i % 100}" y="{i // 100}" width="1" height="1" fill="#{i:06x}"/>' for i in range(2000)
    )
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" width="100" height="20">{rects}</svg>'.encode()
    assert len(svg) > ReductionConfig().imageSvgMaxBytes
    out = reduce_image(svg, "image/svg+xml", _ctx())
    if out is not None:  # only when cairosvg happens to be installed
        assert out[1] == "image/png" and out[0].startswith(b"\x89PNG")


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n" + b"\x00" * 200_000,
        _encode(_noise(1500, 1500), "PNG")[:150_000],
        b"GIF89a" + bytes(range(256)) * 600,
        b"plain text pretending to be an image " * 5000,
        b"",
    ],
    ids=["broken-png", "truncated-png", "bad-gif", "text", "empty"],
)
def test_broken_or_non_images_never_raise(data: bytes) -> None:
    archive = FakeArchive()
    assert reduce_image(data, "image/png", _ctx(archive)) is None
    assert archive.store == {}


def test_decompression_bomb_is_refused_before_decoding() -> None:
    bomb = _encode(Image.new("L", (12_000, 12_000)), "PNG", optimize=True)
    padded = bomb + b"\x00" * (200_000 - len(bomb)) if len(bomb) < 200_000 else bomb
    assert reduce_image(padded, "image/png", _ctx()) is None
