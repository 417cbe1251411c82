"""What a search searched for, and its match lines kept in view when the lines around them repeat."""

from __future__ import annotations

import json
import re

import pytest

from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.kinds import ToolCall
from lightmem_plugin.reduction.search_terms import search_patterns


def _bash(command: str) -> ToolCall:
    return ToolCall("bash", json.dumps({"command": command}))


@pytest.mark.parametrize(
    ("command", "matching", "not_matching"),
    [
        ('grep -B5 -A5 "SCHEMA_OPTS_VAR_NAME" src/fields.py', "    SCHEMA_OPTS_VAR_NAME = 1", "    OBJ = 2"),
        (
            'cd /testbed && grep -rn "def reindl\\|def perez" --include="*.py" .',
            "def perez(x):",
            "def other():",
        ),
        ('grep -n -A 50 "def add_new" ds.py | tail -60', "212:    def add_new(self):", "213-        pass"),
        ('cat -n x.py | grep -i "import"', "     3\tIMPORT os", "     4\tx = 1"),
        ('grep -E "alpha|beta" f', "beta here", "gamma"),
        ("grep -P '\\(x\\)' f", "(x)", "x"),
        ("rg -e foo -e bar src", "a bar", "baz"),
        ('git grep -nF "a.b(" -- src', "src/m.py:3: a.b(1)", "src/m.py:4: axb(1)"),
        ("grep -w 'id' x | head", "the id is", "the idea is"),
        ("cat > a.py << 'EOF'\nx = 'unbalanced\nEOF\ngrep -n needle a.py", "2:needle", "1:hay"),
        ('find tests -type f | xargs grep -n "RenameIndex" -B 5', "t.py:9:    RenameIndex(", "t.py-8-    x"),
        ("find . | xargs -n 1 -P 4 grep -H 'needle'", "a.py:needle", "a.py:hay"),
        ('find . -name "*.py" -exec grep -n "def foo(" {} +', "a.py:3:def foo(x):", "a.py:4:    foo = 1"),
    ],
)
def test_the_pattern_of_a_search_command(command: str, matching: str, not_matching: str) -> None:
    patterns = search_patterns(_bash(command))
    assert patterns
    assert any(p.search(matching) for p in patterns)
    assert not any(p.search(not_matching) for p in patterns)


@pytest.mark.parametrize(
    "call",
    [
        _bash("grep -f patterns.txt src"),  # the patterns are in a file
        _bash('grep "unterminated src'),
        _bash("ls -la"),
        None,
    ],
)
def test_no_pattern_when_it_cannot_be_read(call: ToolCall | None) -> None:
    assert search_patterns(call) == []


def test_a_named_search_tool_uses_its_pattern_argument() -> None:
    (pattern,) = search_patterns(ToolCall("Grep", json.dumps({"pattern": r"def \w+\(", "-i": True})))
    assert pattern.search("DEF run(") and pattern.flags & re.IGNORECASE


def test_a_search_keeps_its_match_lines_when_an_earlier_view_showed_them() -> None:
    """Before: the grep's answer read "[lightmem2 repeat: lines 2:26 as shown in an earlier output]"
    because a file view had shown those lines (77 of 1,229 swe searches in normal mode)."""
    session = LightMem(Config()).session("s")
    source = "".join(f"    value_{i} = compute_{i}(argument)  # line {i}\n" for i in range(40))
    session.ingest_tool_result("call_1", source)
    command = 'grep -B10 -A10 "value_20 =" module.py'
    found = "".join(f"    value_{i} = compute_{i}(argument)  # line {i}\n" for i in range(10, 31))
    shown = session.ingest_tool_result("call_2", found, ToolCall("bash", json.dumps({"command": command})))
    lines = shown.split("\n")
    assert "    value_20 = compute_20(argument)  # line 20" in lines  # the match, in place
    assert any(line.startswith("[lightmem2 repeat: lines ") for line in lines), shown  # context folds
    # the same output from a command that is no search folds all of it
    again = session.ingest_tool_result(
        "call_3", found + "x\n", ToolCall("bash", json.dumps({"command": "cat f"}))
    )
    assert "    value_20 = compute_20(argument)  # line 20" not in again.split("\n")
