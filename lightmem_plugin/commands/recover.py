"""recover KEY [--lines A:B]: print an archived original, byte-exact, or a line range of it.

The key is the 32-hex-char name in a ``[lightmem2: ... archived as KEY ...]`` stub. Lines are 1-based
and inclusive; ``A:`` means from A to the end.
"""

from __future__ import annotations

from ..registry import Registry


def run(registry: Registry, key: str, lines: str | None = None) -> str:
    """The archived text (or the requested lines of it)."""
    return registry.recover(key.strip(), lines)
