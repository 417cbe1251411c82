from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin.errors import ArtifactCorrupt, ArtifactNotFound, UsageError
from lightmem_plugin.security.redaction import Redactor
from lightmem_plugin.store.registry import Registry, content_key, parse_line_range


def test_put_get_is_byte_exact_and_content_addressed(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "a")
    data = b"line one\nline two\r\n\x00binary\xff"
    key = reg.put(data)
    assert key == content_key(data) and len(key) == 32
    assert reg.get(key) == data
    assert reg.put(data) == key
    assert reg.count() == 1


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=4000))
def test_recovery_is_byte_exact_for_any_bytes(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    reg = Registry(tmp_path_factory.mktemp("r"), redactor=Redactor(enabled=False))
    assert reg.get(reg.put(data)) == data


def test_permissions_are_private(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "store")
    key = reg.put(b"secret-free text")
    assert stat.S_IMODE(os.stat(tmp_path / "store").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(reg.path_of(key)).st_mode) == 0o600


def test_credentials_are_redacted_before_persisting(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "r")
    key = reg.put(b"export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx1234\nok")
    text = reg.recover(key)
    assert "sk-proj" not in text and "[REDACTED:openai_key]" in text and text.endswith("\nok")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("2:3", "b\nc\n"), ("4:", "d"), (":1", "a\n"), ("1:99", "a\nb\nc\nd")],
)
def test_recover_line_ranges(tmp_path: Path, spec: str, expected: str) -> None:
    reg = Registry(tmp_path)
    key = reg.put(b"a\nb\nc\nd")
    assert reg.recover(key, spec) == expected


@pytest.mark.parametrize("spec", ["x", "3:1", "0:2", "1-2"])
def test_bad_line_ranges_are_usage_errors(spec: str) -> None:
    with pytest.raises(UsageError):
        parse_line_range(spec)


def test_unknown_and_malformed_keys(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    with pytest.raises(ArtifactNotFound, match="no artifact"):
        reg.get("0" * 32)
    with pytest.raises(ArtifactNotFound, match="not an artifact key"):
        reg.get("../../etc/passwd")


def test_corruption_is_detected(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    key = reg.put(b"original")
    reg.path_of(key).write_bytes(b"tampered")
    with pytest.raises(ArtifactCorrupt):
        reg.get(key)


def test_gc_drops_least_recently_used_but_never_live(tmp_path: Path) -> None:
    reg = Registry(tmp_path, max_bytes=2500)
    keys = []
    for i in range(5):
        k = reg.put(bytes([65 + i]) * 1000)
        os.utime(reg.path_of(k), (1000 + i, 1000 + i))
        keys.append(k)
    removed = reg.gc(live_keys={keys[0]})
    assert keys[0] not in removed
    assert removed == [keys[1], keys[2], keys[3]]
    assert reg.size_bytes() <= 2500
    assert reg.exists(keys[0]) and reg.exists(keys[4])
