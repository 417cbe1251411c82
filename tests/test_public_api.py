"""The public surface: ``from lightmem_plugin import ...`` (curated ``__all__``, no import side effects)
and the Python API snippet of DESIGN section 9, run as written."""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import lightmem_plugin
from lightmem_plugin import errors
from lightmem_plugin.reduction.base import stub_keys

ROOT = Path(__file__).resolve().parent.parent
INIT = ROOT / "lightmem_plugin" / "__init__.py"

# DESIGN section 9, verbatim (the "Python API" block of docs/REFERENCE.md is checked against it below)
SNIPPET = """\
from lightmem_plugin import LightMem
lm = LightMem.from_config()                        # or LightMem(config=Config(...))
s = lm.session("session-id")
msgs = s.before_model_call(messages, tools=tools)  # OpenAI chat-form in and out; codecs for the others
out = s.ingest_tool_result(call_id, output)        # what the model will see of this output
s.after_model_call(response, usage=usage)          # restores placeholders, records real cache usage
print(lm.command("/lightmem2 status"))
"""


def test_exported_members() -> None:
    """Like httpx's: every name in ``__all__`` exists and is documented."""
    assert lightmem_plugin.__all__ == sorted(lightmem_plugin.__all__)
    for name in lightmem_plugin.__all__:
        member = getattr(lightmem_plugin, name)
        if name == "__version__":
            assert isinstance(member, str) and member.count(".") == 2
            continue
        assert inspect.getdoc(member), f"{name} has no docstring"
        assert member.__module__.startswith("lightmem_plugin."), name


def _bound_names(tree: ast.Module) -> set[str]:
    """Names bound at the top level of a module, including imports under ``if TYPE_CHECKING:``."""
    names: set[str] = set()
    for node in tree.body:
        nodes = node.body if isinstance(node, ast.If) else [node]
        for n in nodes:
            if isinstance(n, ast.Import | ast.ImportFrom):
                names.update((a.asname or a.name).split(".")[0] for a in n.names)
            elif isinstance(n, ast.FunctionDef | ast.ClassDef):
                names.add(n.name)
            elif isinstance(n, ast.Assign):
                names.update(t.id for t in n.targets if isinstance(t, ast.Name))
            elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                names.add(n.target.id)
    return names


def test_every_public_name_of_the_package_is_in_all() -> None:
    """Every public name ``__init__`` defines or imports is in ``__all__`` (private ones start with _)."""
    public = {n for n in _bound_names(ast.parse(INIT.read_text(encoding="utf-8"))) if not n.startswith("_")}
    assert public == set(lightmem_plugin.__all__) - {"__version__"}
    # at run time too: the package's own attributes, apart from the submodules Python sets on it
    runtime = {
        n
        for n, v in vars(lightmem_plugin).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert runtime <= set(lightmem_plugin.__all__)
    assert set(dir(lightmem_plugin)) >= set(lightmem_plugin.__all__)


def test_the_whole_error_tree_is_exported() -> None:
    ours = {
        name
        for name, obj in vars(errors).items()
        if isinstance(obj, type) and issubclass(obj, errors.LightMemError)
    }
    assert ours <= set(lightmem_plugin.__all__)
    assert lightmem_plugin.UsageError is errors.UsageError


def test_unknown_attributes_still_raise() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = lightmem_plugin.nope  # type: ignore[attr-defined]


PROBE = """
import socket, sys, threading
def no_network(*args, **kwargs):
    raise AssertionError("network access at import time")
socket.socket.connect = no_network
socket.create_connection = no_network
import lightmem_plugin
light = sorted(m for m in sys.modules if m.startswith("lightmem_plugin"))
from lightmem_plugin import *
from lightmem_plugin import LightMem, Session, Config
import lightmem_plugin.cli, lightmem_plugin.commands.table, lightmem_plugin.server
import lightmem_plugin.hooks, lightmem_plugin.mcp_server
print(light)
print(threading.active_count())
"""


def test_import_has_no_side_effects(tmp_path: Path) -> None:
    """A fresh interpreter imports the package, its surface, the CLI and the servers' modules: no
    file appears in LIGHTMEM2_HOME or HOME, no thread starts, no socket connects, and the bare
    ``import lightmem_plugin`` loads nothing but the version and the errors."""
    home, user = tmp_path / "lm-home", tmp_path / "user"
    home.mkdir()
    user.mkdir()
    env = {
        **os.environ,
        "LIGHTMEM2_HOME": str(home),
        "HOME": str(user),
        "XDG_DATA_HOME": str(user / "xdg"),
        "XDG_CONFIG_HOME": str(user / "xdg"),
        "XDG_CACHE_HOME": str(user / "xdg"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    light, threads = done.stdout.splitlines()
    assert json.loads(light.replace("'", '"')) == [
        "lightmem_plugin",
        "lightmem_plugin._version",
        "lightmem_plugin.errors",
    ]
    assert threads == "1"
    assert list(home.iterdir()) == [] and list(user.rglob("*")) == []


def _big_log() -> str:
    return "".join(f"2026-03-01 10:00:{i % 60:02d} INFO worker {i}: batch {i * 7} ok\n" for i in range(300))


def test_the_design_snippet_runs_as_written(isolated_home: Path) -> None:
    output = _big_log()
    names: dict[str, object] = {
        "messages": [
            {"role": "system", "content": "You are a coding agent. Working directory: /home/alice/proj"},
            {"role": "user", "content": "run the worker and tell me whether every batch passed"},
        ],
        "tools": None,
        "call_id": "call_1",
        "output": output,
        "response": {"role": "assistant", "content": "Every batch passed."},
        "usage": {
            "prompt_tokens": 1200,
            "completion_tokens": 8,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    }
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(SNIPPET, "DESIGN.md section 9", "exec"), names)

    msgs, out, lm = names["msgs"], names["out"], names["lm"]
    assert isinstance(msgs, list) and [m["role"] for m in msgs] == ["system", "user"]
    assert isinstance(out, str) and len(out) < len(output) / 2
    keys = stub_keys(out)
    assert len(keys) == 1
    assert lm.registry.recover(keys[0]) == output  # type: ignore[attr-defined]
    status = printed.getvalue()
    assert "session: session-id (1 calls)" in status
    assert "archived originals: 1 " in status


def test_the_reference_shows_the_design_snippet() -> None:
    reference = (ROOT / "docs" / "REFERENCE.md").read_text(encoding="utf-8")
    block = reference.split("## Python API", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert block == SNIPPET
