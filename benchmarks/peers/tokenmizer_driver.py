"""Drive TokenMizer's real FastAPI proxy in-process and capture what it would send upstream.

Runs INSIDE TokenMizer's own virtual environment (``benchmarks/.peer-venv``), never in ours: it imports
only the standard library, TokenMizer and what TokenMizer itself depends on (starlette's TestClient).
``tokenmizer.py`` starts it as a subprocess and talks to it in JSON lines:

- first, on stdout: ``{"ready": true, "version": ..., "settings": {...}, "changes": [...]}``
- then per line on stdin ``{"session", "model", "prompt", "reply"}``: the prompt is POSTed to
  ``/v1/chat/completions`` as the agent's client would send it (the full history, the session id, a
  ``bash`` tool declared); the line written back is ``{"status", "messages", "upstream_calls", "ms",
  "answer"}`` where ``messages`` is the list TokenMizer's DeepSeek adapter handed to the provider SDK.

Why the SDK seam: the ``openai`` package is replaced by a tiny capturing module, so TokenMizer's own
adapter code (``DeepSeekProvider``) still runs and what we capture is exactly its wire payload; the
stub answers with the recorded assistant message (``reply``), so the proxy's bookkeeping sees the
same answers the real model gave. Stdout is reserved for the protocol: everything TokenMizer logs or
prints goes to stderr.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import os
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

# run with -I, so its own folder is not on the path; it goes last, after site-packages, because first
# benchmarks/peers/tokenmizer.py would shadow the real package
sys.path.append(str(Path(__file__).resolve().parent))
from peer_vocab import BASH_TOOL, provide_vocab


class Upstream:
    """The fake ``openai`` SDK's shared state: the reply to give and every message list it was sent."""

    def __init__(self) -> None:
        self.reply: dict[str, Any] = {}
        self.sent: list[list[dict[str, Any]]] = []

    def answer(self, **request: Any) -> Any:
        self.sent.append(json.loads(json.dumps(request["messages"])))
        reply = self.reply
        message = types.SimpleNamespace(
            content=reply.get("content") or "", tool_calls=reply.get("tool_calls")
        )
        usage = types.SimpleNamespace(prompt_tokens=0, completion_tokens=0)
        choice = types.SimpleNamespace(
            message=message, finish_reason="tool_calls" if message.tool_calls else "stop"
        )
        return types.SimpleNamespace(choices=[choice], usage=usage)


def install_fake_openai(upstream: Upstream) -> None:
    """Register a minimal ``openai`` module whose AsyncOpenAI client records instead of sending."""

    class Completions:
        async def create(self, **request: Any) -> Any:
            if request.get("stream"):
                raise RuntimeError("the replay driver never streams")
            return upstream.answer(**request)

    class AsyncOpenAI:
        def __init__(self, **_options: Any) -> None:
            self.chat = types.SimpleNamespace(completions=Completions())

    module = types.ModuleType("openai")
    module.__spec__ = importlib.machinery.ModuleSpec("openai", None)  # so its SDK check finds "openai"
    module.AsyncOpenAI = AsyncOpenAI  # type: ignore[attr-defined]
    sys.modules["openai"] = module


class AllowAll:
    """Stands in for TokenMizer's rate limiter (60 requests/min per address), which replay exceeds."""

    async def check(self, _client_id: str) -> tuple[bool, float]:
        return True, 0.0


def configure_env(stable_window: str) -> None:
    """Only the provider the traces used and, for the frozen-bridge row, the window mode; no stray config."""
    for name in [n for n in os.environ if n.startswith("TOKENMIZER_")]:
        del os.environ[name]
    os.environ["TOKENMIZER_PROVIDER"] = "deepseek"
    os.environ["TOKENMIZER_DEFAULT_MODEL"] = "deepseek-chat"
    if stable_window != "auto":
        os.environ["TOKENMIZER_MEMORY__STABLE_WINDOW"] = stable_window
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _protocol_stream() -> Any:
    """A private handle on the real stdout; fd 1 and sys.stdout then point at stderr."""
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--stable-window", choices=("auto", "on", "off"), default="auto")
    ap.add_argument("--vocab-cache", required=True)
    args = ap.parse_args()
    proto = _protocol_stream()
    vocab = provide_vocab(Path(args.vocab_cache), "TokenMizer falls back to a chars/4 token estimate")
    configure_env(args.stable_window)
    work = tempfile.mkdtemp(prefix="tokenmizer-replay-")
    os.chdir(work)  # its default storage_dir is ./checkpoints; no .env or tokenmizer.yaml here

    upstream = Upstream()
    install_fake_openai(upstream)
    import tokenmizer
    import tokenmizer.api.app as app_module
    from fastapi.testclient import TestClient

    app_module._rate_limiter = AllowAll()
    s = app_module.settings
    changes = [
        "rate limiter replaced by an allow-all stub (60 requests/min per address blocks replay)",
        "provider SDK (openai package) replaced by a capturing stub that answers with the recorded reply",
    ]
    if s.graph_checkpoint.use_llm_extraction:
        s.graph_checkpoint.use_llm_extraction = False
        changes.append("graph_checkpoint.use_llm_extraction turned off (needs a real model)")
    settings = {
        "provider": s.provider,
        "stable_window": s.memory.stable_window,
        "stable_window_effective": app_module._stable_window(),
        "max_tokens_before_summary": s.memory.max_tokens_before_summary,
        "recent_turns_verbatim": s.memory.recent_turns_verbatim,
        "max_tail_tokens": s.memory.max_tail_tokens,
        "tool_index_tokens": s.memory.tool_index_tokens,
        "compression": f"{s.compression.engine} ratio {s.compression.ratio}",
        "terse_output": f"{s.terse_output.enabled} {s.terse_output.level}/{s.terse_output.style}",
        "use_llm_extraction": s.graph_checkpoint.use_llm_extraction,
        "semantic_retrieval": app_module._SEMANTIC_RETRIEVAL,
        "tokenizer_vocab": vocab,
    }
    with TestClient(app_module.app) as client:
        hello = {"ready": True, "version": tokenmizer.__version__, "settings": settings, "changes": changes}
        proto.write(json.dumps(hello) + "\n")
        proto.flush()
        for line in sys.stdin:
            if not line.strip():
                continue
            call = json.loads(line)
            upstream.reply = call["reply"]
            upstream.sent = []
            body = {
                "model": call["model"],
                "messages": call["prompt"],
                "session_id": call["session"],
                "tools": [BASH_TOOL],
                "stream": False,
            }
            t0 = time.perf_counter()
            resp = client.post("/v1/chat/completions", json=body)
            ms = (time.perf_counter() - t0) * 1000
            ok = resp.status_code == 200
            out = {
                "status": resp.status_code,
                "messages": upstream.sent[-1] if upstream.sent else None,
                "upstream_calls": len(upstream.sent),
                "ms": round(ms, 3),
                "answer": resp.json()["choices"][0]["message"] if ok else None,
                "error": None if ok else resp.text[:500],
            }
            proto.write(json.dumps(out) + "\n")
            proto.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
