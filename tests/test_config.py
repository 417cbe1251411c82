from __future__ import annotations

import json
from pathlib import Path

import pytest

from lightmem_plugin.config import Config, ConfigHolder, config_path, load_config, schema_text
from lightmem_plugin.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_schema_file_is_in_sync_with_the_model() -> None:
    on_disk = (ROOT / "config.schema.json").read_text(encoding="utf-8")
    assert on_disk == schema_text(), "config.schema.json is stale: run `make schema`"


def test_defaults_follow_the_design_mode_table() -> None:
    c = Config()
    assert (c.reduction.conservative.triggerChars, c.reduction.conservative.capChars) == (4000, 1800)
    assert (c.reduction.normal.triggerChars, c.reduction.normal.capChars) == (2200, 1200)
    assert (c.reduction.aggressive.triggerChars, c.reduction.aggressive.capChars) == (1400, 900)
    assert c.reduction.aggressive.eviction and not c.reduction.normal.eviction
    assert c.eviction.batchTurns == 3
    assert c.server.host == "127.0.0.1"
    assert "truncate" not in c.reduction.conservative.passes


def test_camel_case_keys_round_trip(isolated_home: Path) -> None:
    data = {"mode": "aggressive", "eviction": {"batchTurns": 5}, "estimator": {"proxyBaseUrl": "http://x/v1"}}
    config_path().write_text(json.dumps(data))
    c = load_config()
    assert c.mode == "aggressive" and c.eviction.batchTurns == 5
    assert c.estimator.proxyBaseUrl == "http://x/v1"
    dumped = c.model_dump(by_alias=True)
    assert dumped["eviction"]["batchTurns"] == 5


@pytest.mark.parametrize(
    ("data", "needles"),
    [
        ({"mode": "agressive"}, ["mode", '"agressive"', "conservative", "aggressive"]),
        ({"eviction": {"batchTurns": 0}}, ["eviction.batchTurns", "0"]),
        ({"reduction": {"normal": {"capChars": "big"}}}, ["reduction.normal.capChars", '"big"']),
        ({"registry": {"maxByte": 5}}, ["registry.maxByte", "5", "not a config key", "registry.maxBytes"]),
    ],
)
def test_bad_config_gives_one_line_naming_file_key_and_value(
    isolated_home: Path, data: dict[str, object], needles: list[str]
) -> None:
    config_path().write_text(json.dumps(data))
    with pytest.raises(ConfigError) as err:
        load_config()
    msg = str(err.value)
    assert "\n" not in msg
    assert str(config_path()) in msg
    for needle in needles:
        assert needle in msg


def test_invalid_json_names_line_and_column(isolated_home: Path) -> None:
    config_path().write_text('{"mode": "normal",\n  oops}')
    with pytest.raises(ConfigError, match=r"line 2 column 3"):
        load_config()


def test_last_good_config_stays_in_force(isolated_home: Path) -> None:
    path = config_path()
    path.write_text(json.dumps({"mode": "aggressive"}))
    holder = ConfigHolder(path)
    assert holder.current.mode == "aggressive"
    path.write_text(json.dumps({"mode": "turbo"}))
    import os

    os.utime(path, (1, 1))
    assert holder.reload().mode == "aggressive"
    assert holder.last_error is not None and "turbo" in holder.last_error


def test_a_new_process_keeps_the_last_good_config_not_the_defaults(isolated_home: Path) -> None:
    path = config_path()
    path.write_text(json.dumps({"mode": "aggressive"}))
    assert ConfigHolder(path).current.mode == "aggressive"  # a good read is remembered
    path.write_text(json.dumps({"mode": "turbo"}))
    fresh = ConfigHolder(path)  # e.g. the next hook process, or `lightmem2 status`
    assert fresh.current.mode == "aggressive" and fresh.source == "last-good"
    assert fresh.last_error is not None and '"turbo"' in fresh.last_error
    assert "last good" in fresh.in_force


def test_a_file_bad_from_the_first_read_runs_on_the_defaults_and_says_so(isolated_home: Path) -> None:
    path = config_path()
    path.write_text(json.dumps({"mode": "turbo"}))
    holder = ConfigHolder(path)
    assert holder.current == Config() and holder.source == "defaults"
    assert "defaults" in holder.in_force and "turbo" in (holder.last_error or "")


@pytest.mark.parametrize(
    ("data", "needles"),
    [
        ({"reduction": {"normal": {"triggerChars": "lots"}}}, ["reduction.normal.triggerChars", '"lots"']),
        ({"triggerChars": "lots"}, ["triggerChars", "not a config key", "reduction.normal.triggerChars"]),
    ],
)
def test_a_bad_trigger_chars_is_reported_not_ignored(
    isolated_home: Path, data: dict[str, object], needles: list[str]
) -> None:
    path = config_path()
    path.write_text(json.dumps({"mode": "aggressive"}))
    ConfigHolder(path)
    path.write_text(json.dumps(data))
    holder = ConfigHolder(path)
    assert holder.current.mode == "aggressive" and holder.last_error is not None
    for needle in needles:
        assert needle in holder.last_error
