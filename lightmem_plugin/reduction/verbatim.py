"""Outputs that reach the model verbatim at any size: what lightmem2 itself hands back, and tool catalogs.

Why: an original the agent recovered (``lightmem2_recover``, ``lightmem2 recover KEY`` in a shell,
``lightmem2_search``), reduced again as it enters the history, gives the model a stub for the very
text it asked for. Measured: the recovered log came back as "[lightmem2: identical to the output of
tool call c1 ... archived as KEY]", KEY the one it had just recovered, so nothing archived could ever
be read back through the host. A host's tool catalog (OpenClaw's ``tool_search`` and
``tool_describe`` results, Claude Code's ``ToolSearch``) lists the tools and schemas the agent calls
next; cut to its first items (measured on OpenClaw 2026.9.6: "arrays cut to their first items"), the
tool the agent searched for can be the one that went.
"""

from __future__ import annotations

import json
import re

from .kinds import ToolCall

OWN_TOOLS = frozenset({"lightmem2_recover", "lightmem2_search"})
CATALOG_TOOLS = frozenset({"tool_search", "tool_describe", "ToolSearch"})
CALL_BY_NAME_TOOLS = frozenset({"tool_call"})  # OpenClaw's Tool Search: the called tool is args.id
# `lightmem2 recover|search` in command position (start, or after ; & | ( ` $( ), path prefix allowed
SHELL_RE = re.compile(
    r"(?:^|[;&|(`]|\$\()\s*(?:\S*/)?(?:lightmem2|python3?\s+-m\s+lightmem_plugin\.cli)\s+(?:recover|search)(?:\s|$)"
)


def base_name(name: str) -> str:
    """A tool's own name without a host's namespace (``mcp__server__tool``, ``openclaw:plugin:tool``)."""
    return name.rsplit("__", 1)[-1].rsplit(":", 1)[-1]


def _called_tool(arguments: str) -> str:
    try:
        args = json.loads(arguments) if arguments.strip().startswith("{") else None
    except ValueError:
        return ""
    value = args.get("id") or args.get("name") if isinstance(args, dict) else None
    return base_name(value) if isinstance(value, str) else ""


def passes_verbatim(call: ToolCall | None) -> bool:
    """True when the output of ``call`` must reach the model unchanged (see the module docstring)."""
    if call is None:
        return False
    name = base_name(call.name)
    if name in OWN_TOOLS or name in CATALOG_TOOLS:
        return True
    if name in CALL_BY_NAME_TOOLS and _called_tool(call.arguments) in OWN_TOOLS:
        return True
    command = call.command
    return bool(command) and SHELL_RE.search(command) is not None
