"""What a reduction pass declares about itself, so that the registry can drive everything else.

Why a declaration and not a string switch: the config's pass names, the modes' default pass lists
(lossless passes only in conservative mode), the JSON schema, the pass table of docs/REFERENCE.md and the order
in which passes run are all read from :data:`.passes.PASSES`. A new pass is one module that defines a
``PASS`` and one line in that tuple.

Stages, in the order the runner (:mod:`.reduce`) applies them:

``frame``   a host's envelope around the output (Codex's exit-code header): keeps it byte-exact and
            hands only the body on (``run(text, inner) -> str``).
``repeat``  session-level: sees the session's :class:`Repeats` (outputs and lines already shown) and
            the call id; wraps the text reduction (``run(repeats, call_id, text, ctx, inner)``).
``clean``   rewrites the work text it is sure of and keeps line origins (``run(work) -> Work | None``).
``select``  chooses lines under the budget; the first that applies to the output's kind wins
            (``run(work, ctx)`` -> pieces or None).
``media``   images (``run(data, media_type, ctx) -> (bytes, media type) | None``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Stage = Literal["frame", "repeat", "clean", "select", "media"]
STAGES: tuple[Stage, ...] = ("frame", "repeat", "clean", "select", "media")


@dataclass(frozen=True)
class PassSpec:
    """One reduction pass: its config name, stage, whether it loses information, and its function.

    ``lossless`` passes only drop what carries no information (or keep it recoverable in place);
    conservative mode runs only those. ``what`` labels the stub a pass writes ("chars of JSON"; the
    whitespace pass's, when only the clean stage changed an output). ``run``'s signature is the
    stage's (see the module docstring).
    """

    name: str
    stage: Stage
    lossless: bool
    summary: str
    run: Callable[..., Any]
    what: str = "chars"
    kinds: tuple[str, ...] = ()
    """Output kinds (:data:`.kinds.KINDS`) a select pass is for; empty: any kind (content decides)."""
    also: tuple[str, ...] = ()
    """Other labels its stubs may carry (the file view pass's cut of a script's prints): ``report``
    names the pass by any of them."""
