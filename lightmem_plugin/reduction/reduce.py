"""Reduce one tool output: run the enabled passes in order and leave stubs that name the archive.

Why this shape: the reduction happens once, when the output enters the history (DESIGN I3), and
must be a pure function of (text, settings) so a restarted proxy reproduces the same bytes (I1).
The original is archived byte-exact under its content key and every elided region is marked by a
stub naming that key and the 1-based line range of the original (I4), numbered like the registry's
``recover(lines=...)``. Passes change only what they are sure of; they run in the order of
:data:`.passes.PASSES`, stage by stage:

1. repeat (dedup): a repeated output becomes a reference, lines already shown become markers;
2. clean (whitespace, html): ANSI escapes, trailing blanks and blank runs go (line numbers of the
   original are tracked); only a real HTML document becomes its readable text;
3. select (json, diff, log, truncate): the first that applies chooses what to keep under ``capChars``
   (a JSON summary; headers and changes of a diff; errors and summaries of a log; head and tail).

``hardCapChars`` is enforced last, whatever the mode. A result that does not save at least
:data:`MIN_SAVING` chars is not worth a stub: the original is returned unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..errors import PassError
from . import passes, whitespace
from .base import Elided, PassContext, already_reduced, shell_hint, stub
from .dedup import Repeats
from .kinds import classify
from .spec import PassSpec
from .work import Piece, Work, cut, render, size

MIN_SAVING = 200
_DUMMY_KEY = "0" * 32


def _run(spec: PassSpec, *args: Any) -> Any:
    """``spec.run(*args)``; a failure becomes a :class:`PassError` naming the pass (for doctor)."""
    try:
        return spec.run(*args)
    except PassError:
        raise
    except Exception as err:
        raise PassError(f"pass {spec.name}: {type(err).__name__}: {err}", spec.name) from err


def _stub_len(text: str, n_lines: int) -> int:
    """An upper bound on the length of one stub line for this output."""
    longest = max((what for p in passes.PASSES for what in (p.what, *p.also)), key=len)
    return len(stub(_DUMMY_KEY, len(text), (n_lines, n_lines), longest)) + 1


def _lossy(work: Work, ctx: PassContext) -> list[Piece] | None:
    """The select passes in registry order: the first one that applies wins."""
    for spec in passes.of_stage("select", ctx.table.passes):
        if spec.kinds and work.kind not in spec.kinds:
            continue
        pieces: list[Piece] | None = _run(spec, work, ctx)
        if pieces is not None:
            return pieces
    return None


def _plan(text: str, ctx: PassContext) -> list[Piece] | None:
    """What the model will see, as text pieces and stubs; None to leave ``text`` as it is."""
    table = ctx.table
    base = ctx.base
    if base is None:
        original = whitespace.split_lines(text)
        sizes = whitespace.line_sizes(text)
        work = Work(
            original, original, list(range(len(original))), kind=classify(text, ctx.call), sizes=sizes
        )
    else:  # ``text`` was derived from ``base.original``: reduce it, name the original's lines
        original = whitespace.split_lines(base.original)
        lines = whitespace.split_lines(text)
        n = len(lines)
        kind = classify(base.original, ctx.call)
        sizes = whitespace.line_sizes(base.original)
        work = Work(original, lines, base.first[:n], kind=kind, origin_end=base.last[:n], sizes=sizes)
    for spec in passes.of_stage("clean", table.passes):
        cleaned: Work | None = _run(spec, work)
        if cleaned is not None:
            work = cleaned
    stub_len = _stub_len(text, len(original))
    pieces: list[Piece] | None = None
    if work.chars() > table.capChars:
        pieces = _lossy(work, ctx)
    if pieces is None and base is None and (work.lines != original or work.origin is None):
        pieces = work.tidied()
    hard = ctx.reduction.hardCapChars
    if (pieces is None and len(text) > hard) or (pieces is not None and size(pieces, stub_len) > hard):
        room = max(0, hard - 2 * stub_len)
        pieces = cut(work, room * 3 // 5, room - room * 3 // 5)
    return pieces


def reduce_text(text: str, ctx: PassContext) -> str:
    """What the model sees of the tool output ``text``: reduced with stubs, or ``text`` itself.

    Unchanged when it is short (``triggerChars``), already carries a stub, or reducing would not
    save :data:`MIN_SAVING` chars. Otherwise the original is archived once, byte-exact, and the
    result holds about ``capChars`` plus stub lines, never more than ``hardCapChars``.
    """
    if len(text) <= ctx.table.triggerChars or (
        already_reduced(text) and len(text) <= ctx.reduction.hardCapChars
    ):
        return text
    pieces = _plan(text, ctx)
    if pieces is None:
        return text
    shell = shell_hint(ctx)
    draft = render(pieces, _DUMMY_KEY, shell)
    if len(draft) > len(text) - MIN_SAVING and len(text) <= ctx.reduction.hardCapChars:
        return text
    archived = text if ctx.base is None else ctx.base.original
    key = ctx.archive(archived.encode("utf-8", "surrogatepass"))
    return render(pieces, key, shell)


TextReducer = Callable[[str, PassContext], str]


def reduce_output(
    call_id: str, text: str, ctx: PassContext, repeats: Repeats, text_reducer: TextReducer = reduce_text
) -> str:
    """What the model sees of one tool output, all stages: frame (a host's envelope), repeats, text.

    ``repeats`` is the session's memory of what the model was shown; the result is added to it. Text
    that already carries a stub (a hook reduced it first) is left alone.
    """

    def body(t: str) -> str:
        if already_reduced(t) and len(t) <= ctx.reduction.hardCapChars:
            return t

        def inner(u: str, base: Elided | None = None) -> str:
            return text_reducer(u, ctx if base is None else replace(ctx, base=base))

        run: Callable[..., str] = inner
        for spec in reversed(passes.of_stage("repeat", ctx.table.passes)):
            run = _wrapped(spec.run, repeats, call_id, ctx, run)
        result = run(t)
        repeats.lines.add(result, call_id)
        return result

    framed: Callable[[str], str] = body
    for spec in reversed(passes.of_stage("frame", ctx.table.passes)):
        framed = _framed(spec.run, framed)
    return framed(text)


def _framed(
    fn: Callable[[str, Callable[[str], str]], str], inner: Callable[[str], str]
) -> Callable[[str], str]:
    return lambda t: fn(t, inner)


def _wrapped(
    fn: Callable[..., str], repeats: Repeats, call_id: str, ctx: PassContext, inner: Callable[[str], str]
) -> Callable[[str], str]:
    return lambda t: fn(repeats, call_id, t, ctx, inner)


def reduce_media(data: bytes, media_type: str, ctx: PassContext) -> tuple[bytes, str] | None:
    """A smaller (bytes, media type) for an image from the first media pass that applies, or None."""
    for spec in passes.of_stage("media", ctx.table.passes):
        out: tuple[bytes, str] | None = _run(spec, data, media_type, ctx)
        if out is not None:
            return out
    return None
