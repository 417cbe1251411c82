"""The wire registry: every API declares what the proxy, accounting and identity need; one line each."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import replace

import pytest
from starlette.applications import Starlette

from lightmem_plugin import wire
from lightmem_plugin.metering.accounting import detect_api, real_usage
from lightmem_plugin.server.proxy import error_body
from lightmem_plugin.wire.base import WireApi, WireRoute


def test_every_wire_folder_is_registered_once() -> None:
    declared = []
    for info in pkgutil.iter_modules(wire.__path__):
        module = importlib.import_module(f"lightmem_plugin.wire.{info.name}")
        if isinstance(getattr(module, "WIRE", None), WireApi):
            assert info.ispkg, f"{info.name}: a wire API is a folder (codec, stream, WIRE)"
            declared.append(module.WIRE.name)
            assert module.WIRE.decode.__module__ == f"{module.__name__}.codec"
            assert module.WIRE.stream.__module__ == f"{module.__name__}.stream"
    assert sorted(declared) == sorted(wire.NAMES) == ["anthropic", "chat", "responses"]


def _paths(app: Starlette) -> list[str]:
    return [getattr(r, "path", "") for r in app.routes]


def test_the_server_serves_the_routes_each_api_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy's provider routes come from the registry: a route an API adds is served, under
    ``/u/<name>`` too when it says so, before the pass-through catch-alls."""
    from lightmem_plugin.pipeline import LightMem
    from lightmem_plugin.server.app import create_app

    plugin = LightMem()
    declared = [r.path for w in wire.WIRES for r in w.routes]
    assert declared == [
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/chat/completions",
        "/v1/responses",
    ]
    paths = _paths(create_app(plugin, secret="s"))
    assert set(declared) <= set(paths)
    assert "/u/{name}/v1/responses" in paths and "/u/{name}/v1/messages" not in paths

    chat = wire.get("chat")
    extra = replace(chat, routes=(*chat.routes, WireRoute("/v1/other", "openai", "/other", named=True)))
    monkeypatch.setattr(wire, "WIRES", tuple(extra if w is chat else w for w in wire.WIRES))
    paths = _paths(create_app(plugin, secret="s"))
    assert paths.index("/v1/other") < paths.index("/v1/{rest:path}")
    assert paths.index("/u/{name}/v1/other") < paths.index("/u/{name}/v1/{rest:path}")


@pytest.mark.parametrize(
    ("usage", "api", "total", "cached"),
    [
        (
            {"input_tokens": 10, "cache_read_input_tokens": 90, "cache_creation_input_tokens": 5},
            "anthropic",
            105,
            90,
        ),
        ({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 64}}, "chat", 100, 64),
        ({"input_tokens": 100, "input_tokens_details": {"cached_tokens": 32}}, "responses", 100, 32),
    ],
)
def test_usage_is_read_by_its_own_api(usage: dict[str, object], api: str, total: int, cached: int) -> None:
    assert detect_api(usage) == api
    figures = real_usage(api, usage)
    assert (figures.input_tokens, figures.cached_tokens) == (total, cached)


def test_error_shapes() -> None:
    assert error_body("anthropic", 413, "too big") == {
        "type": "error",
        "error": {"type": "request_too_large", "message": "too big"},
    }
    assert error_body("chat", 502, "down")["error"]["code"] == "api_error"


def test_an_unknown_api_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="known: anthropic, chat, responses"):
        wire.get("gemini")
