"""The wire registry: every API declares what the proxy, accounting and identity need; one line each."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from lightmem_plugin import wire
from lightmem_plugin.metering.accounting import detect_api, real_usage
from lightmem_plugin.server.proxy import error_body
from lightmem_plugin.wire.base import WireApi


def test_every_wire_module_is_registered_once() -> None:
    declared = []
    for info in pkgutil.iter_modules(wire.__path__):
        module = importlib.import_module(f"lightmem_plugin.wire.{info.name}")
        if isinstance(getattr(module, "WIRE", None), WireApi):
            declared.append(module.WIRE.name)
    assert sorted(declared) == sorted(wire.NAMES) == ["anthropic", "chat", "responses"]


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
