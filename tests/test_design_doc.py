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
