"""Search hits as text or JSON data (``lightmem2 search``, the chat command, the MCP tool, the sidecar
and the team gateway's ``/lightmem2/v1/search``), each hit with the recover call that prints its line."""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from ..store.search_index import Hit, IndexBase
from .format import to_json

MAX_CHARS = 4000
"""What an agent is shown of one search at most (:func:`bounded`): a broad query cannot flood its context."""
MAX_LIMIT = 200


def recover_call(hit: Hit) -> str:
    """The command that prints the hit's line, byte-exact."""
    return f"lightmem2 recover {hit.key} --lines {hit.line}:{hit.line}"


def _scope(index: IndexBase, session: str | None, all_sessions: bool) -> str | None:
    if session is not None and all_sessions:
        raise UsageError("--session and --all exclude each other; pass one of them")
    if session is not None:
        known = index.sessions()
        if session not in known:
            shown = ", ".join(known[:10]) or "none yet"
            raise UsageError(f'unknown session "{session}"; sessions with archives: {shown}; or pass --all')
        return session
    if all_sessions:
        return None
    known = index.sessions()
    return known[0] if known else None


def hit_dict(hit: Hit) -> dict[str, Any]:
    """One hit as JSON data."""
    return {
        "key": hit.key,
        "line": hit.line,
        "excerpt": hit.excerpt,
        "score": hit.score,
        "recover": recover_call(hit),
    }


def run(
    index: IndexBase,
    query: str,
    session: str | None = None,
    all_sessions: bool = False,
    regex: bool = False,
    limit: int = 10,
    as_json: bool = False,
    fts: bool = False,
) -> str:
    """The text ``lightmem2 search`` prints."""
    _check_limit(limit)
    scope = _scope(index, session, all_sessions)
    hits = index.search(query, session=scope, regex=regex, limit=limit, fts=fts)
    where = f"session {scope}" if scope is not None else "all sessions"
    return render(hits, query, where, scope, regex, fts, as_json)


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"bad --limit {limit}; use 1 to {MAX_LIMIT}")


def render(
    hits: list[Hit], query: str, where: str, scope: str | None, regex: bool, fts: bool, as_json: bool
) -> str:
    """The hits as ``lightmem2 search`` prints them (``where``: what was searched, for the reader)."""
    if as_json:
        return to_json(
            {
                "query": query,
                "regex": regex,
                "fts": fts,
                "session": scope,
                "hits": [hit_dict(h) for h in hits],
            }
        )
    if not hits:
        more = "; try --all" if scope is not None else ""
        return f'no archived line matches "{query}" in {where}{more}'
    lines = [f'{len(hits)} hit{"s" if len(hits) > 1 else ""} for "{query}" in {where}, best first:']
    for n, hit in enumerate(hits, 1):
        score = f"  score {hit.score:.3g}" if hit.score is not None else ""
        lines.append(f"{n:>3}. {hit.key} line {hit.line}{score}")
        lines.append(f"     {hit.excerpt}")
        lines.append(f"     {recover_call(hit)}")
    return "\n".join(lines)


def bounded(text: str, limit: int = MAX_CHARS) -> str:
    """``text`` cut at a line boundary to at most ``limit`` chars, saying that it was cut."""
    if len(text) <= limit:
        return text
    note = "\n[lightmem2: more hits cut; narrow the query or lower limit]"
    head = text[: limit - len(note)]
    return head[: head.rfind("\n")] + note if "\n" in head else head + note
