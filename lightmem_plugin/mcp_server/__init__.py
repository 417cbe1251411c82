"""The recover tool as an MCP server on stdio: ``python -m lightmem_plugin.mcp_server``.

Why MCP: a host that cannot load our tools in process (Codex CLI; Claude Code through its plugin
``.mcp.json``) still lets the agent ask for an archived original by the key its stub names. The
protocol is the ``mcp`` SDK's; we only declare the tool. A bad key or line range comes back as a
tool error with lightmem2's one-line message, so the model can correct the call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._version import __version__
from ..server.gateway_client import gateway
from ..store.home import Home
from .search import register_search_tool
from .tool import read_only, tool_guard

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from ..store.registry import Registry
    from ..store.search_index import IndexBase

TOOL = "lightmem2_recover"
DESCRIPTION = (
    "Print an original that lightmem2 archived when it shortened a tool output. "
    "`key` is the key (12 to 32 hex chars) in a stub such as "
    '[lightmem2: 12,345 chars archived as KEY; recover with lightmem2_recover("KEY", lines="a:b")]; '
    '`lines` (optional) is a 1-based inclusive range "A:B" ("A:" means to the end).'
)


def build_server(registry: Registry | None = None, index: IndexBase | None = None) -> MCPServer:
    """The MCP server with the recover and search tools; both default to the user's stores."""
    from mcp.server.mcpserver import MCPServer

    server: MCPServer = MCPServer(
        name="lightmem2",
        version=__version__,
        instructions="Recover text that lightmem2 shortened, by the key its stub names.",
        log_level="WARNING",
    )

    def store() -> Registry:
        if registry is not None:
            return registry
        from ..config import config_in_force  # lazy: ~0.3 s, and only a recover call needs the store

        return Home.default().registry(config_in_force()[0])

    @server.tool(
        name=TOOL,
        description=DESCRIPTION,
        annotations=read_only("Recover archived text"),
        structured_output=False,
    )
    def lightmem2_recover(key: str, lines: str | None = None) -> str:
        from ..commands import recover  # lazy: it imports the pipeline (see store())

        with tool_guard(TOOL):
            found = gateway() if registry is None else None  # a team gateway user's archives
            if found is not None:
                return recover.remote(*found, key, lines)
            return recover.run(store(), key, lines)

    register_search_tool(server, index)
    return server


def main() -> None:
    """Serve on stdio until the client closes it."""
    build_server().run("stdio")


if __name__ == "__main__":
    main()
