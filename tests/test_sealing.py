"""Artifacts at rest: stored exactly, encrypted with the home's key, byte-exact on recover."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

from lightmem_plugin.config import Config
from lightmem_plugin.errors import ArtifactCorrupt, SecretError
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.store.registry import Registry, content_key
from lightmem_plugin.store.sealing import KEY_ENV, MAGIC, Sealer, key_path, load_key

SECRET = "POSTGRES_PASSWORD=hunter2-but-longer-9f8e7d\nSECRET_KEY = 'django-insecure-abc123'\n"


def test_the_archive_keeps_the_exact_bytes_and_the_disk_holds_none_of_them(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "a", sealer=Sealer(os.urandom(32)))
    data = ("settings.py\n" + SECRET).encode()
    key = reg.put(data)
    assert key == content_key(data)  # stubs name the plaintext's hash, as before
    assert reg.get(key) == data and reg.recover(key) == data.decode()  # byte-exact: nothing redacted
    on_disk = reg.path_of(key).read_bytes()
    assert on_disk.startswith(MAGIC) and b"hunter2" not in on_disk and b"settings.py" not in on_disk
    assert stat.S_IMODE(reg.path_of(key).stat().st_mode) == 0o600
    assert reg.put(data) == key and reg.path_of(key).read_bytes() == on_disk  # stored once


def test_without_a_sealer_the_archive_is_redacted_as_before(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "a")
    key = reg.put(SECRET.encode())
    assert b"hunter2" not in reg.get(key) and b"[REDACTED:" in reg.get(key)


def test_an_altered_or_foreign_artifact_is_refused_with_the_reason(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "a", sealer=Sealer(os.urandom(32)))
    key = reg.put(b"some output\n" * 20)
    other = Registry(tmp_path / "a", sealer=Sealer(os.urandom(32)))
    with pytest.raises(ArtifactCorrupt, match="another archive key"):
        other.get(key)
    blob = bytearray(reg.path_of(key).read_bytes())
    blob[-1] ^= 1
    reg.path_of(key).write_bytes(bytes(blob))
    with pytest.raises(ArtifactCorrupt, match="altered"):
        reg.get(key)
    with pytest.raises(ArtifactCorrupt, match="no archive key"):
        Registry(tmp_path / "a").get(key)


def test_artifacts_written_before_sealing_still_recover(tmp_path: Path) -> None:
    old = Registry(tmp_path / "a")
    key = old.put(b"plain old artifact\n")
    assert Registry(tmp_path / "a", sealer=Sealer(os.urandom(32))).get(key) == b"plain old artifact\n"


def test_the_home_key_is_made_once_private_and_the_environment_wins(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    first = load_key()
    assert load_key() == first and len(first) == 32
    path = key_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    given = os.urandom(32)
    monkeypatch.setenv(KEY_ENV, base64.b64encode(given).decode())
    assert load_key() == given
    monkeypatch.setenv(KEY_ENV, "not-a-key")
    with pytest.raises(SecretError, match="not 32 bytes of base64"):
        load_key()


def test_a_plugin_seals_by_default_and_recover_returns_the_original(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    lm = LightMem(config=Config(mode="normal"))
    assert lm.registry.sealer is not None
    key = lm.registry.put(SECRET.encode())
    assert lm.registry.recover(key) == SECRET
    off = LightMem(config=Config.model_validate({"registry": {"encrypt": False}}))
    assert off.registry.sealer is None


def test_doctor_says_whether_archives_are_sealed(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lightmem_plugin.commands.doctor import check_archive_key

    monkeypatch.delenv(KEY_ENV, raising=False)
    assert check_archive_key(Config()).status == "pass"  # absent: made on first archive
    load_key()
    assert "sealed (AES-GCM)" in check_archive_key(Config()).detail
    key_path().chmod(0o644)
    bad = check_archive_key(Config())
    assert bad.status == "fail" and "readable by others" in bad.detail
    off = check_archive_key(Config.model_validate({"registry": {"encrypt": False}}))
    assert off.status == "warn" and "not byte-exact" in off.detail
