"""``lightmem2 install codex [--uninstall] [--project DIR]``: wire lightmem2 into the Codex CLI.

What it edits (``$CODEX_HOME``, default ``~/.codex``, or ``DIR/.codex`` with ``--project``):

- ``config.toml``: ``model_provider = "lightmem2"`` and, in one marked block at the end, a
  ``[model_providers.lightmem2]`` on the Responses wire pointing at ``lightmem2 serve``, plus the
  recover tool as ``[mcp_servers.lightmem2]``;
- ``hooks.json``: the ``SessionStart`` and ``UserPromptSubmit`` hooks. Codex runs them once trusted:
  ``/hooks`` in the TUI, or ``--dangerously-bypass-hook-trust`` for ``codex exec``. No ``PostToolUse``
  hook (an older install's is removed): a replacement from that hook reaches the model as a failed
  result without the exit-code header, so tool outputs are reduced on the wire by the proxy.

The user's own upstream is kept: with a custom provider (``model_provider = "X"`` and its
``base_url``), lightmem2's provider goes to ``/u/X/v1`` on the proxy, which forwards to that URL
(``server.upstreams.named.X``), with X's credentials settings copied. With the built-in OpenAI
provider it goes to ``/v1`` and on to ``server.upstreams.openai``; auth is the API key saved by
``codex login --with-api-key`` when there is one, else ``$OPENAI_API_KEY`` (a ChatGPT sign-in
cannot be forwarded to the API). Every edit is backed up and undone by ``--uninstall``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

from ...config import load_config
from ...errors import UsageError
from ..shared import edits as _edits
from ..shared import hooks_json as _hooks_json
from ..shared import toml_text as tt
from ..shared import upstream as _upstream
from ..shared.serve_ctl import base_url

HOST = "codex"
PROVIDER = "lightmem2"
OUR_LINE = f'model_provider = "{PROVIDER}"'
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit")
COPIED_KEYS = ("env_key", "env_key_instructions", "http_headers", "env_http_headers", "query_params")


def codex_dir(project: str | None) -> Path:
    """``$CODEX_HOME`` (default ``~/.codex``) or ``DIR/.codex``."""
    if project is None:
        env = os.environ.get("CODEX_HOME")
        return Path(env).expanduser() if env else Path.home() / ".codex"
    root = Path(project).expanduser()
    if not root.is_dir():
        raise UsageError(f'--project "{project}" is not a directory; pass an existing project folder')
    return root.resolve() / ".codex"


def _parse(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"{path} is not valid TOML ({err}); fix it and rerun the install") from None


def _auth_items(folder: Path) -> dict[str, tt.Value]:
    """How Codex should authenticate to the proxy with the built-in OpenAI provider."""
    try:
        auth = json.loads((folder / "auth.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        auth = {}
    if isinstance(auth, dict) and auth.get("OPENAI_API_KEY"):
        return {"requires_openai_auth": True}
    return {"env_key": "OPENAI_API_KEY"}


def _provider(folder: Path, data: dict[str, Any], facts: dict[str, Any]) -> tuple[str, dict[str, tt.Value]]:
    """(path on the proxy, auth items) for the provider the user had; sets facts and upstreams."""
    previous = facts.get("previous_provider", data.get("model_provider"))
    if previous == PROVIDER:
        previous = None
    facts["previous_provider"] = previous
    if previous in (None, "openai"):
        return "/v1", _auth_items(folder)
    providers = data.get("model_providers") or {}
    spec = providers.get(previous) if isinstance(providers, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("base_url"), str):
        raise UsageError(
            f'model_provider "{previous}" has no base_url in the Codex config; lightmem2 forwards only '
            "to a Responses API it can name: add [model_providers." + str(previous) + "] base_url, or "
            'switch to model_provider = "openai"'
        )
    if not str(previous).replace("-", "").replace("_", "").isalnum():
        raise UsageError(
            f'model_provider "{previous}" is not a plain name; rename it (letters, digits, -, _)'
        )
    facts["upstream"] = spec["base_url"].rstrip("/")
    items: dict[str, tt.Value] = {k: spec[k] for k in COPIED_KEYS if k in spec}
    if spec.get("requires_openai_auth"):
        items["requires_openai_auth"] = True
    return f"/u/{previous}/v1", items


def _block(proxy_path: str, auth: dict[str, tt.Value], proxy: str) -> str:
    provider: dict[str, tt.Value] = {
        "name": "lightmem2 (local proxy)",
        "base_url": proxy + proxy_path,
        "wire_api": "responses",
        **auth,
    }
    mcp: dict[str, tt.Value] = {
        "command": sys.executable,
        "args": ["-m", "lightmem_plugin.mcp_server"],
        "required": True,
        "startup_timeout_sec": 20,
    }
    home = os.environ.get("LIGHTMEM2_HOME")
    if home:
        mcp["env"] = {"LIGHTMEM2_HOME": home}
    block = tt.table(f"model_providers.{PROVIDER}", provider)
    if importlib.util.find_spec("mcp") is None:
        return block  # without the SDK the server cannot start, and a required server would stop Codex
    return (
        block + "\n# required: Codex waits for the recover tool before its first request; a tool list that\n"
        "# grows after call 1 would re-miss the provider's prompt cache for the whole prompt once\n"
        + tt.table(f"mcp_servers.{PROVIDER}", mcp)
    )


def _check_conflicts(path: Path, text: str) -> None:
    data = _parse(path, tt.strip_block(text))
    for section in ("model_providers", "mcp_servers"):
        found = data.get(section)
        if isinstance(found, dict) and PROVIDER in found:
            raise UsageError(
                f"{path} already defines [{section}.{PROVIDER}] outside lightmem2's block; "
                "remove or rename it and rerun"
            )


def config_text(folder: Path, text: str, facts: dict[str, Any]) -> str:
    """The new config.toml text (facts get what the undo needs)."""
    path = folder / "config.toml"
    data = _parse(path, tt.strip_block(text))
    _check_conflicts(path, text)
    proxy_path, auth = _provider(folder, data, facts)
    if "provider_line" not in facts:
        facts["provider_line"] = tt.top_key_line(text, "model_provider")
    new = tt.append_block(
        tt.set_top_key(text, "model_provider", OUR_LINE), _block(proxy_path, auth, facts["proxy"])
    )
    parsed = _parse(path, new)
    if parsed.get("model_provider") != PROVIDER or PROVIDER not in (parsed.get("model_providers") or {}):
        raise UsageError(f"{path}: could not place lightmem2's provider (unusual layout); add it by hand")
    return new


def undo_config(text: str, facts: dict[str, Any]) -> str | None:
    """config.toml without our block, with the model_provider line the user had."""
    out = tt.strip_block(text)
    if tt.top_key_line(out, "model_provider") == OUR_LINE:
        old = facts.get("provider_line")
        out = (
            tt.set_top_key(out, "model_provider", old)
            if isinstance(old, str)
            else tt.drop_top_line(out, OUR_LINE)
        )
    return out


def undo_hooks(text: str, facts: dict[str, Any]) -> str | None:
    """hooks.json without our entries."""
    return json.dumps(_hooks_json.remove(json.loads(text), HOST), indent=2) + "\n"


def add(project: str | None) -> str:
    """Add lightmem2 to Codex's config; the report of every change."""
    folder = codex_dir(project)
    config_path = folder / "config.toml"
    text = _edits.read_text(config_path) or ""
    facts: dict[str, Any] = {**_edits.facts_of(config_path), "proxy": base_url(load_config())}
    new = config_text(folder, text, facts)
    reports: list[str] = []
    if isinstance(facts.get("upstream"), str):
        reports.append(
            _upstream.set_upstream(HOST, ["named", str(facts["previous_provider"])], facts["upstream"])
        )
    reports.append(_edits.apply(config_path, new, facts))
    hooks_path = folder / "hooks.json"
    hooks = _hooks_json.add(_hooks_json.load_file(hooks_path), HOST, HOOK_EVENTS)
    reports.append(_edits.apply(hooks_path, json.dumps(hooks, indent=2) + "\n", {}))
    flag = f" --project {project}" if project else ""
    notes = (
        f"Codex now uses model provider {PROVIDER!r} -> {facts['proxy']} (lightmem2 serve; the SessionStart "
        "hook starts it, or run `lightmem2 serve`). Trust the hooks once: `/hooks` in the Codex TUI, or "
        "`codex exec --dangerously-bypass-hook-trust`. In the TUI, type lightmem2's commands with a leading "
        "space (` /lightmem2 status`): Codex takes `/lightmem2` for one of its own commands otherwise. "
        "Check with `lightmem2 doctor`; undo with "
        f"`lightmem2 install codex --uninstall{flag}`."
    )
    if project:
        # measured on 0.169/0.171: an untrusted project's .codex/config.toml is ignored without a word
        notes += (
            f" Codex reads {config_path} only in a trusted project: answer the trust prompt in the Codex TUI "
            f"when you open {Path(project).expanduser().resolve()}, or run `codex exec --trust` there once; "
            "until then Codex does not use lightmem2 in that project."
        )
    return "\n".join(r.rstrip("\n") for r in reports if r) + "\n" + notes


def remove(project: str | None) -> str:
    """Undo :func:`add`; the report of every change."""
    folder = codex_dir(project)
    reports = [
        _edits.restore(folder / "hooks.json", undo_hooks),
        _edits.restore(folder / "config.toml", undo_config),
        _upstream.restore(HOST),
    ]
    return "\n".join(r.rstrip("\n") for r in reports if r)


def run(uninstall: bool = False, project: str | None = None) -> str:
    """``lightmem2 install codex [--uninstall] [--project DIR]``: the text to print."""
    return remove(project) if uninstall else add(project)
