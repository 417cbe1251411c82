"""What both MCP tools share: how a failure reaches the model, and the hints a host reads.

Why one place: the recover and search tools each had three ``except`` blocks that turned lightmem2's
own errors into a one-line tool error and everything else into a fault for ``doctor`` plus a line for
the model; and the same read-only hints, declared twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..errors import LightMemError
from ..faults import guard, open_sink, tool_failure

if TYPE_CHECKING:
    from mcp.types import ToolAnnotations


@contextmanager
def tool_guard(tool: str) -> Iterator[None]:
    """Run a tool's work: lightmem2's own error (a bad key, a bad range) becomes a tool error with its
    one-line message, so the model can correct the call; anything else is a fault on the ``mcp``
    surface (:func:`lightmem_plugin.faults.guard`) and a tool error that says to run doctor (I5)."""
    from mcp.server.mcpserver.exceptions import ToolError

    with guard(tool, open_sink, surface="mcp", answers=(ToolError,)) as caught:
        try:
            yield
        except LightMemError as err:
            raise ToolError(f"lightmem2: {err}") from None
    if caught.error is not None:
        raise ToolError(tool_failure(tool, caught.error)) from None


def read_only(title: str) -> ToolAnnotations:
    """Hints for a tool that only reads lightmem2's own stores: read-only and closed-world, so hosts
    may run it without asking (Codex does for read-only tools)."""
    from mcp.types import ToolAnnotations

    return ToolAnnotations(
        title=title,
        read_only_hint=True,
        destructive_hint=False,
        idempotent_hint=True,
        open_world_hint=False,
    )
