"""Synthetic agent conversations in OpenAI chat form, for the reliability tests.

A conversation is append-only, like a real host's: each call sends the previous call's messages plus
one assistant tool call and its tool output. Outputs are build logs long enough to be reduced (and so
archived), unique per (session, turn) so no two sessions share an artifact by accident.
"""

from __future__ import annotations

import json
from typing import Any

Msg = dict[str, Any]


def tool_output(session: str, turn: int, lines: int = 120, extra: str = "") -> str:
    """A build log of about 60 chars per line, with an error in the middle and a summary at the end."""
    out = [
        f"[{session}] step {turn}: compiling module_{turn}_{i}.py ... ok (0.{i:03d}s)" for i in range(lines)
    ]
    out[lines // 2] = f"[{session}] ERROR module_{turn}.py:42: NameError: name 'x{turn}' is not defined"
    if extra:
        out.insert(lines // 3, extra)
    out.append(f"[{session}] {lines - 1} passed, 1 failed in {turn}.5s")
    return "\n".join(out)


def head(session: str) -> list[Msg]:
    """System prompt and first user message of a session."""
    return [
        {"role": "system", "content": f"You are a coding agent. Session {session}. Work in /home/dev/proj."},
        {"role": "user", "content": f"Fix the failing build of project {session}."},
    ]


def turn(session: str, i: int, output: str | None = None) -> list[Msg]:
    """One assistant tool call and its output."""
    call_id = f"call_{session}_{i}"
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"cmd": f"make step{i}"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": output or tool_output(session, i)},
    ]


def calls(session: str, n: int, outputs: list[str] | None = None) -> list[list[Msg]]:
    """The message lists of ``n`` successive calls (each one extends the previous)."""
    msgs = head(session)
    out: list[list[Msg]] = []
    for i in range(n):
        msgs = msgs + turn(session, i, outputs[i] if outputs and i < len(outputs) else None)
        out.append(list(msgs))
    return out
