"""A session's persisted state, sealed at rest: what the model saw is unreadable without the archive key.

Why: the session store keeps, per output, the reduced form the model was shown (head and tail verbatim),
and the session record it was given (the user's goals word for word); a credential in either would sit in
``sessions.sqlite3``, its WAL, or a team's PostgreSQL tables in plaintext (measured before this: all 120
planted samples readable there, while the archive beside them was encrypted). Redacting those values is
not an option: a restarted process must send the same bytes as one that never stopped (DESIGN 3), so a
value must come back exactly. So every value (entries and blobs, both backends) is sealed with the
archive's key (:mod:`~.store.sealing`) and opened on load; keys stay plain (they are hashes and sequence
numbers, never content).

Without a key (``registry.encrypt`` off, or no key can be had, which ``doctor`` reports) the values are
redacted instead, as archives then are: a secret's bytes never reach the disk, and a session reloaded from
such a store shows ``[REDACTED:<kind>]`` where the original had the secret (one cache miss, once).
Values written before sealing existed are read as they are.
"""

from __future__ import annotations

import json
from typing import Any

from ..security.redaction import Redactor
from .sealing import Sealer, home_sealer, open_text, seal_text


def dump(value: Any) -> str:
    """The JSON text of a stored value (sorted keys: the same value always gives the same text)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class StateCipher:
    """Seals the values a session store writes and opens what it reads."""

    def __init__(self, sealer: Sealer | None, redactor: Redactor | None = None) -> None:
        self.sealer = sealer
        self.redactor = redactor or Redactor()

    @classmethod
    def from_home(cls, encrypt: bool = True, redactor: Redactor | None = None) -> StateCipher:
        """The cipher of this lightmem2 home: sealed with its archive key, or redacting when
        ``encrypt`` is off or the key cannot be had."""
        return cls(home_sealer() if encrypt else None, redactor)

    def protect(self, text: str) -> str:
        """The stored form of a value's JSON ``text``: sealed, or with every string redacted."""
        if self.sealer is not None:
            return seal_text(self.sealer, text)
        return dump(self._redacted(json.loads(text)))

    def reveal(self, stored: str, name: str = "session state") -> Any:
        """The value behind a stored text (sealed, or plain JSON written without a key or before)."""
        return json.loads(open_text(self.sealer, stored, name))

    def _redacted(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redactor.redact(value)
        if isinstance(value, list):
            return [self._redacted(v) for v in value]
        if isinstance(value, dict):
            return {k: self._redacted(v) for k, v in value.items()}
        return value
