"""lightmem2: cache-stable, reduced, cost-aware context for long-running LLM agents."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
