"""load_trace: format sniffing, gzip by magic bytes, and the errors for files it cannot read."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from lightmem_plugin.errors import TraceError
from lightmem_plugin.measure.traces import load_trace

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize(
    ("name", "kind", "calls"),
    [
        ("deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz", "swe", 16),
        ("short.jsonl.gz", "claude-code", 1),
        ("tool_heavy.jsonl.gz", "claude-code", 4),
    ],
)
def test_sniffs_format_whatever_the_name(tmp_path: Path, name: str, kind: str, calls: int) -> None:
    gz = tmp_path / "session.bin"
    shutil.copy(DATA / name, gz)
    plain = tmp_path / "session.txt"
    plain.write_bytes(gzip.decompress((DATA / name).read_bytes()))
    for path in (DATA / name, gz, plain):
        trace = load_trace(str(path))
        assert (trace.kind, len(trace.calls)) == (kind, calls)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty"),
        (b"  \n", "is empty"),
        (b'{"hello": 1}', "is not a swe session"),
        (b"hello world", "is not a swe session"),
        (b"\xff\xfe\x00", "is not UTF-8 text"),
        (b"\x1f\x8b\x08\x00garbage", "damaged gzip file"),
    ],
)
def test_unreadable_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=message) as info:
        load_trace(path)
    assert str(path) in str(info.value)
    assert info.value.exit_code == 2


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"cannot read trace .*nope\.json"):
        load_trace(tmp_path / "nope.json")
