"""Host-like load for ``benchmarks/bench_server.py``: agent sessions, a paced fake provider, a load driver.

Why not one fixed small request: a host's requests grow. Each call of a Claude Code, Codex or
OpenClaw session resends the whole conversation so far (system prompt, tool definitions, every earlier
tool call and its output) plus one new assistant tool call and its result, so the proxy's work per call
is measured on what it really receives. A simulated session here runs up to ``--turns`` calls
(default 30); call k carries k-1 tool exchanges. The outputs are a seeded mix of what agents read:
short outputs (``git status``, edits, ``ls``), file views, test runs, build logs, search results,
diffs and tracebacks of several KB each (kinds lightmem2 reduces). Each API is spelled as its host
sends it: Claude Code's system blocks, tool list, ``metadata.user_id`` session and thinking blocks
(Anthropic Messages); Codex's instructions, reasoning items with encrypted content and
``prompt_cache_key`` (Responses); OpenClaw's system message, ``tool_calls`` and ``tool`` messages
(Chat Completions). Every call streams.

Three commands, each its own process (the benchmark runs the load driver apart from the proxy, so the
proxy's CPU is measured alone, by PID):

- ``fake PORT [--delay-ms 250]``: a fake provider on loopback that answers every streamed call after
  the delay (``x-bench-delay-ms`` overrides it per call), in a few paced bursts of SSE events (text
  plus one tool call, as the real APIs stream it), with ``usage`` from a cheap prefix cache keyed by
  the ``x-bench-conv`` header. It does as little as a provider can (no JSON parse), so the CPU it
  takes from the proxy on a small machine is small and the same in both runs.
- ``drive API URL --clients N --calls M``: N concurrent clients, each running sessions one call
  after the other, M calls in all; prints one JSON object (time to first byte and to the last byte of
  every call, errors, wall and CPU seconds of the driver, optional RSS samples of a PID).
- :func:`cpu_seconds` and :func:`rss_mb` read another process's CPU time and memory from /proc.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import hashlib
import itertools
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "server"))
from fake_wire import STREAM, Reply  # noqa: E402

APIS = ("anthropic", "responses", "chat")
PATHS = {"anthropic": "/v1/messages", "responses": "/v1/responses", "chat": "/v1/chat/completions"}
END_MARK = {"anthropic": b"message_stop", "responses": b"response.completed", "chat": b"data: [DONE]"}
CONV_HEADER = "x-bench-conv"
DELAY_HEADER = "x-bench-delay-ms"

# -- what the tools print ----------------------------------------------------------------------------

_WORD_TEXT = (
    "user account order item price total cache client server request response config parser token "
    "session record ledger index query field value result error status handler router model schema "
    "buffer stream chunk event worker queue task retry limit timeout path file line count offset"
)
WORDS = tuple(_WORD_TEXT.split())
MODULES = ("api", "models", "views", "utils", "storage", "auth", "billing", "search", "tasks", "cli")


def _ident(rng: random.Random) -> str:
    return "_".join(rng.sample(WORDS, 2))


def _path(rng: random.Random) -> str:
    return f"src/app/{rng.choice(MODULES)}/{_ident(rng)}.py"


def source_lines(rng: random.Random, n: int) -> list[str]:
    """``n`` lines of plausible Python."""
    out = ["from __future__ import annotations", "", "import json", "import logging", ""]
    while len(out) < n:
        name = _ident(rng)
        if rng.random() < 0.25:
            out += [
                "",
                f"class {name.title().replace('_', '')}:",
                f'    """The {name.replace("_", " ")}."""',
                "",
            ]
        out.append(
            f"def {name}(self, {rng.choice(WORDS)}: int, {rng.choice(WORDS)}: str | None = None) -> dict:"
        )
        for _ in range(rng.randint(3, 9)):
            a, b = rng.sample(WORDS, 2)
            out.append(
                rng.choice(
                    (
                        f"    {a} = self.{b}.get({a!r}, {rng.randint(0, 999)})",
                        f"    if {a} is None or {a} > {rng.randint(1, 500)}:",
                        f"        raise ValueError(f'bad {a}: {{{a}}}')",
                        f"    log.debug('{a} %s -> %s', {a}, {b})",
                        f"    return {{{a!r}: {a}, {b!r}: json.dumps({b})}}",
                        f"    for {a} in self.{b}s:",
                    )
                )
            )
        out.append("")
    return out[:n]


def file_view(rng: random.Random, numbered: bool) -> tuple[str, str]:
    path = _path(rng)
    lines = source_lines(rng, rng.randint(60, 280))
    if numbered:  # Claude Code's Read: "     1→line"
        return path, "\n".join(f"{i:>6}\u2192{line}" for i, line in enumerate(lines, 1))
    return path, "\n".join(lines)


def test_run(rng: random.Random) -> str:
    n = rng.randint(30, 90)
    failed = sorted(rng.sample(range(n), rng.randint(1, 3)))
    mod = rng.choice(MODULES)
    out = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.12.3, pytest-8.3.2, pluggy-1.5.0",
        "rootdir: /home/dev/proj",
        f"collected {n} items",
        "",
    ]
    for i in range(n):
        status = "FAILED" if i in failed else "PASSED"
        out.append(f"tests/test_{mod}.py::test_{_ident(rng)}_{i:02d} {status:<24} [{100 * (i + 1) // n:>3}%]")
    out += ["", "=================================== FAILURES ==================================="]
    for i in failed:
        a, b = rng.sample(WORDS, 2)
        out += [
            f"_____________________________ test_{a}_{b}_{i:02d} _____________________________",
            "",
            f"    def test_{a}_{b}_{i:02d}():",
            f"        {a} = make_{a}({rng.randint(1, 99)})",
            f">       assert {a}.{b} == {rng.randint(100, 999)}",
            f"E       AssertionError: assert {rng.randint(100, 999)} == {rng.randint(100, 999)}",
            f"E        +  where {rng.randint(100, 999)} = <{a.title()} id={rng.randint(1, 9999)}>.{b}",
            "",
            f"tests/test_{mod}.py:{rng.randint(10, 400)}: AssertionError",
        ]
    out += [
        "=========================== short test summary info ============================",
        *(f"FAILED tests/test_{mod}.py::test_{i:02d} - AssertionError" for i in failed),
        f"========================= {len(failed)} failed, {n - len(failed)} passed in "
        f"{rng.uniform(0.5, 9):.2f}s =========================",
    ]
    return "\n".join(out)


def build_log(rng: random.Random) -> str:
    out = ["mkdir -p build/obj"]
    n = rng.randint(40, 140)
    for i in range(n):
        out.append(f"gcc -O2 -Wall -Iinclude -c src/module_{i:03d}.c -o build/obj/module_{i:03d}.o")
        if rng.random() < 0.04:
            var = rng.choice(WORDS)
            out += [
                f"src/module_{i:03d}.c: In function '{_ident(rng)}':",
                f"src/module_{i:03d}.c:{rng.randint(10, 300)}:12: warning: unused variable '{var}' "
                "[-Wunused-variable]",
            ]
    out += ["ar rcs build/libcore.a build/obj/*.o", "gcc -o build/app build/obj/main.o -Lbuild -lcore -lm"]
    if rng.random() < 0.3:
        out += [
            "/usr/bin/ld: build/obj/module_007.o: in function `parse_header':",
            "module_007.c:(.text+0x1a4): undefined reference to `crc32_update'",
            "collect2: error: ld returned 1 exit status",
            "make: *** [Makefile:42: build/app] Error 1",
        ]
    return "\n".join(out)


def search(rng: random.Random, term: str) -> str:
    return "\n".join(
        f"{_path(rng)}:{rng.randint(1, 900)}:    {term} = self.{rng.choice(WORDS)}.get({rng.choice(WORDS)!r})"
        for _ in range(rng.randint(20, 80))
    )


def diff(rng: random.Random) -> str:
    out = []
    for _ in range(rng.randint(2, 5)):
        path = _path(rng)
        out += [
            f"diff --git a/{path} b/{path}",
            "index 3f2a1c4..9b8e7d2 100644",
            f"--- a/{path}",
            f"+++ b/{path}",
        ]
        for _ in range(rng.randint(1, 3)):
            start = rng.randint(1, 400)
            out.append(f"@@ -{start},7 +{start},8 @@ def {_ident(rng)}(self):")
            lines = source_lines(rng, 12)[5:12]
            out += [" " + line for line in lines[:3]]
            out += ["-" + lines[3], "+" + lines[3].replace("get", "pop"), "+    " + _ident(rng) + " = None"]
            out += [" " + line for line in lines[4:]]
    return "\n".join(out)


def traceback_text(rng: random.Random) -> str:
    out = ["Traceback (most recent call last):"]
    for _ in range(rng.randint(4, 12)):
        out += [
            f'  File "/home/dev/proj/{_path(rng)}", line {rng.randint(1, 600)}, in {_ident(rng)}',
            f"    {rng.choice(WORDS)} = self.{rng.choice(WORDS)}[{rng.choice(WORDS)!r}]",
        ]
    return "\n".join([*out, f"KeyError: '{rng.choice(WORDS)}'"])


def listing(rng: random.Random) -> str:
    return "\n".join(
        f"-rw-r--r-- 1 dev dev {rng.randint(100, 90000):>6} Mar {rng.randint(1, 28):>2} 10:{rng.randint(10, 59)} "
        f"{_ident(rng)}.py"
        for _ in range(rng.randint(15, 60))
    )


@dataclass
class Step:
    """One tool exchange: the tool (host spelling decided later), its arguments, what it printed."""

    kind: str
    command: str
    output: str
    path: str = ""
    is_error: bool = False
    old: str = ""
    new: str = ""
    thought: str = ""


KIND_WEIGHTS = (
    ("small", 40),
    ("file_view", 18),
    ("test_run", 12),
    ("search", 10),
    ("build_log", 6),
    ("diff", 6),
    ("traceback", 4),
    ("listing", 4),
)


def steps(rng: random.Random, n: int, numbered_views: bool) -> list[Step]:
    """``n`` tool exchanges of one session (seeded: the same session always prints the same)."""
    kinds, weights = zip(*KIND_WEIGHTS, strict=True)
    out: list[Step] = []
    for _ in range(n):
        kind = rng.choices(kinds, weights)[0]
        thought = f"Now let me check the {' '.join(rng.sample(WORDS, 3))} before changing it."
        if kind == "file_view":
            path, text = file_view(rng, numbered_views)
            out.append(Step(kind, f"sed -n '1,400p' {path}", text, path=path, thought=thought))
        elif kind == "test_run":
            mod = rng.choice(MODULES)
            out.append(
                Step(
                    kind,
                    f"python -m pytest -q tests/test_{mod}.py",
                    test_run(rng),
                    is_error=True,
                    thought=thought,
                )
            )
        elif kind == "search":
            term = rng.choice(WORDS)
            out.append(Step(kind, f"grep -rn '{term} =' src/", search(rng, term), thought=thought))
        elif kind == "build_log":
            out.append(Step(kind, "make -j8", build_log(rng), thought=thought))
        elif kind == "diff":
            out.append(Step(kind, "git diff", diff(rng), thought=thought))
        elif kind == "traceback":
            out.append(
                Step(kind, "python scripts/run_job.py", traceback_text(rng), is_error=True, thought=thought)
            )
        elif kind == "listing":
            out.append(Step(kind, f"ls -la src/app/{rng.choice(MODULES)}", listing(rng), thought=thought))
        else:
            which = rng.random()
            if which < 0.5:  # an edit: the agent's own arguments carry the text
                path = _path(rng)
                old = "\n".join(source_lines(rng, 12)[5 : 5 + rng.randint(2, 6)])
                new = old.replace("get", "pop").replace("debug", "info") + f"\n    # {_ident(rng)}"
                out.append(
                    Step(
                        "edit",
                        "",
                        f"The file {path} has been updated.",
                        path=path,
                        old=old,
                        new=new,
                        thought=thought,
                    )
                )
            elif which < 0.8:
                files = "\n".join(f"\tmodified:   {_path(rng)}" for _ in range(rng.randint(1, 5)))
                text = f"On branch fix-{rng.choice(WORDS)}\nChanges not staged for commit:\n{files}\n"
                out.append(Step(kind, "git status", text, thought=thought))
            else:
                out.append(
                    Step(kind, f"wc -l {_path(rng)}", f"{rng.randint(10, 900)} {_path(rng)}", thought=thought)
                )
    return out


def _filler(rng: random.Random, chars: int, topic: str) -> str:
    """Guidance text of a system prompt or tool description, about ``chars`` long."""
    lines: list[str] = []
    size = 0
    while size < chars:
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 18)))
        line = f"- When working on {topic}, prefer the {words}."
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def _signature(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n)).decode()


# -- the three hosts ---------------------------------------------------------------------------------


def tool_schemas(
    rng: random.Random, names: list[str], desc_chars: int
) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, description, JSON schema) of a host's tools."""
    out = []
    for name in names:
        props = {w: {"type": "string", "description": f"The {w} to use."} for w in rng.sample(WORDS, 3)}
        props["command"] = {"type": "string", "description": "The command to run."}
        schema = {
            "type": "object",
            "properties": props,
            "required": ["command"],
            "additionalProperties": False,
        }
        out.append((name, _filler(rng, desc_chars, f"the {name} tool"), schema))
    return out


CLAUDE_TOOLS = [
    "Task",
    "Bash",
    "Glob",
    "Grep",
    "Read",
    "Edit",
    "Write",
    "NotebookEdit",
    "WebFetch",
    "TodoWrite",
    "WebSearch",
    "BashOutput",
    "KillShell",
    "ExitPlanMode",
    "SlashCommand",
    "MultiEdit",
]


def _j(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class HostSession:
    """One session of one host: the request body of each of its calls, as bytes.

    ``head`` and ``tail`` frame the message list; ``items`` holds each message already serialized, so a
    call's body is a join, not a new ``json.dumps`` of the whole conversation (the driver stays cheap).
    """

    api = ""

    def __init__(self, key: str, number: int, turns: int) -> None:
        self.key = key
        self.rng = random.Random(key)
        self.number = number
        self.steps = steps(self.rng, turns, numbered_views=self.api == "anthropic")
        self.task = (
            f"Task {number}: the {' '.join(self.rng.sample(WORDS, 3))} tests fail since the last change "
            f"to {_path(self.rng)}; find out why and fix it, then run the whole suite."
        )

    def body(self, call: int) -> bytes:
        """The body of call ``call`` (0-based): the head, then ``call`` tool exchanges."""
        raise NotImplementedError

    def headers(self) -> dict[str, str]:
        raise NotImplementedError


@functools.cache
def _claude_static() -> tuple[str, bytes]:
    """Claude Code's system prompt text and tool list: the same in every session, as a host's are."""
    rng = random.Random("claude-code-static")
    tools = [
        {"name": n, "description": d, "input_schema": s} for n, d, s in tool_schemas(rng, CLAUDE_TOOLS, 1800)
    ]
    return _filler(rng, 12_000, "software engineering tasks"), _j(tools)


@functools.cache
def _codex_static() -> tuple[bytes, bytes, str]:
    """Codex's instructions, tool list and permissions text (serialized once)."""
    rng = random.Random("codex-static")
    instructions = (
        "You are Codex, based on GPT-5. You are running as a coding agent in the Codex CLI.\n\n"
        + _filler(rng, 16_000, "a coding task")
    )
    tools: list[dict[str, Any]] = [
        {"type": "function", "name": n, "description": d, "strict": False, "parameters": s}
        for n, d, s in tool_schemas(rng, ["shell", "update_plan", "view_image", "list_mcp_resources"], 900)
    ]
    tools.append(
        {
            "type": "custom",
            "name": "apply_patch",
            "description": _filler(rng, 1500, "patches"),
            "format": {
                "type": "grammar",
                "syntax": "lark",
                "definition": "start: begin_patch hunk+ end_patch",
            },
        }
    )
    return _j(instructions), _j(tools), _filler(rng, 1200, "sandboxing")


@functools.cache
def _openclaw_static() -> tuple[bytes, bytes]:
    """OpenClaw's system message and tool list (serialized once)."""
    rng = random.Random("openclaw-static")
    system = "You are a personal assistant running inside OpenClaw.\n" + _filler(rng, 18_000, "the workspace")
    tools = [
        {"type": "function", "function": {"name": n, "description": d, "parameters": s}}
        for n, d, s in tool_schemas(
            rng,
            [
                "read",
                "write",
                "edit",
                "exec",
                "process",
                "web_search",
                "web_fetch",
                "browser",
                "message",
                "sessions_list",
            ],
            700,
        )
    ]
    return _j({"role": "system", "content": system}), _j(tools)


class ClaudeCode(HostSession):
    api = "anthropic"

    def __init__(self, key: str, number: int, turns: int) -> None:
        super().__init__(key, number, turns)
        prompt, tools = _claude_static()
        system = [
            {
                "type": "text",
                "text": "You are Claude Code, Anthropic's official CLI for Claude.",
                "cache_control": {"type": "ephemeral"},
            },
            {
                "type": "text",
                "text": prompt
                + f"\n<env>\nWorking directory: /home/dev/proj{number % 7}\nIs directory a git repo: Yes\n"
                f"Platform: linux\nToday's date: 2025-10-{1 + number % 28:02d}\n</env>",
                "cache_control": {"type": "ephemeral"},
            },
        ]
        # Claude Code's user id is a 64-hex digest (not a run of zeros, which reads as a long number)
        user_hash = hashlib.sha256(f"bench-user-{number}".encode()).hexdigest()
        user_id = f"user_{user_hash}_account_{uuid.uuid5(uuid.NAMESPACE_DNS, 'bench')}_session_{uuid.uuid5(uuid.NAMESPACE_URL, key)}"
        first: dict[str, Any] = {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "<system-reminder>\nAs you answer the user's questions, you can use the "
                    "following context:\n# claudeMd\nRun tests with `make test`.\n</system-reminder>",
                },
                {"type": "text", "text": self.task},
            ],
        }
        self.head = b'{"model":"claude-sonnet-4-5-20250929","messages":['
        self.tail = (
            b'],"system":'
            + _j(system)
            + b',"tools":'
            + tools
            + b',"metadata":'
            + _j({"user_id": user_id})
            + b',"max_tokens":32000,"temperature":1,"thinking":{"type":"enabled","budget_tokens":31999},'
            b'"stream":true}'
        )
        self.items = [_j(first)]
        self.last: list[dict[str, Any]] = [first]
        for i, s in enumerate(self.steps):
            tid = f"toolu_01{uuid.uuid5(uuid.NAMESPACE_OID, f'{key}/{i}').hex[:22]}"
            if s.kind == "edit":
                call = {
                    "type": "tool_use",
                    "id": tid,
                    "name": "Edit",
                    "input": {
                        "file_path": f"/home/dev/proj/{s.path}",
                        "old_string": s.old,
                        "new_string": s.new,
                    },
                }
            elif s.kind == "file_view":
                call = {
                    "type": "tool_use",
                    "id": tid,
                    "name": "Read",
                    "input": {"file_path": f"/home/dev/proj/{s.path}"},
                }
            else:
                call = {
                    "type": "tool_use",
                    "id": tid,
                    "name": "Bash",
                    "input": {"command": s.command, "description": "Run " + s.command.split()[0]},
                }
            assistant = {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": s.thought, "signature": _signature(self.rng, 240)},
                    {"type": "text", "text": s.thought},
                    call,
                ],
            }
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tid, "content": s.output}
            if s.is_error:
                result["is_error"] = True
            user = {"role": "user", "content": [result]}
            self.items += [_j(assistant), _j(user)]
            self.last.append(user)

    def body(self, call: int) -> bytes:
        # Claude Code marks the last message for caching: that one is serialized with the mark
        last = self.last[call]
        marked = {
            **last,
            "content": [
                *last["content"][:-1],
                {**last["content"][-1], "cache_control": {"type": "ephemeral"}},
            ],
        }
        n = 1 + 2 * call
        return self.head + b",".join([*self.items[: n - 1], _j(marked)]) + self.tail

    def headers(self) -> dict[str, str]:
        return {
            "x-api-key": "sk-ant-bench",
            "anthropic-version": "2023-06-01",
            "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
            "content-type": "application/json",
            "user-agent": "claude-cli/2.0.14 (external, cli)",
            "x-app": "cli",
        }


class Codex(HostSession):
    api = "responses"

    def __init__(self, key: str, number: int, turns: int) -> None:
        super().__init__(key, number, turns)
        instructions, tools, permissions = _codex_static()
        self.cache_key = str(uuid.uuid5(uuid.NAMESPACE_URL, key))
        head_items = [
            {
                "type": "message",
                "role": "developer",
                "content": [
                    {
                        "type": "input_text",
                        "text": "<permissions instructions>\nFilesystem sandboxing: workspace-write.\n"
                        + permissions
                        + "\n</permissions instructions>",
                    }
                ],
            },
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": f"<environment_context>\n  <cwd>/home/dev/proj{number % 7}</cwd>\n  <shell>bash</shell>\n</environment_context>",
                    }
                ],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": self.task}]},
        ]
        self.head = b'{"model":"gpt-5-codex","instructions":' + instructions + b',"input":['
        self.tail = (
            b'],"tools":' + tools + b',"tool_choice":"auto","parallel_tool_calls":false,'
            b'"reasoning":{"effort":"medium","summary":"auto"},"store":false,"stream":true,'
            b'"include":["reasoning.encrypted_content"],"prompt_cache_key":'
            + _j(self.cache_key)
            + b',"text":{"verbosity":"low"}}'
        )
        self.items = [_j(i) for i in head_items]
        self.ends = [len(self.items)]
        for i, s in enumerate(self.steps):
            cid = f"call_{uuid.uuid5(uuid.NAMESPACE_OID, f'{key}/{i}').hex[:24]}"
            reasoning = {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": f"**{s.thought}**"}],
                "content": None,
                "encrypted_content": "gAAAAAB" + _signature(self.rng, 1100),
            }
            if s.kind == "edit":
                patch = (
                    f"*** Begin Patch\n*** Update File: {s.path}\n@@\n"
                    + "\n".join("-" + x for x in s.old.splitlines())
                    + "\n"
                    + "\n".join("+" + x for x in s.new.splitlines())
                    + "\n*** End Patch\n"
                )
                call = {
                    "type": "custom_tool_call",
                    "status": "completed",
                    "call_id": cid,
                    "name": "apply_patch",
                    "input": patch,
                }
                output = {
                    "type": "custom_tool_call_output",
                    "call_id": cid,
                    "output": f"Success. Updated the following files:\nM {s.path}\n",
                }
            else:
                args = {
                    "command": ["bash", "-lc", s.command],
                    "workdir": f"/home/dev/proj{number % 7}",
                    "timeout_ms": 120000,
                }
                call = {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": json.dumps(args),
                    "call_id": cid,
                }
                text = json.dumps(
                    {
                        "output": s.output,
                        "metadata": {"exit_code": 1 if s.is_error else 0, "duration_seconds": 0.4},
                    }
                )
                output = {"type": "function_call_output", "call_id": cid, "output": text}
            self.items += [_j(reasoning), _j(call), _j(output)]
            self.ends.append(len(self.items))

    def body(self, call: int) -> bytes:
        return self.head + b",".join(self.items[: self.ends[call]]) + self.tail

    def headers(self) -> dict[str, str]:
        return {
            "authorization": "Bearer sk-bench",
            "content-type": "application/json",
            "accept": "text/event-stream",
            "originator": "codex_cli_rs",
            "user-agent": "codex_cli_rs/0.46.0 (Ubuntu 24.4.0; x86_64) xterm-256color",
            "session_id": self.cache_key,
        }


class OpenClaw(HostSession):
    api = "chat"

    def __init__(self, key: str, number: int, turns: int) -> None:
        super().__init__(key, number, turns)
        system, tools = _openclaw_static()
        self.head = b'{"model":"deepseek-chat","messages":['
        self.tail = (
            b'],"stream":true,"stream_options":{"include_usage":true},"tools":'
            + tools
            + b',"tool_choice":"auto","max_tokens":8192}'
        )
        self.items = [system, _j({"role": "user", "content": self.task})]
        for i, s in enumerate(self.steps):
            cid = f"call_{uuid.uuid5(uuid.NAMESPACE_OID, f'{key}/{i}').hex[:24]}"
            if s.kind == "edit":
                fn = {
                    "name": "edit",
                    "arguments": json.dumps({"path": s.path, "oldText": s.old, "newText": s.new}),
                }
            elif s.kind == "file_view":
                fn = {"name": "read", "arguments": json.dumps({"path": s.path})}
            else:
                fn = {"name": "exec", "arguments": json.dumps({"command": s.command})}
            assistant = {
                "role": "assistant",
                "content": s.thought,
                "tool_calls": [{"id": cid, "type": "function", "function": fn}],
            }
            self.items += [_j(assistant), _j({"role": "tool", "tool_call_id": cid, "content": s.output})]

    def body(self, call: int) -> bytes:
        return self.head + b",".join(self.items[: 2 + 2 * call]) + self.tail

    def headers(self) -> dict[str, str]:
        return {
            "authorization": "Bearer sk-bench",
            "content-type": "application/json",
            "user-agent": "OpenAI/JS 5.12.2",
        }


HOSTS: dict[str, type[HostSession]] = {"anthropic": ClaudeCode, "responses": Codex, "chat": OpenClaw}


# -- the fake provider -------------------------------------------------------------------------------

REPLY = Reply(
    text="The failure comes from the parser change; let me run the focused test again to confirm it.",
    tool_calls=[("Bash", json.dumps({"command": "python -m pytest -q tests/test_api.py -x"}))],
    chunk=12,
)
PREBUILD = 600  # sessions built before a run's clock starts (more are built as needed)
BLOCK = 4096  # prefix-cache granularity of the fake, in bytes


class FakeProvider:
    """ASGI app: every streamed call is answered after the delay, in ``bursts`` writes ``gap_s`` apart."""

    def __init__(self, delay_ms: float, bursts: int, gap_ms: float, convs: int = 2000) -> None:
        import xxhash

        self.delay_s = delay_ms / 1000
        self.bursts = bursts
        self.gap_s = gap_ms / 1000
        self.hash = xxhash.xxh3_64_intdigest
        self.prefixes: OrderedDict[bytes, list[int]] = OrderedDict()  # conv -> hashes of its 4 KB blocks
        self.convs = convs
        self.calls = 0

    def usage(self, conv: bytes, body: bytes) -> tuple[int, int]:
        """(prompt tokens, cached tokens): one token per 4 bytes, cached up to the first changed 4 KB block."""
        blocks = [self.hash(body[i : i + BLOCK]) for i in range(0, len(body) - BLOCK + 1, BLOCK)]
        seen = self.prefixes.pop(conv, [])
        same = 0
        for a, b in zip(blocks, seen, strict=False):
            if a != b:
                break
            same += 1
        self.prefixes[conv] = blocks
        while len(self.prefixes) > self.convs:
            self.prefixes.popitem(last=False)
        return len(body) // 4, same * BLOCK // 4

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
    ) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        path = scope["path"]
        if scope["method"] == "GET":
            await _json(send, 200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
            return
        chunks = []
        more = True
        while more:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            more = msg.get("more_body", False)
        body = b"".join(chunks)
        api = next((a for a, p in PATHS.items() if path.endswith(p)), None)
        if api is None:
            await _json(send, 404, {"error": {"message": f"no route {path}"}})
            return
        headers = dict(scope["headers"])
        delay = (
            float(headers[DELAY_HEADER.encode()]) / 1000 if DELAY_HEADER.encode() in headers else self.delay_s
        )
        self.calls += 1
        prompt, cached = self.usage(headers.get(CONV_HEADER.encode(), b""), body)
        usage: dict[str, Any]
        if api == "anthropic":
            usage = {
                "input_tokens": prompt - cached,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": cached,
                "output_tokens": 40,
            }
        elif api == "chat":
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": 40,
                "total_tokens": prompt + 40,
                "prompt_tokens_details": {"cached_tokens": cached},
            }
        else:
            usage = {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": 40,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + 40,
            }
        events = STREAM[api](
            REPLY, usage, self.calls, {"model": "fake-model", "stream_options": {"include_usage": True}}
        )
        if delay:
            await asyncio.sleep(delay)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
            }
        )
        size = -(-len(events) // self.bursts)
        for i in range(0, len(events), size):
            if i and self.gap_s:
                await asyncio.sleep(self.gap_s)
            await send(
                {"type": "http.response.body", "body": b"".join(events[i : i + size]), "more_body": True}
            )
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _json(send: Callable[..., Any], status: int, value: Any) -> None:
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": json.dumps(value).encode()})


def run_fake(port: int, delay_ms: float, bursts: int, gap_ms: float) -> None:
    import uvicorn

    uvicorn.run(
        FakeProvider(delay_ms, bursts, gap_ms),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_keep_alive=300,
        backlog=4096,
    )


# -- the load driver ---------------------------------------------------------------------------------


@dataclass
class Run:
    """What one driver run measured."""

    ttfb_ms: list[float] = field(default_factory=list)
    total_ms: list[float] = field(default_factory=list)
    body_kb: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    watched_cpu_s: dict[str, float] = field(default_factory=dict)  # pid -> CPU seconds in the window
    machine_busy_s: float = 0.0  # CPU seconds all processes of the machine used in the window
    machine_iowait_s: float = 0.0
    sessions: int = 0

    def as_json(self) -> dict[str, Any]:
        return self.__dict__


def pct(values: list[float], q: float) -> float:
    data = sorted(values)
    return data[min(len(data) - 1, round(q * (len(data) - 1)))] if data else float("nan")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def drive(
    api: str,
    base: str,
    clients: int,
    calls: int,
    turns: int,
    tag: str,
    delay_ms: float | None = None,
    rss_pid: int | None = None,
    rss_every: int = 0,
    timeout_s: float = 120.0,
    watch: tuple[int, ...] = (),
) -> Run:
    """``calls`` streamed calls from ``clients`` concurrent host sessions (``api`` "mixed": client i
    speaks ``APIS[i % 3]``).

    Client i joins its first session at call ``i * 11 % turns``, then runs whole sessions: with
    ``calls`` a multiple of ``clients * turns`` every call number of a session is sent equally often,
    so the load is a steady population of sessions of every length, not one biased to short
    conversations. The call before the one it joins at is sent before the clock starts (untimed):
    the session is then under way, as it is for a proxy that has been serving the host all along."""
    import aiohttp

    out = Run()
    numbers = itertools.count()
    kinds = [APIS[i % 3] if api == "mixed" else api for i in range(clients)]
    pools: dict[str, deque[HostSession]] = {k: deque() for k in set(kinds)}

    def new_session(kind: str) -> HostSession:
        number = next(numbers)
        session = HOSTS[kind](f"{tag}/{kind}/{number}", number, turns)
        session.steps = []  # the serialized messages hold them now
        return session

    # sessions are built before the clock starts (a few ms each, on the driver's one thread, would
    # delay every call in flight): one for each client to join, and the ones it runs whole after it
    for kind in kinds[: min(clients, PREBUILD)]:
        pools[kind].append(new_session(kind))
    for n in range(min(calls // turns + clients, PREBUILD)):
        pools[kinds[n % clients]].append(new_session(kinds[n % clients]))
    budget = [calls]
    done = [0]
    if rss_pid and rss_every:
        out.rss_mb.append(rss_mb(rss_pid))
    connector = aiohttp.TCPConnector(limit=clients + 8, force_close=False, keepalive_timeout=300)
    timeout = aiohttp.ClientTimeout(total=timeout_s)

    def request(session: HostSession, call: int) -> tuple[bytes, dict[str, str]]:
        headers = {**session.headers(), CONV_HEADER: session.key}
        if delay_ms is not None:
            headers[DELAY_HEADER] = str(delay_ms)
        return session.body(call), headers

    firsts = [
        (
            pools[kinds[i]].popleft() if pools[kinds[i]] else new_session(kinds[i]),
            (i * 11) % turns if clients > 1 else 0,
        )
        for i in range(clients)
    ]

    async def join(i: int, http: aiohttp.ClientSession) -> None:
        """Before the clock: the call before the one client i starts at, so the session is under way
        (what a proxy sees once when it starts under a running host is not what it sees every call)."""
        session, start = firsts[i]
        if start:
            body, headers = request(session, start - 1)
            await one(
                http,
                session.api,
                base + PATHS[session.api],
                body,
                headers,
                f"{session.key}#{start - 1}",
                False,
            )

    async def client(i: int, http: aiohttp.ClientSession) -> None:
        kind = kinds[i]
        session, start = firsts[i]
        while budget[0] > 0:
            out.sessions += 1
            for call in range(start, turns):
                if budget[0] <= 0:
                    return
                budget[0] -= 1
                body, headers = request(session, call)
                await one(http, kind, base + PATHS[kind], body, headers, f"{session.key}#{call}")
                done[0] += 1
                if rss_pid and rss_every and done[0] % rss_every == 0:
                    out.rss_mb.append(rss_mb(rss_pid))
            session, start = pools[kind].popleft() if pools[kind] else new_session(kind), 0

    async def one(
        http: aiohttp.ClientSession,
        kind: str,
        url: str,
        body: bytes,
        headers: dict[str, str],
        name: str,
        timed: bool = True,
    ) -> None:
        start = time.perf_counter()
        first: float | None = None
        tail = b""
        try:
            async with http.post(url, data=body, headers=headers) as r:
                async for chunk in r.content.iter_any():
                    if first is None:
                        first = time.perf_counter()
                    tail = (tail + chunk)[-4096:]
                status = r.status
        except (aiohttp.ClientError, TimeoutError) as err:
            out.errors.append(f"{name}: {type(err).__name__}: {err}")
            return
        end = time.perf_counter()
        if status != 200 or END_MARK[kind] not in tail or first is None:
            out.errors.append(f"{name}: status {status}, ends {tail[-120:]!r}")
            return
        if not timed:
            return
        out.ttfb_ms.append((first - start) * 1000)
        out.total_ms.append((end - start) * 1000)
        out.body_kb.append(len(body) / 1024)

    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, auto_decompress=False, skip_auto_headers=("User-Agent",)
    ) as http:
        await asyncio.gather(*(join(i, http) for i in range(clients)))
        machine0, watched0 = machine_cpu(), {pid: cpu_seconds(pid) for pid in watch}
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(client(i, http) for i in range(clients)))
        out.wall_s, out.cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
        machine1 = machine_cpu()
        out.watched_cpu_s = {str(pid): cpu_seconds(pid) - watched0[pid] for pid in watch}
        out.machine_busy_s, out.machine_iowait_s = machine1[0] - machine0[0], machine1[1] - machine0[1]
    return out


# -- other processes, by PID -------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds ``pid`` has used so far (its threads included), from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "; utime, stime are fields 14, 15
    return (int(fields[11]) + int(fields[12])) / _TICK


def machine_cpu() -> tuple[float, float]:
    """(busy, iowait) CPU seconds of the whole machine so far, from /proc/stat."""
    user, nice, system, _idle, iowait, *rest = (
        int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + sum(rest)) / _TICK, iowait / _TICK


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MB (``VmRSS`` in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"bench: no VmRSS for pid {pid}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    fake = sub.add_parser("fake", help="serve the fake provider on 127.0.0.1:PORT until killed")
    fake.add_argument("port", type=int)
    fake.add_argument("--delay-ms", type=float, default=250.0, help="time to the first event of every call")
    fake.add_argument("--bursts", type=int, default=6, help="writes the events of one answer are spread over")
    fake.add_argument("--gap-ms", type=float, default=5.0, help="pause between two bursts")
    d = sub.add_parser("drive", help="run host sessions against URL and print what was measured (JSON)")
    d.add_argument("api", choices=(*APIS, "mixed"))
    d.add_argument("url", help="base URL (the proxy, or the fake itself)")
    d.add_argument("--clients", type=int, default=100)
    d.add_argument("--calls", type=int, default=3000)
    d.add_argument("--turns", type=int, default=30)
    d.add_argument("--tag", default="run", help="names the sessions (a new tag, new sessions)")
    d.add_argument("--delay-ms", type=float, help="ask the fake for this delay instead of its own")
    d.add_argument("--rss-pid", type=int, help="sample this process's RSS every --rss-every calls")
    d.add_argument("--rss-every", type=int, default=1000)
    d.add_argument("--watch", type=int, action="append", default=[], help="report this PID's CPU in the run")
    args = ap.parse_args(argv)
    if args.cmd == "fake":
        run_fake(args.port, args.delay_ms, args.bursts, args.gap_ms)
        return 0
    import uvloop  # the driver's own overhead, as low as it gets: it shares the machine with the proxy

    run = uvloop.run(
        drive(
            args.api,
            args.url.rstrip("/"),
            args.clients,
            args.calls,
            args.turns,
            args.tag,
            args.delay_ms,
            args.rss_pid,
            args.rss_every,
            watch=tuple(args.watch),
        )
    )
    json.dump(run.as_json(), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
