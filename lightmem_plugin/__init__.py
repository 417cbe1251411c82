"""lightmem2: cache-stable, reduced, cost-aware context for long-running LLM agents.

The public surface is what :data:`__all__` lists: :class:`LightMem` (the plugin: ``from_config()``,
``session(id)``, ``command(line)``), :class:`Session` (``before_model_call``, ``ingest_tool_result``,
``after_model_call``), :class:`Config` and the error tree of :mod:`lightmem_plugin.errors`. Everything
else is importable from its module but may change.

Importing this package has no side effects: no files, network or threads. ``LightMem``, ``Session``
and ``Config`` load on first use (PEP 562), because Python runs this file before any submodule: every
``lightmem2 hook`` a host runs and every ``python -m lightmem_plugin.X`` would otherwise pay ~0.4 s
for the pipeline it may not need.
"""

import typing as _typing

from ._version import __version__
from .errors import (
    AccessDenied,
    ArtifactCorrupt,
    ArtifactNotFound,
    CommandRefused,
    ConfigError,
    EstimatorError,
    LightMemError,
    PassError,
    PayloadError,
    RegistryError,
    SecretError,
    StaleState,
    StoreError,
    StoreUnavailable,
    TokenizerError,
    TraceError,
    UsageError,
)

if _typing.TYPE_CHECKING:
    from .api import LightMem, Session
    from .config import Config

__all__ = [
    "AccessDenied",
    "ArtifactCorrupt",
    "ArtifactNotFound",
    "CommandRefused",
    "Config",
    "ConfigError",
    "EstimatorError",
    "LightMem",
    "LightMemError",
    "PassError",
    "PayloadError",
    "RegistryError",
    "SecretError",
    "Session",
    "StaleState",
    "StoreError",
    "StoreUnavailable",
    "TokenizerError",
    "TraceError",
    "UsageError",
    "__version__",
]


def __getattr__(name: str) -> _typing.Any:
    """``LightMem``, ``Session`` and ``Config``, imported on first access."""
    if name in ("LightMem", "Session"):
        from . import api  # lazy: see the module docstring

        value = getattr(api, name)
    elif name == "Config":
        from .config import Config  # lazy: see the module docstring

        value = Config
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
