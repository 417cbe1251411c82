"""Chat history pieces the tests build sessions from (importable: ``tests/`` is on the path)."""

from __future__ import annotations

import json


def bash_turn(cid: str, command: str, output: str) -> list[dict[str, object]]:
    """One assistant ``bash`` call running ``command`` and its result ``output``, in chat form."""
    call = {
        "id": cid,
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": cid, "content": output},
    ]
