"""``lightmem2 gateway``: a token printed once, only its digest kept, revocable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lightmem_plugin.commands import gateway
from lightmem_plugin.config import load_config
from lightmem_plugin.errors import UsageError
from lightmem_plugin.security import tenancy


def test_add_user_prints_the_token_once_and_keeps_its_digest(isolated_home: Path) -> None:
    (isolated_home / "config.json").write_text(json.dumps({"mode": "aggressive"}))
    token = gateway.run("add-user", "alice").splitlines()[0]
    assert token.startswith(tenancy.TOKEN_PREFIX) and len(token) > 40
    text = (isolated_home / "config.json").read_text()
    assert token not in text and tenancy.digest(token) in text and '"aggressive"' in text
    users = load_config().gateway.users
    assert tenancy.authenticate(users, token) == "alice"
    again = gateway.run("add-user", "alice").splitlines()[0]  # a new token; the old one stops working
    users = load_config().gateway.users
    assert [u.name for u in users] == ["alice"]
    assert tenancy.authenticate(users, again) == "alice" and tenancy.authenticate(users, token) is None
    gateway.run("add-user", "bob")
    assert gateway.run("users", None) == "alice\nbob"
    gateway.run("remove-user", "alice")
    assert tenancy.authenticate(load_config().gateway.users, again) is None


@pytest.mark.parametrize(
    ("action", "name", "needle"),
    [
        ("add-user", "Alice Smith", "is not allowed"),
        ("remove-user", "carol", "no gateway user 'carol'"),
        ("add-user", None, "needs a user name"),
    ],
)
def test_bad_names_say_what_and_the_fix(
    isolated_home: Path, action: str, name: str | None, needle: str
) -> None:
    with pytest.raises(UsageError, match=needle):
        gateway.run(action, name)
    assert (
        not (isolated_home / "config.json").exists()
        or "Alice" not in (isolated_home / "config.json").read_text()
    )
