"""``python -m lightmem_plugin.mcp_server``: the MCP server on stdio (the hosts' configs name it)."""

from . import main

main()
