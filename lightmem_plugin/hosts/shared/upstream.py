"""Keep the user's own upstream: point lightmem2's proxy at the base URL the host used before.

Why: installing routes the host's traffic through ``lightmem2 serve``; if the host was talking to a
gateway or a non-default provider, the proxy must forward there, not to the public API. The value goes
into lightmem2's own ``config.json`` (``server.upstreams.anthropic`` or ``server.upstreams.named.<id>``).
Several hosts may set one key each in that one file, so this edit is undone key by key, not by
restoring a backup: ``install-upstreams.json`` beside it records, per host, the key and the value it
replaced, and ``--uninstall`` puts exactly that value back (or removes the key).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...config import config_path, dump_like, parse_config
from ...errors import ConfigError
from . import edits as _edits

MISSING = {"missing": True}


def record_path() -> Path:
    """Per host: which upstream key its install set and the value that key had before."""
    return config_path().with_name("install-upstreams.json")


def _load(path: Path) -> dict[str, Any]:
    text = _edits.read_text(path)
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ConfigError(f"{path}: not valid JSON ({err}); fix the file and rerun") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a JSON object; fix the file")
    return data


def _write(path: Path, data: dict[str, Any]) -> str:
    before = _edits.read_text(path)
    after = dump_like(data, before)  # the user's format; the same writer as `lightmem2 mode`
    if before == after:
        return ""
    _edits.write_text(path, after)
    return f"updated: {path}\n" + _edits.diff(path, before, after)


def _node(data: dict[str, Any], keys: list[str], create: bool) -> dict[str, Any] | None:
    node = data
    for key in ["server", "upstreams", *keys[:-1]]:
        nxt = node.get(key)
        if nxt is None and create:
            nxt = node[key] = {}
        if not isinstance(nxt, dict):
            return None
        node = nxt
    return node


def _prune(data: dict[str, Any], keys: list[str]) -> None:
    """Drop the ``server.upstreams...`` objects that removing a key left empty."""
    chain: list[tuple[dict[str, Any], str]] = []
    node = data
    for key in ["server", "upstreams", *keys[:-1]]:
        nxt = node.get(key)
        if not isinstance(nxt, dict):
            break
        chain.append((node, key))
        node = nxt
    for parent, key in reversed(chain):
        if parent[key]:
            break
        del parent[key]


def set_upstream(host: str, keys: list[str], url: str) -> str:
    """Set ``server.upstreams.<keys...>`` to ``url`` for ``host``; a report ("" when unchanged)."""
    path = config_path()
    data = _load(path)
    node = _node(data, keys, True)
    if node is None:
        raise ConfigError(f"{path}: server.upstreams must be an object; fix the file")
    records = _load(record_path())
    if host not in records:
        created = not path.exists() and not records
        records[host] = {"keys": keys, "previous": node.get(keys[-1], MISSING), "createdFile": created}
    node[keys[-1]] = url
    parse_config(data, path)
    report = _write(path, data)
    _write(record_path(), records)
    return report


def restore(host: str) -> str:
    """Undo :func:`set_upstream` for ``host``; a report ("" when it never ran)."""
    records = _load(record_path())
    rec = records.pop(host, None)
    if not isinstance(rec, dict) or not isinstance(rec.get("keys"), list) or not rec["keys"]:
        return ""
    path = config_path()
    data = _load(path)
    keys = [str(k) for k in rec["keys"]]
    node = _node(data, keys, False)
    if node is not None:
        if rec.get("previous") == MISSING:
            node.pop(keys[-1], None)
            _prune(data, keys)
        else:
            node[keys[-1]] = rec.get("previous")
    if not data and not records and rec.get("createdFile"):
        before = _edits.read_text(path)
        path.unlink(missing_ok=True)
        report = f"removed: {path} (install created it)\n" + _edits.diff(path, before, None)
    else:
        report = _write(path, data)
    if records:
        _write(record_path(), records)
    else:
        record_path().unlink(missing_ok=True)
    return report
