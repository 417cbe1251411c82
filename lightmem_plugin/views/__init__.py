"""What a person or an agent reads, rendered once: a session's report, search hits, figures.

Why a folder below the commands: the CLI, the chat commands, the team gateway's routes, the OpenClaw
sidecar and the MCP tools all show the same report and the same hits; the server and the MCP server
render them from here instead of importing the commands (which start the server)."""
