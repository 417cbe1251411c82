"""The client side of a team gateway: which gateway the environment names, and one POST to it.

Why a module of its own: ``lightmem2 recover``/``search`` and the MCP tools of a gateway user all ask
the gateway instead of this machine's archives, and the MCP server must not import the pipeline
(~0.4 s) to do so. A user sets ``LIGHTMEM2_GATEWAY_URL`` (the gateway's base URL) and
``LIGHTMEM2_TOKEN`` (their token); the gateway answers only with what that user's sessions archived.
"""

from __future__ import annotations

import os

from ..errors import ArtifactNotFound, RegistryError, UsageError

GATEWAY_ENV = "LIGHTMEM2_GATEWAY_URL"
TOKEN_ENV = "LIGHTMEM2_TOKEN"


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


def post(
    url: str, token: str, route: str, body: dict[str, object], what: str, timeout_s: float = 30.0
) -> dict[str, object]:
    """POST ``body`` to the gateway's ``route`` as the user whose ``token`` it is; the JSON answer.

    Failures are this package's errors, each naming the gateway: 404 :class:`ArtifactNotFound`, a
    refusal (400, 401) :class:`UsageError`, anything else :class:`RegistryError`. ``what`` says what
    was asked for, in the message of an unreachable gateway."""
    import httpx

    from ..security.tenancy import TOKEN_HEADER

    try:
        r = httpx.post(url + route, json=body, headers={TOKEN_HEADER: token}, timeout=timeout_s)
        answer = r.json()
    except (httpx.HTTPError, ValueError) as err:
        raise RegistryError(
            f"cannot {what} from the gateway {url} ({type(err).__name__}: {err}); check "
            f"${GATEWAY_ENV} and that the gateway runs"
        ) from None
    if r.status_code == 200 and isinstance(answer, dict):
        return answer
    message = str(answer.get("error") if isinstance(answer, dict) else answer)[:300]
    if r.status_code == 404:
        raise ArtifactNotFound(f"{message} (gateway {url})")
    if r.status_code in (400, 401):
        raise UsageError(f"the gateway {url} refused: {message}")
    raise RegistryError(f"the gateway {url} answered {r.status_code}: {message}")
