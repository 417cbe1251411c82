"""The opt-in LLM estimator: asks any OpenAI-compatible ``/chat/completions`` endpoint for task updates.

Why it can never break a call: every failure (timeout, transport error, 5xx after the configured
retries, 4xx such as a bad key, a reply that is not JSON or breaks the schema) is caught here, counted
by reason in :attr:`LLMEstimator.fallbacks`, and answered by the heuristic estimator instead. The reply
is validated strictly (pydantic, unknown keys rejected) before anything reaches the registry, which
then applies its own lifecycle rules. The API key goes only into the ``Authorization`` header: it is
never logged, never in an error message, never in ``repr``.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

import httpx
from pydantic import ValidationError

from ..config import EstimatorConfig
from ..errors import EstimatorError
from ..model import Message
from .entries import tool_calls, turn_text
from .heuristic import HeuristicEstimator
from .lifecycle import TaskRegistry, TaskUpdate, TaskUpdateBatch

_log = logging.getLogger(__name__)
_CLIP = 300
SYSTEM_PROMPT = """You track the task chunks of an AI agent's session so finished work can be paged out.
A chunk is a contiguous range of messages (by index) serving one sub-goal. Reply with JSON only:
{"taskUpdates": [{"taskId": "t1", "lifecycle": "active|blocked|completed|evictable",
  "objective": "...", "turns": [first, last], "evidence": ["..."], "openQuestions": ["..."],
  "evictableReason": "..."}]}
Rules: send only changes ({"taskUpdates": []} if none). A new task needs objective and turns. Ranges are
inclusive and never overlap other tasks. "completed" needs evidence (what shows it is done).
"evictable" needs evidence, an evictableReason and no openQuestions, and only for a task that is already
completed: its outputs will not be needed again. Never mark the current task evictable.
Omit fields you do not change; evidence is added to what the task already has."""


class EstimatorFailure(EstimatorError):
    """An estimator call that failed; ``reason`` is the short key counted in ``fallbacks``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _clip(text: str, limit: int = _CLIP) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_turns(messages: Sequence[Message], start: int, limit: int) -> str:
    """A compact, deterministic rendering of messages ``start..`` (at most ``limit`` of them)."""
    first = max(start, len(messages) - limit)
    lines = [f"({first - start} earlier messages omitted)"] if first > start else []
    for index in range(first, len(messages)):
        msg = messages[index]
        role = msg.role
        text = turn_text(msg)
        if role == "tool":
            lines.append(f"[{index}] tool ({len(text)} chars): {_clip(text, 200)}")
            continue
        parts = [_clip(text)] if text.strip() else []
        for call in tool_calls(msg):
            parts.append(f"call {call.name}: {_clip(call.arguments)}")
        lines.append(f"[{index}] {role}: " + " | ".join(parts))
    return "\n".join(lines)


def render_chunks(registry: TaskRegistry) -> str:
    """The registry's chunks as compact JSON lines (id, lifecycle, turns, objective, open questions)."""
    rows = [
        json.dumps(
            {
                "taskId": c.id,
                "lifecycle": c.lifecycle,
                "turns": list(c.turns),
                "objective": c.objective,
                "openQuestions": list(c.open_questions[:3]),
            },
            ensure_ascii=False,
        )
        for c in registry.chunks
    ]
    return "\n".join(rows) or "(none yet)"


def parse_reply(body: Any) -> list[TaskUpdate]:
    """Task updates from a chat-completions response body; raises :class:`EstimatorFailure`."""
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise EstimatorFailure(
            "malformed_reply", "estimator reply has no choices[0].message.content"
        ) from None
    if not isinstance(content, str):
        raise EstimatorFailure("malformed_reply", "estimator reply content is not a string")
    try:
        json.loads(content)
    except ValueError as err:
        raise EstimatorFailure("malformed_json", f"estimator reply is not JSON: {err}") from None
    try:
        return list(TaskUpdateBatch.model_validate_json(content).task_updates)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise EstimatorFailure(
            "schema", f"estimator reply fails the schema at {loc}: {first['msg']}"
        ) from None


class LLMEstimator:
    """Same contract as :class:`HeuristicEstimator`, answered by a model; falls back on any failure."""

    def __init__(
        self,
        config: EstimatorConfig,
        *,
        fallback: HeuristicEstimator | None = None,
        transport: httpx.BaseTransport | None = None,
        max_messages: int = 60,
    ) -> None:
        self._config = config
        self.fallback = fallback or HeuristicEstimator()
        self.fallbacks: Counter[str] = Counter()
        self.successes = 0
        self.max_messages = max_messages
        self._seen = 0
        self._client = httpx.Client(timeout=config.timeoutS, transport=transport)

    def __repr__(self) -> str:
        return f"LLMEstimator(model={self._config.model!r}, successes={self.successes})"

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def estimate(self, messages: Sequence[Message], registry: TaskRegistry) -> list[TaskUpdate]:
        """Updates from the model, or from the heuristic if the model call fails in any way."""
        try:
            updates = self.ask(messages, registry)
        except EstimatorFailure as err:
            self.fallbacks[err.reason] += 1
            _log.warning("estimator fell back to the heuristic: %s", err)
            return self.fallback.estimate(messages, registry)
        except Exception as err:  # fail-open (DESIGN I5): e.g. httpx.InvalidURL from a bad base URL
            self.fallbacks["internal"] += 1
            _log.warning("estimator fell back to the heuristic after %s", type(err).__name__)
            return self.fallback.estimate(messages, registry)
        self.successes += 1
        self._seen = len(messages)
        return updates

    def request_body(self, messages: Sequence[Message], registry: TaskRegistry) -> dict[str, Any]:
        """The chat-completions request for the turns since the last successful run."""
        start = min(self._seen, len(messages))
        user = (
            f"Current task chunks:\n{render_chunks(registry)}\n\n"
            f"Messages {start}..{len(messages) - 1} (index, role, text):\n"
            f"{render_turns(messages, start, self.max_messages)}\n\n"
            f"The last message index is {len(messages) - 1}. Reply with the taskUpdates JSON."
        )
        return {
            "model": self._config.model,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
            "temperature": 0,
            "response_format": {"type": "json_object"},
        }

    def ask(self, messages: Sequence[Message], registry: TaskRegistry) -> list[TaskUpdate]:
        """One validated answer from the endpoint; raises :class:`EstimatorFailure`."""
        base, model = self._config.proxyBaseUrl, self._config.model
        if not base or not model:
            raise EstimatorFailure(
                "not_configured",
                "estimator.proxyBaseUrl and estimator.model must be set for the LLM estimator",
            )
        headers = {"Authorization": f"Bearer {self._config.proxyApiKey}"} if self._config.proxyApiKey else {}
        url = base.rstrip("/") + "/chat/completions"
        body = self.request_body(messages, registry)
        failure = EstimatorFailure("transport", "no attempt made")
        for _ in range(self._config.retries + 1):
            try:
                response = self._client.post(url, json=body, headers=headers)
            except httpx.TimeoutException:
                failure = EstimatorFailure("timeout", f"estimator timed out after {self._config.timeoutS}s")
                continue
            except httpx.HTTPError as err:
                failure = EstimatorFailure("transport", f"estimator unreachable: {type(err).__name__}")
                continue
            if response.status_code >= 500:
                failure = EstimatorFailure("http_5xx", f"estimator answered HTTP {response.status_code}")
                continue
            if response.status_code >= 400:
                code = response.status_code
                raise EstimatorFailure(f"http_{code}", f"estimator answered HTTP {code}; check key and model")
            try:
                payload = response.json()
            except ValueError:
                raise EstimatorFailure("malformed_reply", "estimator reply body is not JSON") from None
            return parse_reply(payload)
        raise failure
