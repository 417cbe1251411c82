"""Redacts known credential patterns from text before it is persisted (DESIGN I6).

Why only on persistence: the model already saw the text in its context; what we must not do is copy a
secret into files that outlive the session. Replacement is ``[REDACTED:<kind>]`` so a reader knows what
was there, and it is deterministic so archive keys stay stable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_PATTERNS: tuple[tuple[str, str], ...] = (
    ("private_key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}"),
    ("github_token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{40,}"),
    ("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("slack_token", r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    ("bearer", r"(?i)(?<=authorization: bearer )[A-Za-z0-9._~+/\-]{16,}=*"),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
)


class Redactor:
    """Applies the built-in patterns plus user ``extraPatterns`` (kind ``custom``)."""

    def __init__(self, enabled: bool = True, extra_patterns: Iterable[str] = ()) -> None:
        self.enabled = enabled
        rules = [(kind, re.compile(pat)) for kind, pat in _PATTERNS]
        rules += [("custom", re.compile(pat)) for pat in extra_patterns]
        self._rules = rules

    def redact(self, text: str) -> str:
        """``text`` with every credential match replaced by ``[REDACTED:<kind>]``."""
        if not self.enabled:
            return text
        for kind, rule in self._rules:
            text = rule.sub(f"[REDACTED:{kind}]", text)
        return text

    def redact_bytes(self, data: bytes) -> bytes:
        """Redact bytes that decode as UTF-8; binary data (images) passes unchanged."""
        if not self.enabled:
            return data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        out = self.redact(text)
        return data if out == text else out.encode("utf-8")
