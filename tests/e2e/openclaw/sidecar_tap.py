"""A recording tap between the OpenClaw plugin and its sidecar, for the end-to-end tests.

Set as the plugin's ``openclaw.command``, through a one-line shell wrapper:
``python sidecar_tap.py REAL_LIGHTMEM2 LOG ARGS...``. Any command but ``serve`` runs the real
``lightmem2`` unchanged. ``serve --host H --port P`` starts the real ``lightmem2 serve`` on a
loopback port it picks (``--port 0``) and forwards every request the plugin sends to ``P`` to it, byte for byte (headers,
the secret and the health challenge included), appending each POST to a ``/sidecar/...`` route to
``LOG`` as one JSON line ``{"path", "body"}``. So a test sees what the plugin sent over the wire,
with the product unchanged. The real serve is stopped with the tap (SIGTERM, and the kernel's
parent-death signal if the tap is killed).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import threading
from typing import Any

PR_SET_PDEATHSIG = 1
HOP_HEADERS = {"host", "content-length", "connection", "transfer-encoding", "keep-alive"}


LISTENING = re.compile(r"lightmem2 serve: listening on (http://127\.0\.0\.1:\d+)$")


def _start_serve(real: str) -> tuple[subprocess.Popen[str], str]:
    """The real ``lightmem2 serve`` on a port it picks itself (``--port 0``: no race for a port picked
    here), and its URL, read from the line it announces it with; the rest of its stderr is relayed."""
    child = subprocess.Popen(
        [real, "serve", "--host", "127.0.0.1", "--port", "0"],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_die_with_parent,
    )
    assert child.stderr is not None
    for line in child.stderr:
        found = LISTENING.match(line.rstrip("\n"))
        if found:
            threading.Thread(target=_relay, args=(child.stderr,), daemon=True).start()
            return child, found.group(1)
        sys.stderr.write(line)
    raise SystemExit(f"tap: lightmem2 serve exited ({child.wait()}) before it listened")


def _relay(stream: Any) -> None:
    for line in stream:
        sys.stderr.write(line)


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _app(target: str, log_path: str) -> Any:
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    client = httpx.AsyncClient(base_url=target, timeout=60)

    async def forward(request: Request) -> Response:
        raw = await request.body()
        if request.method == "POST" and request.url.path.startswith("/sidecar/"):
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(json.dumps({"path": request.url.path, "body": body}) + "\n")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        try:
            answer = await client.request(
                request.method, request.url.path, params=request.url.query, content=raw, headers=headers
            )
        except httpx.HTTPError as err:
            return Response(f"tap: sidecar not reachable ({type(err).__name__})", 502)
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS}
        kept.pop("content-encoding", None)
        return Response(answer.content, answer.status_code, headers=kept)

    return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])])


def main(argv: list[str]) -> int:
    real, log_path, *args = argv
    if not args or args[0] != "serve":
        os.execv(real, [real, *args])
    port = int(args[args.index("--port") + 1])
    child, inner = _start_serve(real)
    try:
        import uvicorn

        uvicorn.run(
            _app(inner, log_path),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            access_log=False,
        )
    finally:
        child.terminate()
        try:
            child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=5)
    return 0


def tapped(path: str) -> list[dict[str, Any]]:
    """The requests a tap logged to ``path``, in order."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as log:
        return [json.loads(line) for line in log if line.strip()]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
