"""Who may see what on a team gateway: user tokens, and the sessions and archives each user owns.

Why tokens per user: a gateway off loopback (``serve --allow-remote``) is reached by a whole team, and
what it keeps (sessions' decisions, archived tool outputs, ledger rows) is each user's own work. Every
request names its user with ``x-lightmem2-token: <token>``, a header of its own so the provider's key
(``x-api-key``, ``Authorization``) passes through untouched and is never stored. Hosts add it without
code: Claude Code ``ANTHROPIC_CUSTOM_HEADERS``, Codex ``http_headers``/``env_http_headers`` of a model
provider, OpenClaw ``models.providers.<id>.headers``, the OpenAI and Anthropic SDKs ``default_headers``.

At rest only the token's SHA-256 is kept (``gateway.users``): tokens are 256 random bits, so a slow
password hash would add nothing; presented tokens are compared with :func:`hmac.compare_digest` against
every user's digest (no early exit, so timing does not say which user nearly matched).

Scoping: a user's session ``S`` is kept as ``user:<name>/S`` (:func:`scoped`), so two users never share
one (even with the same conversation head) and a user can only ever name their own; an artifact is
visible to the users whose sessions archived it (ownership rows beside the registry, see
:meth:`lightmem_plugin.store.registry.Registry.owns`). Another user's session or key is answered as unknown
(404), never "forbidden": a 403 would confirm that it exists. None of this is in what the model reads,
so the bytes sent upstream do not depend on it (DESIGN I1).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from typing import Protocol

TOKEN_HEADER = "x-lightmem2-token"
TOKEN_PREFIX = "lm2_"
_SCOPE = "user:"


class _User(Protocol):
    name: str
    tokenSha256: str


def new_token() -> str:
    """A fresh user token: ``lm2_`` and 43 URL-safe characters (256 random bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    """The hex SHA-256 of ``token``, as ``gateway.users[].tokenSha256`` keeps it."""
    return hashlib.sha256(token.strip().encode("utf-8", "surrogatepass")).hexdigest()


def authenticate(users: Iterable[_User], presented: str | None) -> str | None:
    """The name of the user whose token ``presented`` is, or None (absent, or no user's)."""
    if not presented:
        return None
    given = digest(presented).encode("ascii")
    found: str | None = None
    for user in users:  # every digest is compared: the time taken does not depend on which one matched
        if hmac.compare_digest(given, user.tokenSha256.encode("ascii")) and found is None:
            found = user.name
    return found


def scoped(user: str | None, session_id: str) -> str:
    """The stored id of ``user``'s session ``session_id`` (unchanged for the single loopback user)."""
    return session_id if user is None else f"{_SCOPE}{user}/{session_id}"


def owner_of(stored_id: str | None) -> str | None:
    """The user a stored session id belongs to (None: the single loopback user's)."""
    if not stored_id or not stored_id.startswith(_SCOPE):
        return None
    name, sep, _rest = stored_id[len(_SCOPE) :].partition("/")
    return name if sep else None


def own_view(user: str, stored_id: str) -> str | None:
    """``stored_id`` as ``user`` names it, or None when it is not one of ``user``'s sessions."""
    prefix = f"{_SCOPE}{user}/"
    return stored_id[len(prefix) :] if stored_id.startswith(prefix) else None
