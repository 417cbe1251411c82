"""The binding fake (:class:`e2e_support.BindingUpstream`) rejects what the API rejects: a thinking block
sent back after a prefix other than the one it was produced over (400 "The block is bound to a
different conversation"), and drops it instead when the request asks for ``drop_block``; a block sent
back over its own prefix passes. Without this, the OpenClaw preserved-thinking test could not fail."""

from __future__ import annotations

from typing import Any

import httpx
from e2e_support import BOUND, BindingUpstream
from fake_wire import Reply
from server_harness import ServerThread

SYSTEM = "You are a test agent."


def _ask(client: httpx.Client, messages: list[dict[str, Any]], **extra: Any) -> httpx.Response:
    body = {"model": "claude-opus-5-5", "max_tokens": 64, "system": SYSTEM, "messages": messages, **extra}
    return client.post("/v1/messages", json=body)


def test_the_binding_fake_rejects_a_block_over_a_changed_prefix() -> None:
    fake = BindingUpstream()
    with ServerThread(fake.app) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        first = [{"role": "user", "content": "read the log"}]
        fake.queue(Reply("Reading.", thinking="The log first."))
        answer = _ask(client, first).json()
        thought = answer["content"][0]
        assert thought["type"] == "thinking" and thought["signature"] == fake.signed[0][1]
        reply = {"role": "assistant", "content": answer["content"]}
        later = {"role": "user", "content": "go on"}
        assert _ask(client, [*first, reply, later]).status_code == 200  # its own prefix: passes
        assert fake.checked[1] == [thought["signature"]]
        changed = [{"role": "user", "content": "read the log (reduced)"}, reply, later]
        refused = _ask(client, changed)
        assert refused.status_code == 400 and BOUND in refused.text, refused.text
        assert fake.rejected == [(2, 1)]
        drop = {"thinking": {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}}
        assert _ask(client, changed, **drop).status_code == 200
        assert fake.dropped == [(3, 1)]
        without = {"role": "assistant", "content": [b for b in answer["content"] if b["type"] != "thinking"]}
        assert _ask(client, [changed[0], without, later]).status_code == 200  # no block, nothing bound
