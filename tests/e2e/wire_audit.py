"""What the model received, request by request: a run with lightmem2 against the same run without it.

Every host's wire-level end-to-end test runs one scripted session (:data:`STEPS`: >= 10 model calls,
three large outputs: one repeated identically, one from a command that fails with a nonzero exit, one
file read; and a short output of lines the first one showed) twice against the fake provider, with and without lightmem2, and hands both lists of
request bodies to :func:`audit`. It fails the test with every fault it finds, each naming the request
and the tool call:

- every tool output is verbatim, or reduced: each stub's key recovers text that is part of the output
  the run without lightmem2 shows there, and every line outside the stubs is a line of that output;
- no stub refers to its own call (a repeat names an earlier call whose output is in the request; a
  repeat that names no call must recover the text of an earlier output in the request, or share the
  key of that output's own stub); a marker of repeated lines that names a call names an earlier one
  whose output, as the request shows it, has every line the marker stands for;
- the success or failure the model reads (the wire's error flag, the exit code, the host's own
  "completed"/"failed" words) equals the run without lightmem2;
- each request extends the one before (the same history, longer), except at the eviction batches
  ``report`` names;
- the ledger (``report --json``) has one row per model call, whose tokens sent are the provider's
  count for that call, and whose "without lightmem2" is within :data:`TOLERANCE` of what the provider
  counted for the same call in the run without lightmem2.

Texts are compared with what differs between two runs of one command masked (:data:`VOLATILE`:
Codex's wall time and chunk id), and a Codex code-mode result object (the JSON its ``exec`` script
prints) is read as its other fields, then its ``output`` decoded, so its lines compare as lines.

The fake provider counts tokens with o200k (:func:`o200k_upstream`), as OpenAI's API does, so the
ledger's estimate of what lightmem2 removed is in the provider's own units and the 2% is a real bound.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from fake_upstream import strip_marks

TOLERANCE = 0.02
REPEAT_OF = re.compile(r"\[lightmem2: identical to the output of tool call (\S+) \(")
REPEAT_UNNAMED = re.compile(r"\[lightmem2: identical to an earlier tool output in this conversation \(")
STUB_ANY = re.compile(r"\[lightmem2[^\]\n]*\]")
# in-place markers of a range of the original, recovered through the output's keyed stub (work.Mark,
# linedup.marker): keyless by design, so only with a keyed stub in the same output
MARK = re.compile(
    r"\[lightmem2(?: repeat)?: lines (\d+):(\d+) (?:elided|of this output, as shown in "
    r"(?:an earlier output|the output of tool call (\S+)|the outputs of tool calls ([^\]]+)))\]"
)
KEY = re.compile(r"\b([0-9a-f]{12,32})\b")
LINES = re.compile(r'(?:--lines |lines=")(\d+):(\d+)')
"""A stub's recover hint naming its lines in a batch's archive (one document for the batch's outputs):
the CLI's ``lightmem2 recover KEY --lines A:B``, or the recover tool's ``lightmem2_recover(key,
lines="A:B")`` where the host has the tool (OpenClaw)."""
RECORD = "\n[lightmem2 session record]\n"
"""What follows it in a batch's first stub is the session record: lightmem2's own text, not output."""
EXIT_CODE = re.compile(
    r"(?:exit code|exit_code|exited with code|exit status|Exit code)\W{0,3}(-?\d+)", re.IGNORECASE
)
OUTCOME_WORDS = re.compile(r"\b(Script completed|Script failed|Script error|Process exited|timed out)\b")
# what a host prints that differs from run to run on its own (Codex: the wall time and chunk id of a
# command, in its text header and in code mode's result object); masked before texts are compared
VOLATILE = re.compile(r'(Chunk ID: |Wall time:? |"chunk_id": |"wall_time_seconds": )[^\s,}]+')
_RESULT_MARKERS = ("exit_code", "chunk_id", "session_id")


# -- the scripted session ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One tool call of the scripted session: ``shell`` runs ``command``; ``read`` reads ``path``
    (a host without a read tool reads it with ``cat``)."""

    kind: str
    command: str = ""
    path: str = ""


LISTING = "seq -f 'row %g: compiled module ok' 1 200"
FAILING = "sh ./check.sh"
HEAD_AGAIN = "seq -f 'row %g: compiled module ok' 1 20; echo listing head again"
STEPS: tuple[Step, ...] = (
    Step("shell", LISTING),
    Step("shell", "echo step two done"),
    Step("read", path="settings_module.py"),
    Step("shell", FAILING),
    Step("shell", "echo step five done"),
    Step("shell", LISTING),  # the same large output again, identically
    Step("shell", HEAD_AGAIN),  # lines the first listing showed: a marker naming that call
    Step("shell", "echo step eight done"),
    Step("shell", "echo step nine done"),
    Step("shell", "echo step ten done"),
)
FINAL = "All ten steps done."
PROMPT = "Run the release checks one by one, then say you are done."


def check_script() -> str:
    """``check.sh``: 180 passing checks, one failure with its cause, then exit 3 (no pass may hide
    the failing lines, and the model must still read a failure with code 3). The failing lines go to
    stderr, merged into stdout by the script itself (``exec 2>&1``): a host reading two pipes
    interleaves them as they happen to arrive, and the two runs must show the same output."""
    lines = [f'echo "check_{i:03d} ... ok"' for i in range(180)]
    lines[137] = 'echo "check_137 ... FAILED: expected 3 replicas, found 2 (quorum lost)" >&2'
    return "#!/bin/sh\nexec 2>&1\n" + "\n".join(lines) + '\necho "1 of 180 checks failed" >&2\nexit 3\n'


def settings_module() -> str:
    """A ~7 KB Python file the agent reads (a file view: the lines an agent edits must stay)."""
    body = [f'SETTING_{i:03d} = "{(i * 7919) % 10007:05d}-value"  # knob {i}' for i in range(170)]
    return '"""Release settings."""\n\n' + "\n".join(body) + "\n"


def write_workspace(folder: Any) -> None:
    """The files the scripted session reads and runs, in the host's working folder."""
    (folder / "check.sh").write_text(check_script(), encoding="utf-8")
    (folder / "settings_module.py").write_text(settings_module(), encoding="utf-8")


# -- what a request holds ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ToolOutput:
    """One tool result in a request, with the call that produced it."""

    call_id: str
    name: str
    arguments: str
    text: str
    is_error: bool | None  # the wire's own flag (Anthropic ``is_error``); None where the wire has none


def _result_object(text: str) -> str:
    """A Codex code-mode result (``{"chunk_id":...,"exit_code":0,...,"output":"<body>"}``, the JSON
    ``text(await tools.exec_command(...))`` prints) as its other fields on one line, then the body
    decoded, so the body's lines and a stub's recovered text compare with the plain output's."""
    if not (text.startswith('{"') and text.endswith("}")):
        return text
    try:
        obj = json.loads(text)
    except ValueError:
        return text
    if not (
        isinstance(obj, dict)
        and isinstance(obj.get("output"), str)
        and any(k in obj for k in _RESULT_MARKERS)
    ):
        return text
    rest = {k: v for k, v in obj.items() if k != "output"}
    return json.dumps(rest) + "\n" + str(obj["output"])


def _text(value: Any) -> str:
    if isinstance(value, str):
        return _result_object(value)
    if isinstance(value, list):
        return "".join(_text(v) for v in value)
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return _result_object(str(value["text"]))
        if "content" in value:
            return _text(value["content"])
    return ""


def _anthropic(body: dict[str, Any]) -> list[ToolOutput]:
    calls: dict[str, tuple[str, str]] = {}
    out: list[ToolOutput] = []
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                calls[block["id"]] = (block.get("name", ""), json.dumps(block.get("input"), sort_keys=True))
            elif block.get("type") == "tool_result":
                cid = block.get("tool_use_id", "")
                name, args = calls.get(cid, ("", ""))
                out.append(
                    ToolOutput(cid, name, args, _text(block.get("content")), bool(block.get("is_error")))
                )
    return out


def _responses(body: dict[str, Any]) -> list[ToolOutput]:
    calls: dict[str, tuple[str, str]] = {}
    out: list[ToolOutput] = []
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call"):
            calls[item.get("call_id", "")] = (
                item.get("name", ""),
                str(item.get("arguments", item.get("input", ""))),
            )
        elif kind in ("function_call_output", "custom_tool_call_output"):
            cid = item.get("call_id", "")
            name, args = calls.get(cid, ("", ""))
            out.append(ToolOutput(cid, name, args, _text(item.get("output")), None))
    return out


def _chat(body: dict[str, Any]) -> list[ToolOutput]:
    calls: dict[str, tuple[str, str]] = {}
    out: list[ToolOutput] = []
    for msg in body.get("messages") or []:
        for call in msg.get("tool_calls") or []:
            fn = call.get("function") or {}
            calls[call.get("id", "")] = (fn.get("name", ""), str(fn.get("arguments", "")))
        if msg.get("role") == "tool":
            cid = msg.get("tool_call_id", "")
            name, args = calls.get(cid, ("", ""))
            out.append(ToolOutput(cid, name, args, _text(msg.get("content")), None))
    return out


OUTPUTS: dict[str, Callable[[dict[str, Any]], list[ToolOutput]]] = {
    "anthropic": _anthropic,
    "responses": _responses,
    "chat": _chat,
}


def tool_outputs(api: str, body: dict[str, Any]) -> list[ToolOutput]:
    """The tool results of a request, in order, each with its call's name and arguments."""
    return OUTPUTS[api](body)


def _one_text(message: Any) -> Any:
    """An Anthropic message whose content is one text block, with that text as its content: the API
    reads both alike, and Claude Code (2.1.332) sends the message that holds a cache breakpoint as a
    block and the same message as a string on the next call, with or without lightmem2."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
        block = content[0]
        if block.get("type") == "text" and set(block) == {"type", "text"} and isinstance(block["text"], str):
            return {**message, "content": block["text"]}
    return message


def history(api: str, body: dict[str, Any]) -> list[Any]:
    """The conversation a request carries, as the provider caches it (cache marks dropped)."""
    items = body.get("input") if api == "responses" else body.get("messages")
    if not isinstance(items, list):
        return []
    plain = list(strip_marks(items))
    return [_one_text(m) for m in plain] if api == "anthropic" else plain


# -- the audit --------------------------------------------------------------------------------------
def steady(text: str) -> str:
    """``text`` with what differs between two runs of the same command masked (:data:`VOLATILE`)."""
    return VOLATILE.sub(r"\1#", text)


def outcome(out: ToolOutput) -> tuple[Any, ...]:
    """What tells the model whether the call succeeded: the error flag, exit codes, outcome words."""
    return (out.is_error, tuple(EXIT_CODE.findall(out.text)), tuple(OUTCOME_WORDS.findall(out.text)))


@dataclass
class Audit:
    """The faults found (empty when the run is right) and what was checked."""

    faults: list[str] = field(default_factory=list)
    stubbed: int = 0
    verbatim: int = 0
    repeats: int = 0
    recovered: int = 0
    named_marks: int = 0  # markers of repeated lines naming the call that shows them, checked

    def fault(self, where: str, what: str) -> None:
        self.faults.append(f"{where}: {what}")

    def raise_if_faulty(self) -> None:
        assert not self.faults, f"{len(self.faults)} faults in what the model received:\n" + "\n".join(
            self.faults[:40]
        )


def _outside_stubs(text: str) -> list[str]:
    return [line for line in STUB_ANY.sub("\x00", text).split("\n") if "\x00" not in line]


def _audit_named_marker(
    where: str,
    mark: re.Match[str],
    got: ToolOutput,
    earlier: list[ToolOutput],
    original: str | None,
    audit: Audit,
) -> None:
    """A marker "lines A:B of this output, as shown in the output of tool call X" (or "the outputs of tool calls X,
    Y"): each call named is an earlier call of the request, not this one, and their outputs as the
    request shows them have each of lines A:B of the original (``original``: what the output's keyed
    stub recovers; lines under 8 chars aside, the marker never stands for them alone)."""
    names = [mark.group(3)] if mark.group(3) else mark.group(4).split(", ")
    shown: set[str] = set()
    for name in names:
        source = [o for o in earlier if o.call_id == name]
        if name == got.call_id:
            audit.fault(where, f"a line marker names its own call: {mark.group(0)}")
            return
        if not source:
            audit.fault(where, f"a line marker names a call not earlier in the request: {mark.group(0)}")
            return
        shown |= set(steady(source[-1].text).split("\n"))
    if original is None:
        return
    wanted = steady(original).split("\n")[int(mark.group(1)) - 1 : int(mark.group(2))]
    missing = [line for line in wanted if len(line.strip()) >= 8 and line not in shown]
    if missing:
        lack = "that output lacks" if len(names) == 1 else "those outputs lack"
        audit.fault(where, f"{mark.group(0)}, but {lack} {missing[0][:120]!r}")
    else:
        audit.named_marks += 1


def audit_output(
    where: str,
    got: ToolOutput,
    plain: ToolOutput,
    earlier: list[ToolOutput],
    recover: Callable[[str], str | None],
    audit: Audit,
) -> None:
    """One tool output with lightmem2 (``got``) against the same output without it (``plain``)."""
    if (got.name, got.arguments) != (plain.name, plain.arguments):
        audit.fault(
            where, f"call differs: {got.name}({got.arguments[:80]}) vs {plain.name}({plain.arguments[:80]})"
        )
    if outcome(got) != outcome(plain):
        audit.fault(
            where, f"success/failure differs: {outcome(got)} with lightmem2, {outcome(plain)} without"
        )
    got_text, plain_text = steady(got.text), steady(plain.text)
    if got_text == plain_text:
        audit.verbatim += 1
        return
    if RECORD in got_text and STUB_ANY.search(got_text.split(RECORD)[0]):
        got_text = got_text.split(RECORD)[0]
    stubs = STUB_ANY.findall(got_text)
    if not stubs:
        audit.fault(where, f"changed with no stub: {got_text[:200]!r} vs {plain_text[:200]!r}")
        return
    audit.stubbed += 1
    keyed = [key for stub in stubs if not MARK.fullmatch(stub) for key in KEY.findall(stub)]
    for stub in stubs:
        mark = MARK.fullmatch(stub)
        if mark:
            if not keyed:
                audit.fault(where, f"a line marker with no keyed stub to recover it from: {stub}")
            elif mark.group(3) or mark.group(4):
                _audit_named_marker(where, mark, got, earlier, recover(keyed[0]), audit)
            continue
        repeat = REPEAT_OF.search(stub)
        if repeat:
            audit.repeats += 1
            if repeat.group(1) == got.call_id:
                audit.fault(where, f"a stub refers to its own call: {stub}")
            elif repeat.group(1) not in [o.call_id for o in earlier]:
                audit.fault(where, f"a repeat names a call not earlier in the request: {stub}")
        elif REPEAT_UNNAMED.search(stub):
            audit.repeats += 1
            # an earlier output is that text, or was reduced with a stub of the same (content) key
            keys = KEY.findall(stub)
            texts = [steady(t) for t in map(recover, keys) if t is not None]
            if not any(steady(o.text) in texts or any(k in o.text for k in keys) for o in earlier):
                audit.fault(where, f"a repeat of no earlier output in the request: {stub}")
        keys = KEY.findall(stub)
        if not keys:
            audit.fault(where, f"a stub with no key: {stub}")
        lines = LINES.search(stub)
        for key in keys:
            original = recover(key)
            if original is not None and lines:  # its lines in the batch's document
                original = "\n".join(original.split("\n")[int(lines.group(1)) - 1 : int(lines.group(2))])
            if original is None:
                audit.fault(where, f"key {key} recovers nothing")
            elif steady(original).rstrip("\n") not in plain_text:
                audit.fault(where, f"key {key} recovers text that is not this output: {original[:120]!r}")
            else:
                audit.recovered += 1
    plain_lines = set(plain_text.split("\n"))
    changed = [line for line in _outside_stubs(got_text) if line and line not in plain_lines]
    if changed:
        audit.fault(
            where, f"{len(changed)} kept lines are not lines of the output, e.g. {changed[0][:160]!r}"
        )


DUMP_ENV = "LIGHTMEM2_E2E_DUMP"


def dump(api: str, with_lm: list[dict[str, Any]], without: list[dict[str, Any]]) -> Path | None:
    """With ``LIGHTMEM2_E2E_DUMP=DIR``, every request body the provider received in both runs, as
    ``DIR/API-N.json`` (``{"with": [...], "without": [...]}``), to read what the model received
    request by request; nothing without it."""
    folder = os.environ.get(DUMP_ENV)
    if not folder:
        return None
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{api}-{len(list(out.glob(f'{api}-*.json')))}.json"
    path.write_text(json.dumps({"with": with_lm, "without": without}, indent=1), encoding="utf-8")
    return path


def audit(
    api: str,
    with_lm: list[dict[str, Any]],
    without: list[dict[str, Any]],
    recover: Callable[[str], str | None],
    batches: Iterable[int] = (),
    transient_tail: int = 0,
) -> Audit:
    """Compare the requests of a run with lightmem2 to the same run without it (see the module doc).

    ``batches``: 0-based request indexes at which ``report`` names an eviction batch (there the
    request may start anew). ``transient_tail``: trailing messages a host rebuilds on every call
    (OpenClaw's runtime context), left out of the prefix check.
    """
    dump(api, with_lm, without)
    result = Audit()
    if len(with_lm) != len(without):
        result.fault("session", f"{len(with_lm)} model calls with lightmem2, {len(without)} without")
    allowed = set(batches)
    for i, (got_body, plain_body) in enumerate(zip(with_lm, without, strict=False)):
        got, plain = tool_outputs(api, got_body), tool_outputs(api, plain_body)
        if len(got) != len(plain) and i not in allowed:
            result.fault(f"request {i + 1}", f"{len(got)} tool outputs with lightmem2, {len(plain)} without")
        for j, (g, p) in enumerate(zip(got, plain, strict=False)):
            earlier = got[:j]
            audit_output(f"request {i + 1}, output {j + 1} ({g.name})", g, p, earlier, recover, result)
        if i and i not in allowed:
            before, after = history(api, with_lm[i - 1]), history(api, got_body)
            kept = before[: len(before) - transient_tail] if transient_tail else before
            if after[: len(kept)] != kept:
                at = next(
                    (n for n, (a, b) in enumerate(zip(kept, after, strict=False)) if a != b), len(after)
                )
                result.fault(f"request {i + 1}", f"does not extend request {i} (differs at message {at})")
    return result


def audit_ledger(
    rows: list[dict[str, Any]], with_usage: list[dict[str, int]], without_usage: list[dict[str, int]]
) -> Audit:
    """The ledger's rows (``report --json`` calls) against the provider's per-call counts: one row per
    model call, tokens sent equal to what the provider counted, "without lightmem2" within
    :data:`TOLERANCE` of what it counted for that call in the run without lightmem2 (the tools a host
    sends only because lightmem2 is installed included: the ledger must leave them out itself)."""
    result = Audit()
    if len(rows) != len(with_usage):
        result.fault("ledger", f"{len(rows)} rows for {len(with_usage)} model calls")
    for i, (row, got, plain) in enumerate(zip(rows, with_usage, without_usage, strict=False)):
        where = f"ledger call {i + 1}"
        if row.get("realInputTokens") != got["prompt"]:
            result.fault(
                where, f"tokens sent {row.get('realInputTokens')}, the provider counted {got['prompt']}"
            )
        without_lm = row.get("realBaselineTokens")
        if without_lm is None or abs(without_lm - plain["prompt"]) > TOLERANCE * plain["prompt"]:
            result.fault(
                where,
                f"without lightmem2 {without_lm}, the provider counted {plain['prompt']} in the run without it",
            )
    return result


def per_call_figures(usage: list[dict[str, int]]) -> dict[str, Any]:
    """Tokens the model received and K at the fake provider's cache, for a note or a results file."""
    prompt = sum(r["prompt"] for r in usage)
    cached = sum(r["cached"] for r in usage)
    return {
        "calls": len(usage),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "K": round(0.1 * cached + prompt - cached, 1),
        "per_call_prompt": [r["prompt"] for r in usage],
    }


_JSON_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})')
_UNESCAPED = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(found: re.Match[str]) -> str:
    code = found.group(1)
    return chr(int(code[1:], 16)) if code[0] == "u" else _UNESCAPED.get(code, code)


def o200k_counter() -> Callable[[str], int]:
    """Token count of a rendered prompt with o200k (what OpenAI's API counts; lightmem2 counts so too).

    The fake renders the prompt as JSON; a provider tokenises the strings' contents, not their JSON
    escapes, so they are undone first. Counted escaped, a text holding escapes of its own costs more
    than the provider would count (Codex's code-mode result, itself JSON: 1,819 tokens for 1,617),
    and what lightmem2 removes from it looks bigger than lightmem2's own, correct count of it.
    """
    from lightmem_plugin.tokens import count_tokens

    def count(text: str) -> int:
        return count_tokens(_JSON_ESCAPE.sub(_unescape, text))

    return count
