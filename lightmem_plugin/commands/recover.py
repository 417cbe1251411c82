"""recover KEY [--lines A:B]: print an archived original, byte-exact, or a line range of it.

The key is the name in a ``[lightmem2: ... archived as KEY ...]`` stub (12 to 32 hex chars: a short
prefix of the content key, or the whole key, as search prints it). Lines are 1-based
and inclusive; ``A:`` means from A to the end. A user of a team gateway sets ``LIGHTMEM2_GATEWAY_URL``
(the gateway's base URL) and ``LIGHTMEM2_TOKEN`` (their token): the original then comes from the
gateway, which gives each user only what their own sessions archived.
"""

from __future__ import annotations

import argparse

from ..config import config_in_force
from ..errors import RegistryError
from ..server.gateway_client import gateway, post
from ..store import reading_registry
from ..store.registry import Registry
from .base import Command, Outcome


def run(registry: Registry, key: str, lines: str | None = None) -> str:
    """The archived text (or the requested lines of it)."""
    return registry.recover(key.strip(), lines)


def remote(url: str, token: str, key: str, lines: str | None = None, timeout_s: float = 30.0) -> str:
    """The archived text from the gateway at ``url``, as the user whose ``token`` it is may see it."""
    body: dict[str, object] = {"key": key.strip()}
    if lines is not None:
        body["lines"] = lines
    answer = post(url, token, "/lightmem2/v1/recover", body, f"recover {key[:40]}", timeout_s)
    text = answer.get("text")
    if not isinstance(text, str):
        raise RegistryError(f"the gateway {url} answered without the text of {key[:40]}: {str(answer)[:200]}")
    return text


def configure(parser: argparse.ArgumentParser) -> None:
    """``KEY``, ``--lines A:B``."""
    parser.add_argument("key", help="artifact key from a stub (12 to 32 hex chars)")
    parser.add_argument("--lines", metavar="A:B", help="1-based inclusive line range")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 recover`` from the user's registry (or their team gateway's)."""
    found = gateway()
    if found is not None:
        return remote(*found, args.key, args.lines)
    with reading_registry(config_in_force()[0]) as registry:
        return run(registry, args.key, args.lines)


COMMAND = Command("recover", __doc__, configure, main, verbatim=True)
