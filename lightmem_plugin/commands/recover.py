"""recover KEY [--lines A:B]: print an archived original, byte-exact, or a line range of it.

The key is the 32-hex-char name in a ``[lightmem2: ... archived as KEY ...]`` stub. Lines are 1-based
and inclusive; ``A:`` means from A to the end. A user of a team gateway sets ``LIGHTMEM2_GATEWAY_URL``
(the gateway's base URL) and ``LIGHTMEM2_TOKEN`` (their token): the original then comes from the
gateway, which gives each user only what their own sessions archived.
"""

from __future__ import annotations

import argparse
import os

from ..errors import ArtifactNotFound, RegistryError, UsageError
from ..pipeline import LightMem
from ..registry import Registry
from .base import Command, Outcome

GATEWAY_ENV = "LIGHTMEM2_GATEWAY_URL"
TOKEN_ENV = "LIGHTMEM2_TOKEN"


def run(registry: Registry, key: str, lines: str | None = None) -> str:
    """The archived text (or the requested lines of it)."""
    return registry.recover(key.strip(), lines)


def gateway() -> tuple[str, str] | None:
    """(base URL, token) of the team gateway the environment names, None when it names none."""
    url = os.environ.get(GATEWAY_ENV, "").strip()
    if not url:
        return None
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise UsageError(
            f"${GATEWAY_ENV} is set ({url[:80]}) but ${TOKEN_ENV} is not; set it to your gateway token "
            "(an admin prints one with `lightmem2 gateway add-user NAME`), or unset the URL"
        )
    return url.rstrip("/"), token


def remote(url: str, token: str, key: str, lines: str | None = None, timeout_s: float = 30.0) -> str:
    """The archived text from the gateway at ``url``, as the user whose ``token`` it is may see it."""
    import httpx

    from ..tenancy import TOKEN_HEADER

    body: dict[str, str] = {"key": key.strip()}
    if lines is not None:
        body["lines"] = lines
    try:
        r = httpx.post(
            url + "/lightmem2/v1/recover", json=body, headers={TOKEN_HEADER: token}, timeout=timeout_s
        )
        answer = r.json()
    except (httpx.HTTPError, ValueError) as err:
        raise RegistryError(
            f"cannot recover {key[:40]} from the gateway {url} ({type(err).__name__}: {err}); check "
            f"${GATEWAY_ENV} and that the gateway runs"
        ) from None
    if r.status_code == 200 and isinstance(answer.get("text"), str):
        return str(answer["text"])
    message = str(answer.get("error") if isinstance(answer, dict) else answer)[:300]
    if r.status_code == 404:
        raise ArtifactNotFound(f"{message} (gateway {url})")
    if r.status_code in (400, 401):
        raise UsageError(f"the gateway {url} refused: {message}")
    raise RegistryError(f"the gateway {url} answered {r.status_code}: {message}")


def configure(parser: argparse.ArgumentParser) -> None:
    """``KEY``, ``--lines A:B``."""
    parser.add_argument("key", help="artifact key from a stub (32 hex chars)")
    parser.add_argument("--lines", metavar="A:B", help="1-based inclusive line range")


def main(args: argparse.Namespace) -> Outcome:
    """``lightmem2 recover`` from the user's registry (or their team gateway's)."""
    found = gateway()
    if found is not None:
        return remote(*found, args.key, args.lines)
    return run(LightMem.from_config().registry, args.key, args.lines)


COMMAND = Command("recover", __doc__, configure, main, verbatim=True)
