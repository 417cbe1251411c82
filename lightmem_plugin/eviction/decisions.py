"""Decisions and their supersession, read from what the user and the agent said.

Why phrase patterns and not a model: the session record must be deterministic and free, and decisions
in agent sessions are stated in a small set of ways: explicit ("let's go with X", "I'll use X instead of
Y because R", "switch from X to Y", "decided to X", "the fix is to X", "Fixed: X"), implicit revisions
("Actually, let's use Z" supersedes the latest decision), and cancellations ("let's not use X",
"never mind", "revert X"). A decision is valid from the message that states it until the message that
supersedes or cancels it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

from .signals import Said

Status = Literal["active", "superseded", "cancelled"]
_SUBJ = r"(?:let's|let us|we'll|we will|I'll|I will|we should|I should|I'm going to|we're going to|going to)"
_VERB = r"(?:go with|use|stick with|adopt|pick|choose|switch to|try)"
_REASON = r"(?:\s*,?\s+(?:because|since|as|so that)\s+(?P<r>.+))?$"
_CANCEL_WORDS = (" cancel ", " abandon ", " scrap ", " drop ", " revert ", " forget ")
_GO_WORDS = ("go with", " use ", "stick with", " adopt ", " pick ", " choose ", "switch to", " try ")
# (trigger, words one of which must be in the lowercased sentence, pattern): the words are a cheap
# prefilter, since agents write thousands of sentences and the patterns are costly to search.
_PATTERNS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (name, words, re.compile(rx, re.I))
    for name, words, rx in (
        (
            "cancel latest",
            ("never mind", "scratch that", "forget it"),
            r"^\W*(?:never mind|scratch that|forget it)\b[,:]?\s*(?:about\s+)?(?P<x>[^,.;]*)(?P<r>)",
        ),
        (
            "cancel",
            (" not ", "no longer"),
            _SUBJ + r"\s+(?:not|no longer)\s+" + _VERB + r"\s+(?P<x>.+?)" + _REASON,
        ),
        (
            "cancel",
            ("after all",),
            r"\b(?:don't|do not)\s+(?:use|go with|do)\s+(?P<x>.+?)\s+after all" + _REASON,
        ),
        (
            "cancel",
            _CANCEL_WORDS,
            r"\b(?:cancel|abandon|scrap|drop|revert|forget)\s+(?:the\s+|that\s+|my\s+)?(?P<x>.+?)" + _REASON,
        ),
        ("switch", ("switch",), r"\bswitch(?:ing)?\s+from\s+(?P<y>.+?)\s+to\s+(?P<x>.+?)" + _REASON),
        (
            "instead",
            ("instead of",),
            _SUBJ + r"\s+" + _VERB + r"\s+(?P<x>.+?)\s+instead of\s+(?P<y>.+?)" + _REASON,
        ),
        (
            "instead",
            ("instead of",),
            r"\binstead of\s+(?P<y>.+?),\s*" + _SUBJ + r"\s+" + _VERB + r"?\s*(?P<x>.+?)" + _REASON,
        ),
        ("switch", ("switch",), r"\bswitch(?:ing)?\s+to\s+(?P<x>.+?)" + _REASON),
        ("go with", _GO_WORDS, _SUBJ + r"\s+" + _VERB + r"\s+(?P<x>.+?)" + _REASON),
        ("decided", ("decided",), r"\b(?:I|we)\s+(?:have\s+)?decided\s+to\s+(?P<x>.+?)" + _REASON),
        (
            "decided",
            (" is to ",),
            r"\bthe (?:best|simplest|right|cleanest) (?:approach|fix|solution|option) is to\s+(?P<x>.+?)"
            + _REASON,
        ),
        ("decided", ("fix is to",), r"\bthe fix is to\s+(?P<x>.+?)" + _REASON),
        ("fixed", ("fixed:",), r"^\W*Fixed:\s*(?P<x>.+?)" + _REASON),
    )
)
_REVISION = re.compile(r"\b(?:actually|instead|rather|on second thought|changed my mind)\b", re.I)
_SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(])|\n+")
_FENCE = re.compile(r"```.*?(?:```|$)", re.S)
_POINTS_BACK = re.compile(r"(?:that|this|these|those|it|them)\b", re.I)
"""A choice that starts like this names something only the conversation around it showed."""
_STOP = frozenset(("the", "and", "for", "with", "this", "that", "use", "instead", "all", "not", "let"))


@dataclass(frozen=True, slots=True)
class Decision:
    """A decision, what it replaced, why, the quote it came from, and when it held."""

    id: str
    choice: str
    trigger: str
    evidence: str
    speaker: str
    valid_from: int
    replaces: str | None = None
    reason: str | None = None
    valid_until: int | None = None
    superseded_by: str | None = None
    status: Status = "active"

    def as_of(self, turn: int) -> Decision:
        """This decision as it stood at ``turn`` (active if its end came later)."""
        if self.valid_until is not None and self.valid_until > turn:
            return replace(self, valid_until=None, superseded_by=None, status="active")
        return self


def _clean(text: str | None, limit: int = 100) -> str | None:
    if not text:
        return None
    text = re.split(r"\s+(?:which|so that|and then|but)\s+|;|:\s", text, maxsplit=1)[0]
    text = text.strip(" \t.,!")
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _stem(word: str) -> str:
    for suffix, repl in (("ies", "y"), ("ing", ""), ("es", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + repl
    return word


def _words(text: str) -> set[str]:
    """Significant, crudely stemmed words: enough to tell which earlier decision a phrase names."""
    return {_stem(w) for w in re.findall(r"[a-z0-9_]+", text.lower()) if len(w) > 2 and w not in _STOP}


def _match(active: list[Decision], text: str | None) -> Decision | None:
    """The latest active decision that ``text`` names (shared significant words), if any."""
    if not text:
        return None
    words = _words(text)
    return next((d for d in reversed(active) if words & _words(d.choice)), None)


def _sentences(text: str) -> Iterable[str]:
    for sentence in _SENTENCES.split(_FENCE.sub(" ", text)):
        sentence = sentence.strip()
        if 8 <= len(sentence) <= 600:
            yield sentence


@lru_cache(maxsize=4096)
def phrases(text: str) -> tuple[tuple[str, str | None, str | None, str | None, str], ...]:
    """Decision phrases in ``text``: (trigger, choice, replaces, reason, quote), memoised per text."""
    found: list[tuple[str, str | None, str | None, str | None, str]] = []
    for sentence in _sentences(text):
        low = " " + re.sub(r"[^a-z0-9:' ]+", " ", sentence.lower()) + " "
        hit = next(
            (
                (n, m)
                for n, words, p in _PATTERNS
                if any(w in low for w in words) and (m := p.search(sentence))
            ),
            None,
        )
        if hit is None:
            continue
        name, m = hit
        groups = m.groupdict()
        quote = sentence if len(sentence) <= 200 else sentence[:199] + "…"
        found.append(
            (name, _clean(groups.get("x")), _clean(groups.get("y")), _clean(groups.get("r"), 160), quote)
        )
    return tuple(found)


def extract_decisions(said: Iterable[Said]) -> tuple[Decision, ...]:
    """All decisions in ``said`` (in order), with supersession and cancellation applied."""
    decisions: list[Decision] = []
    for item in said:
        for name, choice, replaces, reason, quote in phrases(item.text):
            active = [d for d in decisions if d.status == "active"]
            if name.startswith("cancel"):
                target = _match(active, choice)
                if target is None and name == "cancel latest" and active:
                    target = active[-1]
                if target is not None:
                    decisions[decisions.index(target)] = replace(
                        target, valid_until=item.index, status="cancelled", reason=target.reason or reason
                    )
                continue
            if choice is None or _POINTS_BACK.match(choice):
                continue  # none, or only a pointer ("that alias"): meaningless once its context left
            if name != "fixed" and any(d.choice.lower() == choice.lower() for d in active):
                continue  # restated, not a new decision
            new = Decision(
                id=f"d{len(decisions) + 1}",
                choice=choice,
                trigger=name,
                evidence=quote,
                speaker=item.role,
                valid_from=item.index,
                replaces=replaces,
                reason=reason,
            )
            old = _match(active, replaces)
            if (
                old is None
                and name in ("switch", "instead", "go with")
                and _REVISION.search(quote)
                and active
            ):
                old = active[-1]
            if old is not None:
                decisions[decisions.index(old)] = replace(
                    old, valid_until=item.index, superseded_by=new.id, status="superseded"
                )
                new = replace(new, replaces=new.replaces or old.choice)
            decisions.append(new)
    return tuple(decisions)
