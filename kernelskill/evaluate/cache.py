"""The evaluator's cache on disk: where it lives (``$KERNELSKILL_CACHE``, kernelskill.paths) and how a
file of it is written (whole or not at all: evaluations in other processes read and write it beside
this one). Builds (build.build_root), cached references (reference.py), roofline ceilings
(ceilings.py, roofline.store) and the run store's machine profiles all live under ``cache_root()``.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from ..paths import cache_root

__all__ = ["cache_root", "store_json"]


def store_json(path: Path, data) -> Path:
    """Write a cache file whole or not at all (concurrent evaluations read and write the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)
    return path
