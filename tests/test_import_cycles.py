"""No import cycle inside ``lightmem_plugin``, counting imports inside functions too.

Why function-level imports count: an import moved into a function still runs, later and in an order
that depends on which entry point ran first; hiding a cycle that way keeps the coupling and loses the
error. Imports under ``if TYPE_CHECKING:`` do not run, so they are left out. Parent packages that
Python runs implicitly (``a/__init__`` before ``a.b``) are left out too; an explicit ``from . import x``
of a name defined in ``__init__`` counts as an import of the package.

The one exception is an import inside a function marked ``# lazy: WHY`` (on its line, or on a comment
line just above a run of imports): it defers a heavy import to the call that needs it (uvicorn, the
whole command table in a host hook). Lazy imports are not counted for the first test; the second
fails when one of them closes a cycle that is not in :data:`KNOWN_LAZY_CYCLES`, so a new back-edge
is a decision someone reviews, not an accident.

Run ``python tests/test_import_cycles.py`` to see the cycles and every function-level import.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "lightmem_plugin"
PACKAGE = "lightmem_plugin"
MARKER = "# lazy:"
# (importer, imported) lazy imports allowed to close a cycle, and why the import is deferred
KNOWN_LAZY_CYCLES: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Edge:
    """``importer`` imports ``target`` at ``line``; ``local`` when the import is inside a function,
    ``lazy`` when it is marked ``# lazy:``."""

    importer: str
    target: str
    line: int
    local: bool
    lazy: bool = False


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (``a/__init__.py`` is ``a``)."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _marked(node: ast.stmt, lines: list[str]) -> bool:
    """True when the statement's lines, or the comment lines right above it, carry the marker."""
    end = node.end_lineno or node.lineno
    if any(MARKER in lines[n - 1] for n in range(node.lineno, end + 1)):
        return True
    n = node.lineno - 1
    while n >= 1 and lines[n - 1].strip().startswith("#"):
        if MARKER in lines[n - 1]:
            return True
        n -= 1
    return False


def _imports(
    tree: ast.AST, lines: list[str], local: bool = False, typing: bool = False
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """Every runtime import statement with whether it sits inside a function and is marked lazy
    (``typing``: the imports under ``if TYPE_CHECKING:`` too)."""
    lazy_run = False  # a marker above a run of imports covers the whole run
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in (*node.body, *node.orelse) if typing else node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), lines, local, typing)
            lazy_run = False
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            lazy_run = local and (lazy_run or _marked(node, lines))
            yield node, local, lazy_run
            continue
        lazy_run = False
        inner = local or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from _imports(node, lines, inner, typing)


def edges(mods: dict[str, Path] | None = None, typing: bool = False) -> list[Edge]:
    """The in-package import edges of every module (``typing``: type-checking imports too)."""
    mods = modules() if mods is None else mods
    out: list[Edge] = []
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        text = path.read_text(encoding="utf-8")
        for node, local, lazy in _imports(ast.parse(text, str(path)), text.splitlines(), typing=typing):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base_parts = name.split(".") if is_pkg else name.split(".")[:-1]
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in mods else base)
            for target in dict.fromkeys(targets):
                while target and target not in mods and "." in target:
                    target = target.rsplit(".", 1)[0]  # `import a.b.c` of a non-module attribute
                if target in mods and target != name:
                    out.append(Edge(name, target, node.lineno, local, lazy))
    return out


def cycles(all_edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in all_edges:
        graph.setdefault(e.importer, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def shortest_cycle(component: list[str], all_edges: list[Edge]) -> list[Edge]:
    """One shortest cycle through the component's first module, as the edges that make it."""
    members = set(component)
    by_importer: dict[str, list[Edge]] = {}
    for e in all_edges:
        if e.importer in members and e.target in members:
            by_importer.setdefault(e.importer, []).append(e)
    start = component[0]
    paths: dict[str, list[Edge]] = {start: []}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for e in sorted(by_importer.get(v, []), key=lambda e: (e.target, e.line)):
            if e.target == start:
                return [*paths[v], e]
            if e.target not in paths:
                paths[e.target] = [*paths[v], e]
                queue.append(e.target)
    return []


def _where(e: Edge) -> str:
    how = " (lazy)" if e.lazy else " (in a function)" if e.local else ""
    return f"{e.importer}:{e.line}{how}"


def report(all_edges: list[Edge]) -> str:
    """Each cycle: its modules and one concrete path through them, file and line per step."""
    lines: list[str] = []
    for comp in cycles(all_edges):
        inner = [e for e in all_edges if e.importer in comp and e.target in comp]
        local = sum(e.local for e in inner)
        lines.append(
            f"cycle of {len(comp)} modules ({len(inner)} imports inside it, {local} in functions): "
            + ", ".join(comp)
        )
        lines.append("  one path round it:")
        for e in shortest_cycle(comp, all_edges):
            lines.append(f"    {_where(e)} -> {e.target}")
        lines.append("  every import between its modules:")
        for e in sorted(inner, key=lambda e: (e.importer, e.line, e.target)):
            lines.append(f"    {_where(e)} -> {e.target}")
    return "\n".join(lines)


def lazy_back_edges(all_edges: list[Edge]) -> set[tuple[str, str]]:
    """The lazy imports that lie on a cycle of the full graph (every cycle has one, when the test
    below passes)."""
    comps = [set(c) for c in cycles(all_edges)]
    return {
        (e.importer, e.target)
        for e in all_edges
        if e.lazy and any(e.importer in c and e.target in c for c in comps)
    }


def test_no_import_cycle_inside_the_package() -> None:
    all_edges = edges()
    assert len(all_edges) > 100, "the walker found too few imports: is ROOT right?"
    text = report([e for e in all_edges if not e.lazy])
    assert not text, "import cycles inside lightmem_plugin:\n" + text


def test_lazy_imports_close_only_the_known_cycles() -> None:
    all_edges = edges()
    found = lazy_back_edges(all_edges)
    new = found - KNOWN_LAZY_CYCLES.keys()
    assert not new, (
        "a `# lazy:` import closes an import cycle; move the shared piece down instead, or add it to "
        f"KNOWN_LAZY_CYCLES with the reason: {sorted(new)}\n" + report(all_edges)
    )
    assert found == KNOWN_LAZY_CYCLES.keys(), f"no longer on a cycle: {KNOWN_LAZY_CYCLES.keys() - found}"


def test_type_checking_imports_close_no_cycle_either() -> None:
    """The layers hold for types too: e.g. the reduction passes must not name the config's classes
    (the config builds its pass names from them), so they read it through protocols."""
    found = cycles([e for e in edges(typing=True) if not e.lazy])
    assert not found, found


def test_the_walker_finds_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    pkg = tmp_path / "lightmem_plugin"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import thing\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\nfrom . import d\n"
    )
    (pkg / "d.py").write_text("import lightmem_plugin.c\n")
    (pkg / "e.py").write_text("from . import f\n")
    (pkg / "f.py").write_text(
        "def g():\n    # lazy: heavy\n    import os\n\n    from . import e\n    x = 1\n    from . import c\n"
    )
    all_edges = edges(modules(pkg))
    lazy = {(e.importer, e.target): e.lazy for e in all_edges if e.importer.endswith(".f")}
    assert lazy == {
        ("lightmem_plugin.f", "lightmem_plugin.e"): True,
        ("lightmem_plugin.f", "lightmem_plugin.c"): False,
    }
    assert lazy_back_edges(all_edges) == {("lightmem_plugin.f", "lightmem_plugin.e")}
    all_edges = [e for e in all_edges if not e.lazy]
    assert cycles(all_edges) == [
        ["lightmem_plugin.a", "lightmem_plugin.sub.b"],
        ["lightmem_plugin.c", "lightmem_plugin.d"],
    ]
    assert "lightmem_plugin.sub.b:2 (in a function) -> lightmem_plugin.a" in report(all_edges)


if __name__ == "__main__":
    found = edges()
    print(report([e for e in found if not e.lazy]) or "no import cycles (not counting `# lazy:` imports)")
    print("\n`# lazy:` imports on a cycle:", sorted(lazy_back_edges(found)) or "none")
    local = [e for e in found if e.local]
    print(f"\n{len(local)} in-package imports inside functions:")
    for e in sorted(local, key=lambda e: (e.importer, e.line)):
        print(f"    {_where(e)} -> {e.target}")
