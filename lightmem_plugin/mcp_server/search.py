"""The ``lightmem2_search`` MCP tool, beside ``lightmem2_recover``: find archived lines by content.

Why a tool: a stub names one key, but an agent that remembers "an ImportError earlier" does not know
which. The tool returns ranked hits with keys, line numbers and the recover call, bounded
(:func:`~lightmem_plugin.views.search.bounded`) so a broad query cannot flood the context. The MCP
server does not know which session is calling, so without ``session`` every session is searched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..commands import search
from ..server.gateway_client import gateway
from ..store.search_index import IndexBase, SearchIndex
from ..views.search import bounded
from ..views.search import run as search_text
from .tool import read_only, tool_guard

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer


TOOL = "lightmem2_search"
MAX_HITS = 20
DESCRIPTION = (
    "Search the originals lightmem2 archived when it shortened tool outputs. `query` is literal text, "
    "punctuation included (file.py:17, foo_bar.baz): every space-separated term must appear on one line, "
    'ignoring case; "a quoted query" is one phrase. With `fts` true it is FTS5 syntax ("a phrase", '
    "prefix*, AND, OR, NOT); with `regex` true a Python regular expression. Returns hits, best first: "
    "artifact key, line number, BM25 score, excerpt and the lightmem2_recover call (key, lines) that "
    "prints the line. `limit` <= 20."
)


def register_search_tool(server: MCPServer, index: IndexBase | None = None) -> None:
    """Declare ``lightmem2_search`` on ``server``; ``index`` defaults to the one in the data dir."""

    @server.tool(
        name=TOOL,
        description=DESCRIPTION,
        annotations=read_only("Search archived text"),
        structured_output=False,
    )
    def lightmem2_search(
        query: str, session: str | None = None, regex: bool = False, limit: int = 10, fts: bool = False
    ) -> str:
        with tool_guard(TOOL):
            found = gateway() if index is None else None  # a team gateway user's archives live there
            if found is not None:
                return bounded(search.remote(*found, query, session, regex, min(limit, MAX_HITS), fts=fts))
            store = index if index is not None else SearchIndex.default()
            try:
                text = search_text(
                    store,
                    query,
                    session=session,
                    all_sessions=session is None,
                    regex=regex,
                    limit=min(limit, MAX_HITS),
                    fts=fts,
                )
            finally:
                if index is None:
                    store.close()
            return bounded(text)
