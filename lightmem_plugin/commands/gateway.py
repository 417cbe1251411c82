"""gateway add-user NAME | remove-user NAME | users: the users of a team gateway and their tokens.

``add-user NAME`` creates a token for NAME, prints it once and stores only its SHA-256 in the config
(``gateway.users``); a running ``serve`` picks the change up on its next request. Give the token to the
user: their requests carry it in the ``x-lightmem2-token`` header (Claude Code:
``ANTHROPIC_CUSTOM_HEADERS="x-lightmem2-token: TOKEN"``), and each user sees only their own sessions,
archives, search hits and report. Adding an existing user gives them a new token (the old one stops
working). ``remove-user NAME`` revokes a user's token; ``users`` lists the names.
"""

from __future__ import annotations

import argparse

from ..config import GatewayUser, check_user_name, config_path, load_config, merge_config_keys
from ..errors import UsageError
from ..security import tenancy
from .base import Command, Outcome

ACTIONS = ("add-user", "remove-user", "users")


def _save(users: list[GatewayUser]) -> None:
    merge_config_keys({"gateway": {"users": [u.model_dump(by_alias=True) for u in users]}})


def add_user(name: str) -> str:
    """A new token for ``name`` (printed once; only its digest is stored)."""
    token = tenancy.new_token()
    user = GatewayUser(name=name, tokenSha256=tenancy.digest(token))  # validates the name
    users = [u for u in load_config().gateway.users if u.name != name]
    _save([*users, user])
    return token


def remove_user(name: str) -> None:
    """Revoke ``name``'s token (UsageError when there is no such user)."""
    users = load_config().gateway.users
    if name not in {u.name for u in users}:
        known = ", ".join(u.name for u in users) or "none"
        raise UsageError(f"no gateway user {name!r}; users: {known}")
    _save([u for u in users if u.name != name])


def run(action: str, name: str | None) -> str:
    """The text ``lightmem2 gateway ACTION [NAME]`` prints."""
    if action == "users":
        names = [u.name for u in load_config().gateway.users]
        return "\n".join(names) if names else f"no gateway users in {config_path()}"
    if not name:
        raise UsageError(f"gateway {action} needs a user name, e.g. `lightmem2 gateway {action} alice`")
    if action == "add-user":
        try:
            check_user_name(name)
        except ValueError as err:
            raise UsageError(str(err)) from None
        token = add_user(name)
        return (
            f"{token}\n"
            f"user {name}: this token is shown once, only its SHA-256 is kept in {config_path()}; "
            "send it as the x-lightmem2-token header"
        )
    remove_user(name)
    return f"user {name} removed; their token no longer works"


def configure(parser: argparse.ArgumentParser) -> None:
    """``add-user NAME``, ``remove-user NAME`` or ``users``."""
    parser.add_argument("action", choices=ACTIONS)
    parser.add_argument("name", nargs="?")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 gateway ...``."""
    return run(args.action, args.name)


COMMAND = Command("gateway", __doc__, configure, main, chat=False)
