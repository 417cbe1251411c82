"""A scripted chat on the Gateway, shared by the OpenClaw tests that compare runs request by request.

:func:`chat_turns` sends each turn's goal with ``chat.send``, queues the turn's scripted replies at the
fake provider first, waits until the provider received them and the transcript ends with the turn's
answer, and returns the request bodies the provider received (a byte-identical retry dropped).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fake_wire import Reply
from test_e2e_openclaw_gateway import Gateway, wait_for
from test_e2e_openclaw_gateway_tools import _replies

Turn = tuple[str, list[Any]]
"""A goal and its steps: ``(tool, arguments)`` for a tool call, a string for the answer."""


def chat_turns(
    gateway: Gateway,
    turns: list[Turn],
    key: str,
    pause_before: dict[int, float] | None = None,
    reply: Callable[[Reply], Reply] = lambda r: r,
    agent: Callable[[dict[str, Any]], bool] = lambda body: True,
) -> list[dict[str, Any]]:
    """Every turn through ``chat.send`` (turn ``n`` after ``pause_before[n]`` seconds of silence);
    ``reply`` rewrites each scripted reply (e.g. to add thinking); ``agent`` tells the agent's own
    requests from the host's others (a summarising call), which are left out. The request bodies
    received."""
    env = gateway.env

    def calls() -> list[Any]:
        return [r for r in env.fake.received if isinstance(r.body, dict) and agent(r.body)]

    expected = 0
    for n, (text, steps) in enumerate(turns):
        if pause_before and n in pause_before:
            time.sleep(pause_before[n])
        env.fake.queue(*map(reply, _replies(steps)))
        expected += len(steps)
        ack = gateway.call(
            "chat.send", {"sessionKey": "agent:main:main", "message": text, "idempotencyKey": f"{key}-{n}"}
        )
        assert ack.get("status") in ("started", "ok", "completed"), ack
        wait_for(lambda c=expected: len(calls()) >= c, 180, f"the model calls of {text!r}")
        wait_for(lambda a=steps[-1]: last_answer(gateway) == a, 120, f"the answer to {text!r}")
    received = without_retries(calls())
    assert len(received) == expected, _extra(received, expected)
    return [r.body for r in received]


def history(gateway: Gateway) -> list[dict[str, Any]]:
    """The main session's transcript as ``chat.history`` shows it."""
    messages: list[dict[str, Any]] = gateway.call("chat.history", {"sessionKey": "agent:main:main"})[
        "messages"
    ]
    return messages


def is_compaction(message: dict[str, Any]) -> bool:
    """OpenClaw's compaction entry in ``chat.history`` (a system message "Compaction" with
    ``__openclaw.kind`` "compaction", ``tokensBefore`` and ``tokensAfter``; seen on 2026.9.6)."""
    return (message.get("__openclaw") or {}).get("kind") == "compaction"


def last_answer(gateway: Gateway) -> str | None:
    """The text of the transcript's last message when it is the assistant's (a compaction entry after
    it aside: OpenClaw compacts after a turn's last reply), else None."""
    msgs = [m for m in history(gateway) if not is_compaction(m)]
    final = msgs[-1] if msgs else {}
    return _text(final.get("content")) if final.get("role") == "assistant" else None


def without_retries(received: list[Any]) -> list[Any]:
    """The requests, a byte-identical repeat of the one before dropped (the host retrying a call
    is not a call of the session; seen once in CI: 24 requests for 23 scripted calls, not
    reproduced on an idle machine)."""
    return [r for n, r in enumerate(received) if n == 0 or r.raw != received[n - 1].raw]


def _extra(received: list[Any], expected: int) -> str:
    """What each request's last message said, for the failure message."""
    said = []
    for n, r in enumerate(received):
        msgs = r.body.get("messages") or [{}]
        m = msgs[-1]
        kinds = [b.get("type") for b in m.get("content")] if isinstance(m.get("content"), list) else "text"
        said.append(
            f"{n + 1}: {len(msgs)} messages, last {m.get('role')} {kinds} {_text(m.get('content'))[:120]!r}"
        )
    return f"{len(received)} requests for {expected} scripted calls:\n" + "\n".join(said)


def _text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])
