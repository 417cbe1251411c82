"""Builders for hand-written OpenAI chat-form sessions, shared by the eviction tests."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from lightmem_plugin.eviction.entries import of_chat
from lightmem_plugin.model import Message, TextPart, ToolCallPart, ToolResultPart

DATA = Path(__file__).parent / "data"
ASTROID = DATA / "deepseek_chat_dev__pylint-dev__astroid-1268.json.gz"
DJANGO = DATA / "deepseek_chat_test_1-100__django__django-11620.json.gz"


def load_trace(path: Path) -> dict[str, Any]:
    with gzip.open(path) as fh:
        data: dict[str, Any] = json.loads(fh.read())
    return data


class Session:
    """Appends messages the way a mini-swe-agent style host does (one bash call per assistant turn)."""

    def __init__(self, goal: str) -> None:
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a helpful coding agent."},
            {"role": "user", "content": goal},
        ]

    @property
    def turns(self) -> list[Message]:
        """The messages as the eviction package reads them (neutral, one turn each)."""
        return of_chat(self.messages)

    def call(self, command: str, output: str = "", rc: int = 0, text: str = "", tool: str = "bash") -> int:
        """An assistant turn with one tool call and its result; returns the assistant message index."""
        index = len(self.messages)
        call_id = f"call_{index}"
        args = json.dumps({"command": command}) if tool == "bash" else command
        self.messages.append(
            {
                "role": "assistant",
                "content": text,
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": tool, "arguments": args}}
                ],
            }
        )
        body = f"<returncode>{rc}</returncode>\n<output>\n{output}\n</output>" if tool == "bash" else output
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": body})
        return index

    def say(self, text: str, role: str = "assistant") -> int:
        self.messages.append({"role": role, "content": text})
        return len(self.messages) - 1


def module(name: str, n: int) -> str:
    """A Python module of ``n`` small functions whose text is unique to ``name`` (~40 chars a line)."""
    return "\n".join(f"def {name}_{i}(x):\n    return x * {i} + {len(name)}" for i in range(n))


CLIENT_PY = "\n".join(
    [
        "import requests",
        "",
        "",
        "class Client:",
        '    """HTTP client for the inventory API."""',
        "",
        "    def __init__(self, base_url: str, timeout: float = 10.0) -> None:",
        "        self.base_url = base_url.rstrip('/')",
        "        self.timeout = timeout",
        "",
        "    def fetch(self, path: str) -> dict:",
        "        response = requests.get(self.base_url + path, timeout=self.timeout)",
        "        response.raise_for_status()",
        "        return response.json()",
    ]
    * 3
)


def retry_session() -> tuple[Session, dict[str, int]]:
    """A realistic session with a superseded and a cancelled decision, fixes and an open error."""
    s = Session("Add a retry option to the HTTP client in client.py. Let's go with exponential backoff.")
    at: dict[str, int] = {}
    at["ls"] = s.call(
        "ls -la /repo", "client.py\ncli.py\ntests\nsetup.py\nREADME.md\n" * 8, text="Let me look."
    )
    at["cat_client"] = s.call("cd /repo && cat client.py", CLIENT_PY)
    at["grep"] = s.call(
        "cd /repo && grep -n 'def fetch' client.py", "11:    def fetch(self, path: str) -> dict:"
    )
    at["test_fail"] = s.call(
        "cd /repo && python -m pytest tests/ -q",
        "F..\n" + "E   AssertionError: expected 3 attempts, got 1\n" * 12 + "1 failed, 2 passed in 0.31s",
        rc=1,
        text="I will use requests for the retry adapter. Running the tests first.",
    )
    at["sed"] = s.call(
        "cd /repo && sed -i 's/import requests/import httpx/' client.py",
        "",
        text="I'll use httpx instead of requests because it has built-in transport retries.",
    )
    at["create"] = s.call(
        "cd /repo && cat > client_retry.py << 'EOF'\nimport httpx\n\n"
        + "def backoff(attempt: int) -> float:\n    return 0.1 * 2 ** attempt\n" * 6
        + "EOF",
        "",
    )
    at["test_pass"] = s.call("cd /repo && python -m pytest tests/ -q", "...\n3 passed in 0.29s")
    at["goal2"] = s.say("Also add a --retries flag to the CLI.", role="user")
    at["cat_cli"] = s.call(
        "cd /repo && cat cli.py",
        "import argparse\n\nfrom client import Client\n\n"
        + "parser.add_argument('--timeout', type=float)\n" * 15,
        text="We decided to add a global retry counter.",
    )
    at["sed_cli"] = s.call(
        "cd /repo && sed -i 's/--timeout/--retries/' cli.py",
        "",
        text="Never mind the global retry counter, let's not use global state.",
    )
    at["test_err"] = s.call(
        "cd /repo && python -m pytest tests/ -q",
        'Traceback (most recent call last):\n  File "cli.py", line 3\n'
        "ImportError: cannot import name 'fetch'",
        rc=1,
    )
    return s, at


# -- neutral-model messages (lightmem_plugin.model), for the goal and collapse tests ---------------
def text(role: str, body: str) -> Message:
    """A message of one text part."""
    return Message(role, [TextPart(body)])  # type: ignore[arg-type]


def call(cid: str, command: str) -> Message:
    """An assistant message with one bash tool call."""
    return Message("assistant", [ToolCallPart(cid, "bash", json.dumps({"command": command}))])


def result(cid: str, body: str) -> Message:
    """The tool message answering call ``cid``."""
    return Message("tool", [ToolResultPart(cid, [TextPart(body)])])
