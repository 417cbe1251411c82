"""``lightmem2 serve``: the loopback proxy (Anthropic, OpenAI Responses, Chat Completions) and sidecar.

Why loopback by default (I6): the proxy sees the host's API keys on every request. Binding anything
but a loopback address needs an explicit ``allow_remote=True`` (``--allow-remote``), and that needs
``gateway.users``: off loopback every request names its user (:mod:`.gateway`). The socket is
bound here, before the server starts, so a busy port is a one-line UsageError rather than a log dump.
Nothing is imported or started at import time beyond this module's own names.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import sys
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    import uvicorn

    from ..config import Config
    from ..hookspec import LineRunner

__all__ = ["bind_socket", "check_bind", "serve", "server_config", "url_host"]


def check_bind(host: str, allow_remote: bool) -> None:
    """UsageError unless ``host`` is a loopback address (or ``allow_remote`` is set)."""
    if allow_remote or host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise UsageError(
            f"--host {host!r} is not an IP address; use 127.0.0.1 (or ::1), or pass --allow-remote"
        ) from None
    if not loopback:
        raise UsageError(
            f"refusing to listen on {host}: not a loopback address, and the proxy carries your API keys; "
            "use 127.0.0.1, or pass --allow-remote to expose it on the network"
        )


def url_host(host: str) -> str:
    """The host part of a URL that reaches a server bound to ``host`` from this machine: a wildcard
    bind is reached on loopback, an IPv6 address goes in brackets (the hooks, doctor and serve's own
    ``listening on`` line write it alike)."""
    return "127.0.0.1" if host in ("", "0.0.0.0") else f"[{host}]" if ":" in host else host


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one); UsageError if it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must say TCP: asyncio sets TCP_NODELAY on accepted sockets only when it does, and without
    # it Nagle's algorithm adds ~40 ms to every response written in two parts (headers, then body)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as err:
        sock.close()
        raise UsageError(
            f"cannot listen on {host}:{port} ({err.strerror or err}); "
            "pick another --port or stop what uses it"
        ) from None
    sock.set_inheritable(True)
    return sock


KEEP_ALIVE_S = 120


def server_config(app: object) -> uvicorn.Config:
    """How ``serve`` runs ``app`` under uvicorn (uvloop and httptools where installed, as declared).

    Why a long keep-alive: a server that closes an idle connection while the client reuses it makes
    that call fail (measured: a ReadError at the client now and then at 100 streaming clients; httpx
    drops idle connections after 5 s, uvicorn's default, so the two raced). The proxy's idle timeout is
    longer than its clients' own (httpx, undici 4-5 s; Go, hyper 90 s), so it is always the client that
    closes an idle connection, never a request in flight on it.
    """
    import uvicorn

    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
        timeout_keep_alive=KEEP_ALIVE_S,
        server_header=False,  # the provider's own server and date headers are relayed
        date_header=False,
    )


def serve(
    config: Config | None = None,
    host: str | None = None,
    port: int | None = None,
    allow_remote: bool = False,
    commands: LineRunner | None = None,
) -> None:
    """Run the proxy until interrupted.

    ``port`` 0 binds a free port the OS picks and prints ``lightmem2 serve: listening on URL`` on
    stderr first, so whoever started it (a test harness, a supervisor) learns the port without racing
    another process for one it picked in advance.

    ``config`` None follows the user's config file (a ``lightmem2 mode`` switch applies to the next
    call); a given config is used as is. ``host``/``port`` default to ``server.host``/``server.port``.
    ``commands`` answers the sidecar's chat commands (see :func:`.app.create_app`); ``lightmem2 serve``
    passes the command table's :func:`~lightmem_plugin.commands.table.run_remote_line`.
    """
    # lazy: uvicorn, starlette and the pipeline load only when a server runs (see the docstring)
    import uvicorn

    from ..tokens import encoding
    from .memory import tune_allocator, tune_gc

    tune_allocator()  # before any worker thread: big requests' memory goes back once sessions expire

    from ..config import config_in_force
    from ..pipeline import LightMem
    from ..security.redaction import Redactor, install_log_redaction
    from ..store import open_stores
    from .app import create_app

    if config is None:
        cfg, rejected = config_in_force()  # a typo in the file must not leave the hosts without a proxy
        if rejected:
            print(f"lightmem2 serve: {rejected}", file=sys.stderr, flush=True)
    else:
        cfg = config
    server_cfg = cfg.server
    install_log_redaction(Redactor(cfg.redaction.enabled, cfg.redaction.extraPatterns))
    host = host or server_cfg.host
    port = server_cfg.port if port is None else port
    check_bind(host, allow_remote)
    if allow_remote and not cfg.gateway.users:
        raise UsageError(
            "--allow-remote needs gateway.users: off loopback every user needs a token of their own "
            "(their sessions and archives are then theirs alone); run `lightmem2 gateway add-user NAME` "
            "for each user, then start serve again"
        )
    # a gateway's shared database must be there when it starts (StoreUnavailable says why): one that
    # served on state no other process sees would send other bytes than its peers
    stores = open_stores(cfg) if config is None and cfg.store.url else None
    sock = bind_socket(host, port)
    if port == 0:  # the caller cannot know which port the OS picked: say it, as the first stderr line
        bound = sock.getsockname()[1]
        print(f"lightmem2 serve: listening on http://{url_host(host)}:{bound}", file=sys.stderr, flush=True)
    plugin = LightMem(config) if config is not None else LightMem.from_config(stores)
    with contextlib.suppress(OSError):  # what a killed predecessor left mid-write (never fatal)
        plugin.registry.drop_stale_temps()
    app = create_app(plugin, allow_remote=allow_remote, commands=commands)
    encoding()  # the tokenizer (~0.4 s) loads now, not in the first call of the first host
    tune_gc()
    try:
        uvicorn.Server(server_config(app)).run(sockets=[sock])
    finally:
        sock.close()
        if stores is not None:
            stores.close()
