"""Who may talk to ``lightmem2 serve``: the checks run before any route sees a request.

Why each check:

* ``Host`` must be a loopback name (``127.0.0.1``, ``localhost``, ``::1``, any port). A web page can
  point a DNS name it controls at 127.0.0.1 ("DNS rebinding") and then read the answers as same-origin;
  the browser still sends the page's own name as ``Host``, so refusing every other name closes that.
  Sidecar routes always need it; proxy routes too, unless serve runs with ``--allow-remote`` (then the
  proxy is meant to be reached under other names, but the sidecar never is).
* Sidecar routes refuse any request with an ``Origin`` header: browsers send one on every cross-site
  POST, our plugin (Node's fetch) never does.
* Sidecar POSTs must be ``application/json``: a page may send ``text/plain`` without a CORS preflight,
  never JSON.
* Sidecar routes need the per-install secret (:mod:`.secret`) in ``X-Lightmem2-Secret``: loopback is
  shared with every other local user.

A refusal answers a one-line JSON error saying what was wrong and the fix, nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import AccessDenied, SecretError
from .proxy import error_body
from .secret import HEADER, load_or_create, matches, read_secret

LOOPBACK_NAMES = frozenset(("127.0.0.1", "localhost", "::1"))
SIDECAR_PREFIX = "/sidecar/"


def host_name(value: str) -> str | None:
    """The name part of a ``Host`` header (``[::1]:80`` -> ``::1``), or None if it is malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        inner, sep, rest = value[1:].partition("]")
        if not sep or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return inner
    if value.count(":") > 1:
        return value  # a bare IPv6 address such as ::1
    name, sep, port = value.partition(":")
    if sep and not port.isdigit():
        return None
    return name


def is_loopback_host(value: str | None) -> bool:
    """True for a ``Host`` header naming this machine's loopback interface (any port)."""
    return value is not None and host_name(value) in LOOPBACK_NAMES


def host_refusal(value: str | None, sidecar: bool) -> str:
    """The error text for a non-loopback ``Host``."""
    shown = repr(value[:80]) if value is not None else "(none)"
    if sidecar:
        return (
            f"Host {shown} is not a loopback name; the sidecar answers only to 127.0.0.1, localhost or [::1] "
            "(a browser page may be trying DNS rebinding); call it as http://127.0.0.1:PORT"
        )
    return (
        f"Host {shown} is not a loopback name; point the client at http://127.0.0.1:PORT, or start "
        "`lightmem2 serve --allow-remote` to accept other names"
    )


class LoopbackHost:
    """ASGI middleware: refuse a non-loopback ``Host`` (sidecar always, proxy unless ``allow_remote``)."""

    def __init__(self, app: ASGIApp, allow_remote: bool = False) -> None:
        self.app = app
        self.allow_remote = allow_remote

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = str(scope.get("path", ""))
            sidecar = path.startswith(SIDECAR_PREFIX)
            if sidecar or not self.allow_remote:
                headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
                host = headers.get("host")
                if not is_loopback_host(host):
                    message = host_refusal(host, sidecar)
                    if sidecar:
                        body: object = {"error": message}
                    else:
                        api = (
                            "anthropic"
                            if path.startswith("/v1/messages") or "anthropic-version" in headers
                            else "chat"
                        )
                        body = error_body(api, 403, message)
                    await JSONResponse(body, status_code=403)(scope, receive, send)
                    return
        await self.app(scope, receive, send)


class SidecarGuard:
    """Checks one sidecar request: no ``Origin``, the secret, and JSON for POSTs (AccessDenied if not)."""

    def __init__(self, path: Path | None = None, secret: str | None = None) -> None:
        from .secret import secret_path

        self.path = path or secret_path()
        self._secret = secret
        self._error: str | None = None
        if secret is None:
            self._load()

    def _load(self) -> None:
        try:
            self._secret, self._error = load_or_create(self.path), None
        except SecretError as err:
            self._error = str(err)

    @property
    def secret(self) -> str | None:
        """The secret in force (None while it cannot be created; every sidecar call then gets a 503)."""
        if self._secret is None:
            self._load()
        return self._secret

    def check(self, method: str, headers: Mapping[str, str]) -> None:
        """AccessDenied (with its HTTP status) unless the request may use a sidecar route."""
        self.check_origin(headers)
        self.check_secret(headers)
        if method == "POST":
            kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if kind != "application/json":
                raise AccessDenied(
                    f"Content-Type {kind or '(none)'!r} is not accepted; sidecar POSTs must be application/json",
                    415,
                )

    def check_origin(self, headers: Mapping[str, str]) -> None:
        """AccessDenied if the request comes from a web page (it carries an ``Origin``)."""
        if "origin" in headers:
            raise AccessDenied(
                f"Origin {headers['origin'][:80]!r}: requests from web pages are refused; the sidecar is "
                "for the lightmem2 OpenClaw plugin only, which sends no Origin header",
                403,
            )

    def check_secret(self, headers: Mapping[str, str]) -> None:
        """AccessDenied unless ``X-Lightmem2-Secret`` holds this install's secret (re-read once on a miss)."""
        secret = self.secret
        if secret is None:
            raise AccessDenied(f"the sidecar has no secret yet ({self._error}); fix that and retry", 503)
        presented = headers.get(HEADER)
        fix = (
            "send the contents of the file `lightmem2 config secret-path` prints, as the user who runs "
            "serve and with the same LIGHTMEM2_HOME"
        )
        if presented is None:
            raise AccessDenied(f"missing X-Lightmem2-Secret header: /sidecar routes need it; {fix}", 401)
        if matches(secret, presented):
            return
        try:  # the file may have been replaced since we read it (deleted, then recreated by the plugin)
            current = read_secret(self.path, wait_s=0)  # never block the loop
        except (OSError, SecretError):
            current = secret
        if current != secret:
            self._secret = current
            if matches(current, presented):
                return
        raise AccessDenied(f"X-Lightmem2-Secret does not match this server's secret; {fix}", 403)
