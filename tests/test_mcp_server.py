"""The recover tool over MCP: in process, and over stdio as a host starts it."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.mcp_server import TOOL, build_server
from lightmem_plugin.pipeline import LightMem

ROOT = Path(__file__).resolve().parents[1]
ORIGINAL = "".join(f"line {i}\n" for i in range(1, 11))


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def _session(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    from mcp import Client

    async with Client(server) as client:
        tools = await client.list_tools()
        return tools, [await client.call_tool(name, args) for name, args in calls]


def test_recover_in_process() -> None:
    registry = LightMem().registry
    key = registry.put(ORIGINAL.encode())
    tools, results = asyncio.run(
        _session(
            build_server(registry),
            [(TOOL, {"key": key}), (TOOL, {"key": key, "lines": "2:3"}), (TOOL, {"key": key, "lines": "9:"})],
        )
    )
    assert sorted(t.name for t in tools.tools) == [TOOL, "lightmem2_search"]
    tool = next(t for t in tools.tools if t.name == TOOL)
    assert tool.name == TOOL and tool.annotations.read_only_hint is True
    assert tool.input_schema["required"] == ["key"]
    assert [_text(r) for r in results] == [ORIGINAL, "line 2\nline 3\n", "line 9\nline 10\n"]
    assert not any(r.is_error for r in results)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"key": "nothex"}, "is not an artifact key"),
        ({"key": "0" * 32}, "no artifact 00000000"),
        ({"key": "KEY", "lines": "5:2"}, "bad line range"),
    ],
)
def test_bad_calls_are_tool_errors_with_our_message(args: dict[str, Any], needle: str) -> None:
    registry = LightMem().registry
    if args["key"] == "KEY":
        args = {**args, "key": registry.put(ORIGINAL.encode())}
    _, (result,) = asyncio.run(_session(build_server(registry), [(TOOL, args)]))
    assert result.is_error
    assert needle in _text(result) and "lightmem2: " in _text(result)


def test_recover_over_stdio(isolated_home: Path) -> None:
    from mcp import StdioServerParameters

    key = LightMem().registry.put(ORIGINAL.encode())
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lightmem_plugin.mcp_server"],
        env={**os.environ, "LIGHTMEM2_HOME": str(isolated_home), "PYTHONPATH": str(ROOT)},
    )

    async def go() -> tuple[Any, list[Any]]:
        return await asyncio.wait_for(_session(params, [(TOOL, {"key": key, "lines": "10:10"})]), 60)

    tools, (result,) = asyncio.run(go())
    assert sorted(t.name for t in tools.tools) == [TOOL, "lightmem2_search"]
    assert _text(result) == "line 10\n"
