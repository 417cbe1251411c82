"""lightmem2 search and the lightmem2_search agent tool, over a replayed real session."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from search_replay import Replayed, replay

from lightmem_plugin.commands import recover, search
from lightmem_plugin.errors import UsageError
from lightmem_plugin.mcp_server import build_server
from lightmem_plugin.mcp_server.search import TOOL
from lightmem_plugin.store.search_index import SearchIndex
from lightmem_plugin.views.search import MAX_CHARS, bounded

# a line of pydicom/config.py as the agent's `cat` printed it (archived during the session)
NEEDLE = "logger = logging.getLogger('pydicom')"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    return replay(tmp_path_factory.mktemp("replay"))


def _recover_from(printed: str, run: Replayed) -> str:
    """Execute a printed ``lightmem2 recover KEY --lines A:B`` call through the recover command."""
    argv = shlex.split(printed)
    assert argv[:2] == ["lightmem2", "recover"] and argv[3] == "--lines"
    return recover.run(run.registry, argv[2], argv[4])


def test_found_and_recovered_byte_exact_with_the_printed_call(run: Replayed) -> None:
    out = search.run(run.index, f'"{NEEDLE}"')
    assert out.startswith(f'1 hit for ""{NEEDLE}"" in session {run.session}')
    (call,) = [line.strip() for line in out.splitlines() if line.strip().startswith("lightmem2 recover")]
    recovered = _recover_from(call, run)
    assert recovered.rstrip("\n") == NEEDLE and recovered.endswith("\n")
    key = call.split()[2]
    line_no = int(call.split()[-1].split(":")[0])
    assert run.registry.recover(key).splitlines(keepends=True)[line_no - 1] == recovered


def test_json_output(run: Replayed) -> None:
    data = json.loads(search.run(run.index, "getLogger", all_sessions=True, as_json=True, limit=3))
    assert data["session"] is None and 1 <= len(data["hits"]) <= 3
    for hit in data["hits"]:
        assert set(hit) == {"key", "line", "excerpt", "score", "recover"}
        assert len(hit["excerpt"]) <= 160 and "getLogger" in hit["excerpt"]
        assert "getLogger" in _recover_from(hit["recover"], run)
    scores = [h["score"] for h in data["hits"]]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"query": "foo AND", "fts": True}, "bad search query"),
        ({"query": '"open', "fts": True}, "without --fts"),
        ({"query": "x", "fts": True, "regex": True}, "--regex and --fts"),
        ({"query": "x", "session": "nope"}, 'unknown session "nope"'),
        ({"query": "x", "session": "s", "all_sessions": True}, "exclude each other"),
        ({"query": "x", "limit": 0}, "bad --limit 0"),
        ({"query": "[", "regex": True}, "bad regex"),
        ({"query": "  "}, "empty search query"),
    ],
)
def test_bad_input_is_one_line_usage_error(run: Replayed, kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(UsageError) as info:
        search.run(run.index, **kwargs)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_no_hits_says_so(run: Replayed) -> None:
    assert (
        search.run(run.index, "zzzqqqxxx")
        == f'no archived line matches "zzzqqqxxx" in session {run.session}; try --all'
    )


def test_regex_search(run: Replayed) -> None:
    out = search.run(run.index, r"getLogger\('pydicom'\)", regex=True)
    assert "lightmem2 recover" in out and re.search(r"line \d+", out)


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def _call(server: Any, calls: list[dict[str, Any]]) -> tuple[Any, list[Any]]:
    from mcp import Client

    async with Client(server) as client:
        tools = await client.list_tools()
        return tools, [await client.call_tool(TOOL, args) for args in calls]


def test_agent_tool_returns_the_same(run: Replayed) -> None:
    server = build_server(run.registry, run.index)
    query = f'"{NEEDLE}"'
    tools, (ok, scoped, bad) = asyncio.run(
        _call(
            server,
            [
                {"query": query},
                {"query": query, "session": run.session},
                {"query": "foo AND", "fts": True},
            ],
        )
    )
    names = {t.name for t in tools.tools}
    assert names == {"lightmem2_recover", TOOL}
    assert _text(ok) == search.run(run.index, query, all_sessions=True)
    assert _text(scoped) == search.run(run.index, query, session=run.session)
    assert bad.is_error and "lightmem2: bad search query" in _text(bad)


def test_agent_tool_output_is_bounded(tmp_path: Path) -> None:
    idx = SearchIndex(tmp_path / "search.sqlite3")
    for n in range(30):
        idx.add(f"{n:032x}", "".join(f"needle row {i} {'x' * 150}\n" for i in range(10)), "s")
    server = build_server(index=idx)
    _, (result,) = asyncio.run(_call(server, [{"query": "needle", "limit": 500}]))
    text = _text(result)
    assert len(text) <= MAX_CHARS and text.endswith("narrow the query or lower limit]")
    assert text.count("lightmem2 recover") <= 20


@pytest.mark.parametrize("size", [0, 10, MAX_CHARS, MAX_CHARS + 1, 10 * MAX_CHARS])
def test_bounded(size: int) -> None:
    text = "".join(f"{i:05d} {'y' * 40}\n" for i in range(size // 46 + 1))[:size]
    out = bounded(text)
    assert len(out) <= MAX_CHARS and (out == text) == (len(text) <= MAX_CHARS)


def test_doctor_fix_rebuilds_a_stale_index(tmp_path: Path) -> None:
    from lightmem_plugin.commands.search import fix_index
    from lightmem_plugin.store.registry import Registry

    reg = Registry(tmp_path / "artifacts")
    reg.put(b"alpha line\nthe needle is here\n")
    idx = SearchIndex(tmp_path / "search.sqlite3")
    assert fix_index(reg, idx).startswith("[fixed] search index: 1 artifacts")
    assert idx.search("needle")
    assert fix_index(reg, idx) == "[pass] search index: up to date"


@pytest.mark.parametrize("query", ["quasar-lattice", "foo_bar.baz", "path/to/file.py", "file.py:17"])
def test_punctuation_is_searched_literally_from_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], query: str
) -> None:
    from lightmem_plugin.cli import main as cli_main

    monkeypatch.setenv("LIGHTMEM2_HOME", str(tmp_path))
    with SearchIndex.default() as idx:
        idx.add("e" * 32, f"noise line\nnoise again\nthe {query} is here\nnoise more\n", "s1")
    assert cli_main(["search", query]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f'1 hit for "{query}"'), out
    shown = re.search(r"line 3  score (\S+)\n", out)
    assert shown and float(shown.group(1)) > 0, out
    assert cli_main(["search", "--fts", "the AND here"]) == 0
    assert "line 3" in capsys.readouterr().out


def test_regex_hits_show_no_score(run: Replayed) -> None:
    out = search.run(run.index, r"getLogger\('pydicom'\)", regex=True)
    assert "score" not in out
