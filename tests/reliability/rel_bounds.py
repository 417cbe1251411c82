"""Measure time and peak memory of ``before_model_call`` on huge hostile tool outputs, one JSON line each.

    python rel_bounds.py HOME SCALE CASE...

Runs in its own process so peak RSS is the pipeline's own: before each case the kernel's high-water
mark is reset (``/proc/self/clear_refs``), and the growth of ``VmHWM`` over the resident size at the
start is reported. Each line: case, chars, seconds, peak_mb, errors, and whether the output is
either the input or a stub that recovers it (``intact``).
"""

from __future__ import annotations

import base64
import io
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rel_convo import head, turn

from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys


def _html(n: int) -> str:
    row = "<tr><td><a href='/x'>item</a></td><td><b>bold</b> text</td></tr>\n"
    return (
        "<!doctype html><html><head><title>t</title></head><body><table>"
        + row * (n // len(row))
        + "</table></body></html>"
    )


def _json(n: int) -> str:
    item = {"id": 1, "name": "widget", "tags": ["a", "b"], "nested": {"x": [1, 2, 3]}}
    count = n // len(json.dumps(item))
    return json.dumps([{**item, "id": i} for i in range(count)])


CASES: dict[str, Callable[[int], str]] = {
    "single_line": lambda n: ("token " * (n // 6))[:n],
    "newline_flood": lambda n: "\n" * n,
    "short_lines": lambda n: "x\n" * (n // 2),
    "deep_json_text": lambda n: '{"a":' * (n // 6) + "1" + "}" * (n // 6),
    "deep_list_text": lambda n: "[" * (n // 2) + "]" * (n // 2),
    "html_div_bomb": lambda n: "<html><body>" + "<div>" * (n // 5) + "</body></html>",
    "html_doc": _html,
    "json_doc": _json,
    "repeated_error": lambda n: "ERROR connection refused (retrying)\n" * (n // 36),
    "ansi_soup": lambda n: "\x1b[1;31mred\x1b[0m \x1b]0;title\x07" * (n // 25),
    "lone_surrogates": lambda n: "ok \ud800 \udfff\n" * (n // 10),
}
SIZES = {"single_line": 5_000_000}
DEFAULT = 1_000_000


def _hwm_kb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM"):
                return int(line.split()[1])
    return 0


def _rss_kb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0


def _png_bomb(side: int) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGBA", (side, side)).save(buf, "PNG", optimize=True)
    return base64.b64encode(buf.getvalue()).decode()


def run_case(lm: LightMem, name: str, scale: float) -> dict[str, object]:
    if name.startswith("png_bomb_"):
        side = int(name.removeprefix("png_bomb_"))
        url = "data:image/png;base64," + _png_bomb(side)
        content: object = [{"type": "image_url", "image_url": {"url": url}}]
        chars = len(url)
    else:
        text = CASES[name](int(SIZES.get(name, DEFAULT) * scale))
        content, chars = text, len(text)
    msgs = head(name) + turn(name, 0, "x")
    msgs[-1]["content"] = content
    session = lm.session(name)
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    base = _rss_kb()
    start = time.perf_counter()
    out = session.before_model_call(msgs)
    seconds = time.perf_counter() - start
    peak_mb = max(0, _hwm_kb() - base) / 1024
    sent = out[-1]["content"]
    if isinstance(content, str):
        keys = stub_keys(sent) if isinstance(sent, str) else []
        intact = sent == content or any(
            lm.registry.get(k) == lm.registry.redactor.redact_bytes(content.encode("utf-8", "surrogatepass"))
            for k in keys
        )
        out_chars = len(sent) if isinstance(sent, str) else -1
    else:
        intact, out_chars = True, -1
    return {
        "case": name,
        "chars": chars,
        "out_chars": out_chars,
        "seconds": round(seconds, 3),
        "peak_mb": round(peak_mb, 1),
        "errors": dict(session.fail.errors),
        "intact": intact,
    }


def main() -> None:
    home, scale, names = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
    os.environ["LIGHTMEM2_HOME"] = str(home)
    cfg = Config()
    cfg.registry.dir = str(home / "artifacts")
    lm = LightMem(cfg)
    for name in names:
        print(json.dumps(run_case(lm, name, scale)), flush=True)


if __name__ == "__main__":
    main()
