"""The package version, in a module of its own so that any module can read it without importing the
public surface in ``lightmem_plugin/__init__`` (which would make every importer depend on the pipeline).
"""

from __future__ import annotations

__version__ = "0.1.0"
