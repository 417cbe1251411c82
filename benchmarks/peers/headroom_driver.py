"""Drive Headroom's real proxy in-process and capture the request it would send to the provider.

Runs INSIDE Headroom's own virtual environment (``benchmarks/.peer-venv-headroom``), never in ours: it
imports only the standard library, Headroom and what Headroom itself depends on (FastAPI's
TestClient). ``headroom.py`` starts it as a subprocess and talks to it in JSON lines:

- first, on stdout: ``{"ready": true, "version": ..., "settings": {...}, "changes": [...]}``
- then per line on stdin, either ``{"op": "call", "session", "api", "body", "reply", "usage"}``: the
  request ``body`` is POSTed to the proxy's ``/v1/messages`` (``api`` "anthropic") or
  ``/v1/chat/completions`` (``api`` "chat") as the agent's client would send it; the line written
  back is ``{"status", "sent", "upstream_calls", "ms", "error"}`` where ``sent`` is the body the proxy
  forwarded to the provider;
- or ``{"op": "lookup", "key"}``: ``{"text"}``, the original Headroom's compression store holds under
  ``key`` (what its ``headroom_retrieve`` tool would return), or null.

Why a fake upstream: the proxy is built as ``headroom proxy`` builds it (``create_app`` on the config
``create_app_from_env`` reads, the savings profile's defaults seeded first) and forwards over HTTP to
``ANTHROPIC_TARGET_API_URL`` / ``OPENAI_TARGET_API_URL``, which point at a capturing server on
127.0.0.1. It records each body and answers with the session's recorded answer and recorded usage
(Headroom's prefix freeze reads the provider's cached-token counts). Stdout is reserved for the
protocol: everything Headroom logs or prints goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# run with -I, so its own folder is not on the path; it goes last, after site-packages, because first
# benchmarks/peers/headroom.py would shadow the real package
sys.path.append(str(Path(__file__).resolve().parent))
from peer_vocab import provide_vocab

PROFILES = {"default": None, "agent90": "agent-90"}
"""Variant -> the ``HEADROOM_SAVINGS_PROFILE`` it runs (None: unset, Headroom's own default)."""


class Upstream:
    """The capturing provider: every body it was sent, and the answer to give next."""

    def __init__(self) -> None:
        self.reply: dict[str, Any] = {}
        self.usage: dict[str, Any] = {}
        self.sent: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.sent.append(body)
        reply, usage, model = self.reply, self.usage, body.get("model")
        calls = reply.get("tool_calls") or []
        if path.endswith("/chat/completions"):
            message = {"role": "assistant", "content": reply.get("content") or ""}
            if calls:
                message["tool_calls"] = calls
            finish = "tool_calls" if calls else "stop"
            return {
                "id": "chatcmpl-replay",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        blocks: list[dict[str, Any]] = []
        text = reply.get("content")
        if isinstance(text, list):
            text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        if text:
            blocks.append({"type": "text", "text": text})
        for call in calls:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.get("id", ""),
                    "name": function.get("name", ""),
                    "input": arguments,
                }
            )
        return {
            "id": "msg_replay",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks or [{"type": "text", "text": ""}],
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }


def serve_upstream(upstream: Upstream) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(size) or b"{}")
            data = json.dumps(upstream.answer(self.path, body)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def configure_env(variant: str, upstream_url: str, home: str) -> list[str]:
    """Only the variant's profile and what offline replay needs; returns the changes it made."""
    for name in [n for n in os.environ if n.startswith("HEADROOM_")]:
        del os.environ[name]
    profile = PROFILES[variant]
    if profile:
        os.environ["HEADROOM_SAVINGS_PROFILE"] = profile
    os.environ["HOME"] = home  # its settings, stores and logs in a fresh directory, no user config
    os.environ["ANTHROPIC_TARGET_API_URL"] = upstream_url
    os.environ["OPENAI_TARGET_API_URL"] = upstream_url + "/v1"
    os.environ["HEADROOM_OFFLINE"] = "1"
    os.environ["HEADROOM_TELEMETRY"] = "off"
    os.environ["DO_NOT_TRACK"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HEADROOM_DISABLE_KOMPRESS"] = "1"
    os.environ["HEADROOM_HTTP2"] = "0"  # the fake upstream speaks HTTP/1.1
    return [
        "HEADROOM_OFFLINE=1 (its air-gap switch: no telemetry, update check, model or tokenizer download), "
        "HEADROOM_TELEMETRY=off, DO_NOT_TRACK=1, HF_HUB_OFFLINE=1",
        "Kompress off (HEADROOM_DISABLE_KOMPRESS=1): its ML text compressor needs the "
        "chopratejas/kompress-v2-base ONNX model from Hugging Face, which no PyPI package holds; offline it "
        "would pass that text through anyway, after retrying the download in the background",
        "rate limiter off (its --no-rate-limit): 60 requests/min per address blocks replay",
        "the provider is a capturing server on 127.0.0.1 (ANTHROPIC_TARGET_API_URL / OPENAI_TARGET_API_URL, "
        "HTTP/1.1) that answers with the recorded answer and the recorded usage",
        "each recorded session is one Headroom session (its x-headroom-session-id header); requests are "
        "sent unstreamed",
        "HOME is a fresh temporary directory (no user settings, its stores start empty)",
    ]


def _protocol_stream() -> Any:
    """A private handle on the real stdout; fd 1 and sys.stdout then point at stderr."""
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto


def lookup(key: str) -> str | None:
    """What Headroom's compression store holds under ``key`` (as its retrieve tool reads it), read
    without recording an access: a retrieval would teach its feedback loop, which replay must not."""
    from headroom.cache.compression_store import get_compression_store

    store = get_compression_store()
    entry = store._backend.get(key)
    if entry is None or entry.is_expired():
        return None
    text: str = entry.original_content
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", choices=sorted(PROFILES), default="default")
    ap.add_argument("--vocab-cache", required=True)
    args = ap.parse_args()
    proto = _protocol_stream()
    upstream = Upstream()
    server = serve_upstream(upstream)
    work = tempfile.mkdtemp(prefix="headroom-replay-")
    os.chdir(work)
    changes = configure_env(args.variant, f"http://127.0.0.1:{server.server_port}", work)
    vocab = provide_vocab(Path(args.vocab_cache), "Headroom's Anthropic path fails to count tokens")
    changes.append(f"tiktoken vocabulary: {vocab}")

    import headroom
    from fastapi.testclient import TestClient
    from headroom.agent_savings import get_agent_savings_profile, seed_proxy_env_defaults
    from headroom.proxy import server as proxy_server

    seeded = seed_proxy_env_defaults()  # what `headroom proxy` / create_app_from_env do first
    config = proxy_server._proxy_config_from_env()
    config.profile_seeded_env_keys = frozenset(set(config.profile_seeded_env_keys) | set(seeded))
    config.rate_limit_enabled = False
    app = proxy_server.create_app(config)
    profile = get_agent_savings_profile(config.savings_profile)
    settings = {
        "savings_profile": config.savings_profile,
        "mode": config.mode,
        "target_ratio": profile.target_ratio,
        "protect_recent": profile.protect_recent,
        "min_tokens_to_compress": profile.min_tokens_to_compress,
        "max_items_after_crush": profile.max_items_after_crush,
        "compress_user_messages": profile.compress_user_messages,
        "compress_system_messages": profile.compress_system_messages,
        "cross_turn_dedup": os.environ.get("HEADROOM_DEDUPE"),
        "protect_reads": os.environ.get("HEADROOM_PROTECT_READS"),
        "lossless_then_lossy": os.environ.get("HEADROOM_LOSSLESS_THEN_LOSSY"),
        "tool_search": os.environ.get("HEADROOM_TOOL_SEARCH"),
        "ccr_inject_tool": config.ccr_inject_tool,
        "prefix_freeze": config.prefix_freeze_enabled,
        "force_kompress": f"{profile.force_kompress} (Kompress off)",
        "kompress": not config.disable_kompress,
        "tokenizer_vocab": vocab,
    }
    with TestClient(app) as client:
        hello = {"ready": True, "version": headroom.__version__, "settings": settings, "changes": changes}
        proto.write(json.dumps(hello) + "\n")
        proto.flush()
        for line in sys.stdin:
            if not line.strip():
                continue
            request = json.loads(line)
            if request["op"] == "lookup":
                proto.write(json.dumps({"text": lookup(request["key"])}) + "\n")
                proto.flush()
                continue
            upstream.reply, upstream.usage, upstream.sent = request["reply"], request["usage"], []
            anthropic = request["api"] == "anthropic"
            headers = {"x-headroom-session-id": request["session"]}
            if anthropic:
                headers |= {"x-api-key": "sk-ant-replay", "anthropic-version": "2023-06-01"}
            else:
                headers["authorization"] = "Bearer sk-replay"
            t0 = time.perf_counter()
            path = "/v1/messages" if anthropic else "/v1/chat/completions"
            resp = client.post(path, json=request["body"], headers=headers)
            ms = (time.perf_counter() - t0) * 1000
            ok = resp.status_code == 200
            out = {
                "status": resp.status_code,
                "sent": upstream.sent[-1] if upstream.sent else None,
                "upstream_calls": len(upstream.sent),
                "ms": round(ms, 3),
                "error": None if ok else resp.text[:500],
            }
            proto.write(json.dumps(out) + "\n")
            proto.flush()
    server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
