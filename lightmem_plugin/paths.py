"""Where lightmem2 keeps its files: ``$LIGHTMEM2_HOME``, else the platform's user dirs.

Why a module of its own: the fault sink, the stores and the hooks need these paths on paths that must
start fast (a host runs ``lightmem2 hook`` on every tool call), and the config module costs ~0.3 s to
import (pydantic models, the pass registry); this one costs only platformdirs.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def home_dir() -> Path:
    """``$LIGHTMEM2_HOME`` if set, else the platformdirs user config dir."""
    env = os.environ.get("LIGHTMEM2_HOME")
    return Path(env) if env else Path(platformdirs.user_config_dir("lightmem2"))


def data_dir() -> Path:
    """``$LIGHTMEM2_HOME`` if set, else the platformdirs user data dir (registry, ledger)."""
    env = os.environ.get("LIGHTMEM2_HOME")
    return Path(env) if env else Path(platformdirs.user_data_dir("lightmem2"))
