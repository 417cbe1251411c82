"""The design document lives in the repository (docs/DESIGN.md) and what the code cites of it exists.

Docstrings cite it as ``DESIGN I5`` (an invariant), ``DESIGN 5`` (a section) or ``DESIGN "Session
identity"`` (a heading or a bold lead-in). A citation that names nothing in the document is a broken
promise: either the code drifted or the document did.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "DESIGN.md"
CITATION = re.compile(r'DESIGN[ ,(]*(I\d+|\d+[a-z]?\b|"[^"\n]+")')


def _citations() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "lightmem_plugin").rglob("*.py")):
        for ref in CITATION.findall(path.read_text(encoding="utf-8")):
            found.setdefault(ref, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_citation_of_the_design_names_something_in_it() -> None:
    text = DOC.read_text(encoding="utf-8")
    sections = set(re.findall(r"^#{2,3} (\d+[a-z]?)\.", text, flags=re.M))
    invariants = set(re.findall(r"\*\*(I\d+) ", text))
    missing = {}
    for ref, where in _citations().items():
        if ref.startswith("I"):
            ok = ref in invariants
        elif ref.startswith('"'):
            ok = ref.strip('"').lower() in text.lower()
        else:
            ok = ref in sections
        if not ok:
            missing[ref] = where
    assert _citations(), "no citation found: the pattern checks nothing"
    assert not missing, f"cited but not in docs/DESIGN.md: {missing}"


ROOT_MODULES_MAX = 12


def test_the_package_root_holds_at_most_twelve_modules() -> None:
    """The folders carry the architecture (issue #40): the root keeps the public face, config, errors,
    the model, the pipeline and what everything below needs first."""
    root = sorted(p.name for p in (ROOT / "lightmem_plugin").glob("*.py"))
    assert len(root) <= ROOT_MODULES_MAX, root


def test_the_layout_section_names_only_what_exists_and_every_folder() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## 7. Package layout") :]
    block = section[section.index("```") + 3 :]
    block = block[: block.index("```")]
    named = set(re.findall(r"(?<![\w/])([a-z_]+(?:\.py|/))(?=[\s,]|$)", block)) - {"lightmem_plugin/"}
    package = ROOT / "lightmem_plugin"
    missing = [
        n
        for n in named
        if not n.startswith(("adapters", "openclaw", "claude_code", "codex"))
        and not (package / n.rstrip("/")).exists()
        and not (ROOT / "adapters" / n.rstrip("/")).exists()
        and not any(p.is_dir() == n.endswith("/") for p in package.rglob(n.rstrip("/")))
    ]
    assert not missing, f"docs/DESIGN.md section 7 names what is not in the package: {missing}"
    folders = {p.name + "/" for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= named, f"folders the layout does not describe: {sorted(folders - named)}"
