"""The folders of the package form layers: no import cycle between folders, and the rules below hold.

Every import counts (module level, inside functions, under ``TYPE_CHECKING``), read from the source
with :mod:`ast`, the way ``../shared/tools/foldercycles.py`` reads it. A room is a folder of the package
or a root module. The rules say what the layout promises (docs/DESIGN.md section 7): the pipeline sits
below the server, the passes below the pipeline, the store below everything that fills it, and the
commands (which start the server) above it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lightmem_plugin"

NEVER = {
    "pipeline/": {"server/", "commands/", "hooks/", "mcp_server/", "views/"},
    "reduction/": {"pipeline/", "server/", "commands/", "eviction/", "metering/"},
    "prefix/": {"pipeline/", "server/", "commands/", "eviction/", "reduction/"},
    "store/": {"pipeline/", "eviction/", "metering/", "reduction/", "server/", "commands/", "views/"},
    "security/": {"pipeline/", "store/", "server/", "commands/"},
    "wire/": {"server/", "pipeline/", "commands/"},
    "codecs/": {"pipeline/", "server/", "wire/", "commands/", "hosts/"},
    "views/": {"pipeline/", "server/", "commands/", "mcp_server/"},
    "server/": {"commands/", "hooks/", "mcp_server/", "hosts/"},
    "hosts/": {"commands/", "hooks/", "mcp_server/"},
    "eviction/": {"pipeline/", "server/", "commands/", "hosts/"},
    "metering/": {"pipeline/", "server/", "commands/", "hosts/"},
}
"""Room -> rooms it never imports."""

SERVER_FACE = {"server", "server.gateway_client", "server.secret"}
"""What the commands may import of the server: its package (serve, url_host), the gateway's client
side and the sidecar secret; never its routes, proxy or app."""


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _room(module: str) -> str:
    head = module.split(".")[0]
    return head + "/" if (PACKAGE / head).is_dir() else head


def _imports() -> set[tuple[str, str]]:
    """(importing module, imported module), package-relative dotted names."""
    mods = _modules()
    pairs = set()
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = ["lightmem_plugin", *mod.split(".")] if mod else ["lightmem_plugin"]
                    parts = parts if is_pkg else parts[:-1]
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for t in targets:
                if t.startswith("lightmem_plugin.") and t[len("lightmem_plugin.") :] in mods:
                    pairs.add((mod, t[len("lightmem_plugin.") :]))
    return pairs


def _folder_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for a, b in _imports():
        if a and b:
            ra, rb = _room(a), _room(b)
            if ra != rb:
                edges.setdefault(ra, set()).add(rb)
    return edges


def _reaches(edges: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        room = todo.pop()
        for nxt in edges.get(room, ()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def test_no_import_cycle_between_folders() -> None:
    edges = _folder_edges()
    assert len(edges) > 10, "the graph is nearly empty: the import reader checks nothing"
    cyclic = sorted(a for a in edges if _reaches(edges, a, a))
    assert not cyclic, f"rooms on an import cycle: {cyclic}"


def test_each_layer_imports_nothing_above_it() -> None:
    edges = _folder_edges()
    assert {"pipeline/", "server/", "commands/"} <= set(edges), "rooms the rules name are missing"
    broken = {
        room: sorted(edges.get(room, set()) & above)
        for room, above in NEVER.items()
        if edges.get(room, set()) & above
    }
    assert not broken, f"imports against the layering: {broken}"


def test_commands_reach_the_server_only_through_its_face() -> None:
    reached = {b for a, b in _imports() if a.startswith("commands.") and b.split(".")[0] == "server"}
    assert reached, "no command imports the server: the check reads nothing"
    assert reached <= SERVER_FACE, f"commands import server internals: {sorted(reached - SERVER_FACE)}"
