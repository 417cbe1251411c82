"""Retention: whether a transformed history still holds what the agent went on to use.

Why a model-free measure: a reduction that saves tokens but removes what the agent needs later is a
loss, and replaying a session through a model to find out is slow and noisy. The recorded outputs
tell us what the agent used instead (``traces/README.md``, "Retention"):

- A **use** is a span of an earlier tool output that reappears in the output of a later call ``u``
  (its assistant text, or the string values of its tool-call arguments): a substring of 32+ chars,
  or a whole line of 16+ chars (compared without surrounding whitespace).
- Each use is judged by the transformed prompt of call ``u``: **kept** if that prompt contains the
  span verbatim, **recoverable** if a lightmem2 stub in it names an artifact whose content contains
  the span (``lookup(key)`` returns the archived text; a newline at either end of the span is a line
  boundary, and an archive of an output's body starts at its first line), **lost** otherwise.
- **By line** as well: a span that shows a cut ``File "...", line 543`` frame is kept by span yet
  useless to the agent. So each use is judged a second time by the whole original lines of the tool
  output the span touches (the newest output of the prompt that holds it): kept if every one of them
  (blank lines aside) is a whole line of the transformed prompt, verbatim; recoverable if each
  missing one is a whole line of an archive a stub in the prompt names; lost otherwise.
- **Error lines** (:mod:`~.reduction.error_lines`) of the newest output of each command (tool name plus its
  command string or its other inputs) must be whole lines of every later prompt while no newer
  output of that command exists: the agent acts on them, and the reduction promises not to cut them.
  ``error_lines_kept`` = kept (line, call) pairs / all such pairs (1.0 when there are none).
  Only outputs of the **task still running** count: those after the last user message that set a
  goal (:mod:`.eviction.goals`). Once the user moved on, a finished task's error lines are no longer
  what the agent acts on; if it does use them, the uses below judge that like any other line.
- **Within the task** (``task_kept``, ``task_kept_lines``): the same verdicts over the uses whose
  source output belongs to the task still running, the figure that says whether reduction and
  eviction inside a task hide what the agent needs (uses that reach into a finished task are
  counted in the totals and, when recoverable, charged below).
- **The agent's own words** (``said_*``): a span of an earlier assistant text or tool-call argument
  value reappearing in a later call's output is a use too (the agent quoting its plan, rewriting its
  script), judged kept / recoverable / lost by span the same way. Counted apart from tool-output
  uses, since much of it is the agent's habit (the same import lines, the same phrases) and not a
  need; a span both sources hold counts as a tool-output use.
- **K charged** prices what "recoverable" really costs. A use that is only recoverable (by span) at
  call ``u`` means a recover round trip at ``u``: the recover call (``RECOVER_CALL_TOKENS`` = 40)
  plus the recovered lines (``t`` tokens of the original lines the span touches) are paid as misses
  at ``u`` and then re-read at the cached rate by every later call, as if the answer stayed in the
  agent's history. Each (artifact, line range) is paid once per session, since after its recovery
  it is in context::

      K_charged = K + sum over recovers r of (40 + t_r) * (1 + 0.1 * (calls - u_r - 1))

  The extra model request of the round trip (its re-read of the cached prefix) is not charged.
  ``K_charged`` prices the tool-output uses (the definition the figures in the README use);
  ``K_charged_all`` adds a round trip for each own-words use that is only recoverable.

Fast by construction: tool-output lines go in a set, and tool-output text is indexed by 17-char
windows at every 16th offset. Any common substring of 32+ chars contains one aligned window
(17 + 16 - 1 = 32), so scanning each window of the (short) call output finds every candidate; a hit
is then extended both ways to the longest shared span. Each tool output is indexed once, by hash.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import xxhash

from ..eviction.entries import content_text
from ..eviction.goals import continues, goal_words, interrupted
from ..metering.cachesim import k_cost
from ..reduction.base import stub_keys
from ..reduction.error_lines import error_lines

MIN_LINE_CHARS = 16
MIN_SPAN_CHARS = 32
_STRIDE = 16
_WINDOW = MIN_SPAN_CHARS - _STRIDE + 1
_HITS_PER_WINDOW = 4
_SEP = "\n\x00\n"  # between texts of a prompt, so no span is found across two messages
RECOVER_CALL_TOKENS = 40
"""What one ``lightmem2_recover(key, lines=...)`` call costs in the agent's output and history."""
_NOT_COMMAND = frozenset({"description", "timeout", "run_in_background"})  # labels, not what runs

Verdict = Literal["kept", "recoverable", "lost"]
Lookup = Callable[[str], str | None]
ChatMessage = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Use:
    """One use: the call whose output reused the span, the span, and how the prompt held it.

    ``lines`` are the whole original lines the span touches and ``line_verdict`` how the prompt held
    them; ``artifact`` is the archive key that recovers the span when ``verdict`` is recoverable.
    ``source`` is the position, in the call's original prompt, of the tool output the span is judged
    by (the prompt's length when the host no longer sends it; -1 for a use of the agent's own words).
    """

    call: int
    span: str
    verdict: Verdict
    line_verdict: Verdict = "kept"
    lines: tuple[str, ...] = ()
    artifact: str | None = None
    source: int = -1


@dataclass(frozen=True, slots=True)
class Recover:
    """One recover round trip the agent would make: at ``call``, ``text`` (the lines) from ``artifact``."""

    call: int
    artifact: str
    text: str
    said: bool = False  # a use of the agent's own earlier words (not of a tool output)


@dataclass(frozen=True, slots=True)
class Retention:
    """Counts of uses by verdict; fractions are over all uses (a session without uses keeps 100%)."""

    uses: int
    kept: int
    recoverable: int
    lost: int
    kept_lines: int = 0
    recoverable_lines: int = 0
    lost_lines: int = 0
    error_pairs: int = 0
    error_pairs_kept: int = 0
    task_uses: int = 0
    task_kept: int = 0
    task_kept_lines: int = 0
    said_uses: int = 0
    said_kept: int = 0
    said_recoverable: int = 0
    said_lost: int = 0

    @property
    def task_kept_fraction(self) -> float:
        """Kept by span, over the uses of outputs of the task still running (since the last goal)."""
        return self.task_kept / self.task_uses if self.task_uses else 1.0

    @property
    def task_kept_lines_fraction(self) -> float:
        """Kept by line, over the uses of outputs of the task still running."""
        return self.task_kept_lines / self.task_uses if self.task_uses else 1.0

    @property
    def error_lines_kept(self) -> float:
        return self.error_pairs_kept / self.error_pairs if self.error_pairs else 1.0

    @property
    def kept_fraction(self) -> float:
        return self.kept / self.uses if self.uses else 1.0

    @property
    def recoverable_fraction(self) -> float:
        return self.recoverable / self.uses if self.uses else 0.0

    @property
    def lost_fraction(self) -> float:
        return self.lost / self.uses if self.uses else 0.0


def _leaves(value: object) -> Iterator[str]:
    """The string values inside decoded JSON (where an agent puts commands, paths, file text)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)


def _argument_texts(message: ChatMessage) -> Iterator[str]:
    for call in message.get("tool_calls") or ():
        arguments = str(call.get("function", {}).get("arguments", "")) if isinstance(call, Mapping) else ""
        try:
            yield from _leaves(json.loads(arguments))
        except ValueError:
            yield arguments


def output_texts(output: ChatMessage) -> list[str]:
    """The texts of a call's output where a use can appear: assistant text and argument values."""
    texts = [content_text(output.get("content")), *_argument_texts(output)]
    return [t for t in texts if t]


def message_text(message: ChatMessage) -> str:
    """What one message shows the model, as one searchable string (content and argument values)."""
    return _SEP.join([content_text(message.get("content")), *_argument_texts(message)])


def prompt_text(prompt: Sequence[ChatMessage], text_of: Callable[[ChatMessage], str] = message_text) -> str:
    """Everything a prompt shows the model, as one searchable string."""
    return _SEP.join(map(text_of, prompt))


Located = tuple[str, int, int]
"""A reused span, the indexed tool text it was found in, and its offset there."""


def touched_lines(text: str, start: int, length: int) -> tuple[int, tuple[str, ...]]:
    """The 0-based index of the first line of ``text`` that ``text[start:start + length]`` touches,
    and the whole lines it touches.

    Why whole lines: a span is what the agent quoted, but what it read and acted on is the line the
    span sits in (a frame's path and line number, the rest of an error message). Whitespace at either
    end of the span (a newline, the next line's indentation) touches no line: the agent used nothing
    of a line it shares only blanks with. Measured on the swe traces: an agent quoting a frame's
    code line with its own indentation after it (``"\n    response = app.get(request)\n    "``)
    touched the ``^^^^`` line below only by those four spaces, and a run of 32 spaces in indented
    code matched the indentation of a caret line; both counted a line the agent never read. A span
    of nothing but whitespace touches no line (its first line index is where it starts).
    """
    s, e = start, min(len(text), start + length) - 1
    while s <= e and text[s].isspace():
        s += 1
    while e >= s and text[e].isspace():
        e -= 1
    if s > e:
        return text.count("\n", 0, min(start, len(text))), ()
    lo = text.rfind("\n", 0, s) + 1
    hi = text.find("\n", e)
    return text.count("\n", 0, lo), tuple(text[lo : len(text) if hi < 0 else hi].split("\n"))


def _holds(archived: str, span: str) -> bool:
    """Whether an archive holds ``span``: a newline at its ends is the boundary of the line before or
    after it, and an archived output body has none before its first line (a use that quoted a file
    view from its first line, heredoc-style, read as lost though its archive held every byte)."""
    return span.strip("\n") in archived


def has_line(bounded: str, line: str) -> bool:
    """True when ``line`` is a whole line of the text that ``bounded`` (``"\n" + text + "\n"``) wraps."""
    return f"\n{line}\n" in bounded


def line_verdict(lines: Iterable[str], prompt: str, archives: Callable[[], list[str]]) -> Verdict:
    """Kept when every non-blank line is a whole line of ``prompt`` (bounded by newlines), verbatim;
    recoverable when each one missing is a whole line of an archive (``archives()``, bounded the same
    way, computed only when needed); lost otherwise. Blank lines carry nothing to act on: skipped."""
    missing = [line for line in lines if line.strip() and not has_line(prompt, line)]
    if not missing:
        return "kept"
    texts = archives()
    return "recoverable" if all(any(has_line(t, line) for t in texts) for line in missing) else "lost"


def command_key(tool_call: Mapping[str, Any]) -> str:
    """What identifies "the same command" across calls: the tool name plus its command string
    (mini-swe-agent's ``bash``, Claude Code's ``Bash``), else plus its other inputs in a canonical
    order (``Read`` a path and range, ``Grep`` a pattern), labels such as a description left out."""
    found = tool_call.get("function")
    fn: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    name = str(fn.get("name", ""))
    raw = fn.get("arguments", "")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return f"{name}\x00{raw}"
    if isinstance(args, Mapping):
        if isinstance(args.get("command"), str):
            return f"{name}\x00{args['command']}"
        args = {k: v for k, v in args.items() if k not in _NOT_COMMAND}
    return f"{name}\x00{json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)}"


def newest_outputs(prompt: Sequence[ChatMessage]) -> dict[str, ChatMessage]:
    """Command key -> the newest tool message of that command in ``prompt``.

    A tool message belongs to the tool call its ``tool_call_id`` names, or (mini-swe-agent's
    messages carry none) to the next unanswered call of the assistant message before it.
    """
    by_id: dict[str, str] = {}
    pending: list[str] = []
    newest: dict[str, ChatMessage] = {}
    for message in prompt:
        role = message.get("role")
        if role == "assistant":
            calls = [c for c in message.get("tool_calls") or () if isinstance(c, Mapping)]
            pending = [command_key(c) for c in calls]
            by_id.update((str(c.get("id")), k) for c, k in zip(calls, pending, strict=True))
        elif role == "tool":
            key = by_id.get(str(message.get("tool_call_id"))) if message.get("tool_call_id") else None
            if key is not None and key in pending:
                pending.remove(key)
            elif key is None and pending:
                key = pending.pop(0)
            if key is not None:
                newest[key] = message
    return newest


def last_goal(prompt: Sequence[ChatMessage]) -> int:
    """Index of the last message in ``prompt`` where the user set a goal (-1 if none): what came
    before it is finished work, judged by its uses, not by the error lines the current task acts on."""
    for pos in range(len(prompt) - 1, -1, -1):
        message = prompt[pos]
        text = content_text(message.get("content")) if message.get("role") == "user" else ""
        if goal_words(text) and not _answers_question(prompt, pos):
            return pos
    return -1


def _answers_question(prompt: Sequence[ChatMessage], pos: int) -> bool:
    """Whether the user message at ``pos`` answers a question the agent ended its turn with, follows
    the note that the user stopped the agent, or only tells it to go on (then it continues that task,
    as :func:`.eviction.goals.goal_tasks` has it)."""
    own = content_text(prompt[pos].get("content"))
    if interrupted(own) or continues(own):
        return True  # the note and the user's next words in one message, or "continue"
    for message in reversed(prompt[:pos]):
        role = message.get("role")
        if role == "user" and interrupted(content_text(message.get("content"))):
            return True  # the user stopped the agent: what they say next redirects the same task
        if role == "assistant":
            said = content_text(message.get("content")).rstrip()
            if said:
                return said.endswith("?") and not message.get("tool_calls")
        elif role != "user":
            return False
    return False


def recover_charge(recovers: Iterable[tuple[int, int] | tuple[int, int, int | None]], calls: int) -> float:
    """The K a session's recover round trips add: ``(call u, tokens t)`` each costs
    ``RECOVER_CALL_TOKENS + t`` as misses at ``u`` and as cached re-reads on every later call (the
    one cost formula, :func:`~.metering.cachesim.k_cost`); ``(u, t, gone)`` re-reads it only up to call
    ``gone``, where it left the context (the task it was made in was archived whole)."""
    total = 0.0
    for u, t, *rest in recovers:
        end = calls if not rest or rest[0] is None else min(calls, rest[0])
        total += k_cost(hit=(RECOVER_CALL_TOKENS + t) * max(0, end - u - 1), miss=RECOVER_CALL_TOKENS + t)
    return total


class _SpanIndex:
    """Tool-output lines and aligned windows, to find reused spans in a call's output."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.lines: dict[str, tuple[int, int]] = {}  # stripped line -> (text id, offset) of its first copy
        self.windows: dict[str, list[tuple[int, int]]] = {}
        self._seen: set[int] = set()

    def add(self, text: str) -> None:
        key = xxhash.xxh3_64_intdigest(text.encode("utf-8", "surrogatepass"))
        if not text or key in self._seen:
            return
        self._seen.add(key)
        tid = len(self.texts)
        self.texts.append(text)
        offset = 0
        for line in text.split("\n"):
            stripped = line.strip()
            if len(stripped) >= MIN_LINE_CHARS:
                self.lines.setdefault(stripped, (tid, offset + line.index(stripped[0])))
            offset += len(line) + 1
        windows = self.windows
        for off in range(0, len(text) - _WINDOW + 1, _STRIDE):
            hits = windows.setdefault(text[off : off + _WINDOW], [])
            if len(hits) < _HITS_PER_WINDOW:
                hits.append((tid, off))

    def _longest(
        self, out: str, i: int, floor: int, hits: list[tuple[int, int]]
    ) -> tuple[int, int, int, int]:
        """The longest span ``out[a:c]`` around window ``i`` shared with an indexed text: a, c, text id,
        and the span's offset in that text."""
        best = (i, i, -1, 0)
        for tid, off in hits:
            text = self.texts[tid]
            a, b = i, off
            while a > floor and b > 0 and out[a - 1] == text[b - 1]:
                a -= 1
                b -= 1
            c, d = i + _WINDOW, off + _WINDOW
            while c < len(out) and d < len(text) and out[c] == text[d]:
                c += 1
                d += 1
            if c - a > best[1] - best[0]:
                best = (a, c, tid, b)
        return best

    def spans(self, out: str) -> list[Located]:
        """Reused spans in ``out``: maximal shared substrings of 32+ chars, then shared lines."""
        found: list[Located] = []
        windows = self.windows
        end = 0
        i = 0
        last = len(out) - _WINDOW
        while i <= last:
            hits = windows.get(out[i : i + _WINDOW])
            if hits:
                a, c, tid, off = self._longest(out, i, end, hits)
                if c - a >= MIN_SPAN_CHARS:
                    found.append((out[a:c], tid, off))
                    end = i = c
                    continue
            i += 1
        for line in out.split("\n"):
            stripped = line.strip()
            where = self.lines.get(stripped) if len(stripped) >= MIN_LINE_CHARS else None
            if where is not None and not any(stripped in span for span, _, _ in found):
                found.append((stripped, *where))
        return found

    def lines_of(self, tid: int, start: int, length: int) -> tuple[int, tuple[str, ...]]:
        """:func:`touched_lines` of indexed text ``tid``."""
        return touched_lines(self.texts[tid], start, length)


class RetentionTracker:
    """Feed it a session call by call; ``result()`` gives the retention over all uses so far.

    ``lookup(key)`` returns the archived text behind a stub key (or None); without it, nothing is
    recoverable. ``keys(text)`` finds the keys a prompt's stubs name: lightmem2's by default, another
    tool's markers for a peer replayed the same way (``benchmarks/peers``). Keep the lost uses for a report in :attr:`lost_uses` (the first 100). The recover
    round trips K charged prices are in :attr:`recovers`, each (artifact, line range) once.
    """

    def __init__(self, lookup: Lookup | None = None, keys: Callable[[str], list[str]] | None = None) -> None:
        self._lookup = lookup
        self._keys = keys or stub_keys
        self._archived: dict[str, str | None] = {}
        self._index = _SpanIndex()
        self._tool_ids: dict[int, tuple[ChatMessage, str]] = {}
        self._said = _SpanIndex()  # what the assistant wrote: its texts and tool-call argument values
        self._said_ids: dict[int, ChatMessage] = {}
        self._texts: dict[int, tuple[ChatMessage, str]] = {}
        self._errors: dict[int, tuple[ChatMessage, tuple[str, ...]]] = {}
        self._calls = 0
        self._counts = dict.fromkeys(
            (
                "kept",
                "recoverable",
                "lost",
                "kept_lines",
                "recoverable_lines",
                "lost_lines",
                "errors",
                "errors_kept",
                "task_uses",
                "task_kept",
                "task_kept_lines",
                "said_kept",
                "said_recoverable",
                "said_lost",
            ),
            0,
        )
        self._recovered: set[tuple[str, int, tuple[str, ...]]] = set()
        self.recovers: list[Recover] = []
        self.lost_uses: list[Use] = []

    def _index_tools(self, prompt: Sequence[ChatMessage]) -> None:
        for message in prompt:
            if message.get("role") != "tool" or id(message) in self._tool_ids:
                continue
            text = content_text(message.get("content"))
            self._tool_ids[id(message)] = (message, text)  # holding it keeps the id from being reused
            self._index.add(text)

    def _source(self, prompt: Sequence[ChatMessage], located: Located) -> tuple[int, tuple[str, ...], int]:
        """First line index and whole lines of the tool output a span is judged by, and that output's
        position in the prompt: the newest tool output of this call's original prompt that contains
        it (what the agent read last), else the output it was first indexed from (one that
        compaction took out of the prompt; position ``len(prompt)``, as if current)."""
        span, tid, start = located
        for pos in range(len(prompt) - 1, -1, -1):
            message = prompt[pos]
            if message.get("role") == "tool":
                text = self._tool_ids[id(message)][1]
                at = text.find(span)
                if at >= 0:
                    return (*touched_lines(text, at, len(span)), pos)
        return (*self._index.lines_of(tid, start, len(span)), len(prompt))

    def _index_said(self, prompt: Sequence[ChatMessage]) -> None:
        for message in prompt:
            if message.get("role") != "assistant" or id(message) in self._said_ids:
                continue
            self._said_ids[id(message)] = message
            for text in output_texts(message):
                self._said.add(text)

    def _text(self, message: ChatMessage) -> str:
        """:func:`message_text`, memoised per message object (prompts share their messages)."""
        hit = self._texts.get(id(message))
        if hit is None or hit[0] is not message:
            hit = self._texts[id(message)] = (message, message_text(message))
        return hit[1]

    def _error_lines(self, message: ChatMessage) -> tuple[str, ...]:
        """The distinct error lines of one tool message, memoised per message object."""
        hit = self._errors.get(id(message))
        if hit is None or hit[0] is not message:
            found = tuple(dict.fromkeys(error_lines(content_text(message.get("content")))))
            hit = self._errors[id(message)] = (message, found)
        return hit[1]

    def _archived_text(self, key: str) -> str | None:
        if key not in self._archived:
            self._archived[key] = self._lookup(key) if self._lookup else None
        return self._archived[key]

    def add_call(
        self,
        original_prompt: Sequence[ChatMessage],
        transformed_prompt: Sequence[ChatMessage],
        output: ChatMessage,
        host_prompt: Sequence[ChatMessage] | None = None,
    ) -> list[Use]:
        """Judge the uses in this call's output and the error lines its prompt must show; returns the
        uses in order of appearance.

        ``original_prompt`` is the agent's whole history (what a later use may come from);
        ``host_prompt``, where the host compacted it, what the host sent: the error lines a policy
        must keep are those of the newest outputs the host still showed (what the host's own
        compaction took away is counted as lost uses, not as lines the policy hid)."""
        call = self._calls
        self._calls += 1
        self._index_tools(original_prompt)
        goal = last_goal(original_prompt)
        shown = original_prompt if host_prompt is None else host_prompt
        current = {id(m) for m in shown[last_goal(shown) + 1 :]}
        errors = dict.fromkeys(
            line for m in newest_outputs(shown).values() if id(m) in current for line in self._error_lines(m)
        )
        spans: dict[str, Located] = {}
        said: dict[str, Located] = {}
        for text in output_texts(output):
            for located in self._index.spans(text):
                spans.setdefault(located[0], located)
            for located in self._said.spans(text):
                if not any(located[0] in s or s in located[0] for s in spans):
                    said.setdefault(located[0], located)
        self._index_said(original_prompt)  # after: a call's own output is no use of itself
        if not spans and not errors and not said:
            return []
        haystack = prompt_text(transformed_prompt, self._text)
        bounded = f"\n{haystack}\n"
        counts = self._counts
        if errors:
            counts["errors"] += len(errors)
            counts["errors_kept"] += sum(has_line(bounded, line) for line in errors)
        keyed: list[tuple[str, str]] | None = None

        def archives() -> list[tuple[str, str]]:
            nonlocal keyed
            if keyed is None:
                keys = dict.fromkeys(self._keys(haystack))
                keyed = [(k, t) for k, t in ((k, self._archived_text(k)) for k in keys) if t is not None]
            return keyed

        uses: list[Use] = []
        for located in said.values():
            span, tid, start = located
            first, lines = self._said.lines_of(tid, start, len(span))
            artifact = None
            if span in haystack:
                verdict: Verdict = "kept"
            else:
                artifact = next((k for k, t in archives() if _holds(t, span)), None)
                verdict = "lost" if artifact is None else "recoverable"
            counts[f"said_{verdict}"] += 1
            if verdict == "lost" and len(self.lost_uses) < 100:
                self.lost_uses.append(Use(call, span, "lost", "lost", lines))
            if artifact is not None and (artifact, -1 - first, lines) not in self._recovered:
                self._recovered.add((artifact, -1 - first, lines))
                self.recovers.append(Recover(call, artifact, "\n".join(lines), said=True))
        for located in spans.values():
            span = located[0]
            first, lines, pos = self._source(original_prompt, located)
            verdict = "kept"
            artifact = None
            if span not in haystack:
                artifact = next((k for k, t in archives() if _holds(t, span)), None)
                verdict = "lost" if artifact is None else "recoverable"
            by_line = line_verdict(lines, bounded, lambda: [f"\n{t}\n" for _, t in archives()])
            use = Use(call, span, verdict, by_line, lines, artifact, pos)
            uses.append(use)
            counts[verdict] += 1
            counts[f"{by_line}_lines"] += 1
            if pos > goal:
                counts["task_uses"] += 1
                counts["task_kept"] += verdict == "kept"
                counts["task_kept_lines"] += by_line == "kept"
            if artifact is not None and (artifact, first, lines) not in self._recovered:
                self._recovered.add((artifact, first, lines))
                self.recovers.append(Recover(call, artifact, "\n".join(lines)))
            if verdict == "lost" and len(self.lost_uses) < 100:
                self.lost_uses.append(use)
        return uses

    def result(self) -> Retention:
        c = self._counts
        return Retention(
            c["kept"] + c["recoverable"] + c["lost"],
            c["kept"],
            c["recoverable"],
            c["lost"],
            c["kept_lines"],
            c["recoverable_lines"],
            c["lost_lines"],
            c["errors"],
            c["errors_kept"],
            c["task_uses"],
            c["task_kept"],
            c["task_kept_lines"],
            c["said_kept"] + c["said_recoverable"] + c["said_lost"],
            c["said_kept"],
            c["said_recoverable"],
            c["said_lost"],
        )


def measure_retention(
    calls: Iterable[tuple[Sequence[ChatMessage], Sequence[ChatMessage], ChatMessage]],
    lookup: Lookup | None = None,
) -> Retention:
    """Retention of a whole session given ``(original_prompt, transformed_prompt, output)`` per call."""
    tracker = RetentionTracker(lookup)
    for original, transformed, output in calls:
        tracker.add_call(original, transformed, output)
    return tracker.result()
