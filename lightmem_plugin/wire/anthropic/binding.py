"""Thinking blocks bound to their prefix: let the provider drop the ones lightmem2's changes invalidate.

Why (DESIGN section 6, "Preserved thinking"): on Claude models with preserved thinking (the Fable and
Mythos families, and Opus, Sonnet and Haiku from 5.5 on), a thinking block sent back in a later request
is checked against everything before it (``system``, ``tools``, the earlier messages): if any of it
changed since the block was produced, the API rejects the whole request with a 400 ("The block is bound
to a different conversation"), by default on accounts created from 31 August 2026. lightmem2 changes
what the model already saw by design (finished tasks paged out, outputs reduced again at a cold start,
a compaction before the host's), and a session it joins halfway sends outputs reduced that the host's
thinking was produced over: every such request would fail, and the host with it.

The API's own remedy is ``thinking.block_binding.prefix_mismatch_behavior: "drop_block"`` with the beta
header ``anthropic-beta: thinking-binding-controls-2026-08-01``: a block that fails the check is dropped
from that request (listed in the answer's ``input_transformations``), and a block that passes stays. So
on such a model every request lightmem2 sends carries both, from the session's first call on: the
parameter never changes within a session (no cache break of its own), and a block is dropped only where
the request would otherwise have failed. ``stabilizer.thinkingBinding`` chooses: ``auto`` (the models
above), ``always`` (any Anthropic request, for a model newer than this list), ``never``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

BETA = "thinking-binding-controls-2026-08-01"
"""The beta that lets a request choose what a failed prefix check does."""

DROP = {"prefix_mismatch_behavior": "drop_block"}

Setting = Literal["auto", "always", "never"]

_FAMILY = re.compile(r"^claude-(fable|mythos)-\d")
_VERSIONED = re.compile(r"^claude-(?:opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?:-|$)")
FIRST_BOUND = (5, 5)
"""The first Opus, Sonnet and Haiku version whose thinking blocks are bound to their prefix."""


def binds_thinking(model: str) -> bool:
    """Whether ``model`` checks each thinking block sent back against its prefix (preserved thinking).
    A dated or suffixed id counts as its model (``claude-sonnet-5-5-20261001``); a provider prefix
    (``anthropic/``) is ignored."""
    name = model.rsplit("/", 1)[-1].lower()
    if _FAMILY.match(name):
        return True
    m = _VERSIONED.match(name)
    if m is None:
        return False
    return (int(m.group(1)), int(m.group(2) or 0)) >= FIRST_BOUND


def wanted(setting: Setting, model: object) -> bool:
    """Whether a request to ``model`` should let the provider drop invalid thinking blocks."""
    if setting == "never":
        return False
    return setting == "always" or (isinstance(model, str) and binds_thinking(model))


def allow_drop(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` (an Anthropic Messages request) asking the API to drop, not reject, a thinking block
    whose prefix changed. A request without ``thinking`` gets the adaptive thinking these models use
    by default (so nothing else changes); one that turned thinking off is left as it is."""
    thinking = payload.get("thinking")
    if thinking is None:
        new: dict[str, Any] = {"type": "adaptive", "block_binding": dict(DROP)}
    elif isinstance(thinking, dict) and thinking.get("type") != "disabled":
        binding = thinking.get("block_binding")
        merged = {**binding, **DROP} if isinstance(binding, dict) else dict(DROP)
        new = {**thinking, "block_binding": merged}
    else:
        return payload
    return {**payload, "thinking": new}
