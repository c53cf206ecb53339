"""The tool's own background builds, marked so that no timing runs beside them.

A detached precompiled-header maker (or `kernelskill warm`) holds ``own_build`` while it works:
``<build root>/_pch/busy/<pid>-<n>.json``, removed when done; a marker whose process is gone (killed)
counts for nothing. On a fresh 2-core machine the first evaluation's timing once ran beside the
maker its build had started and was judged contended ("other processes used 0.9 of 2 CPU cores"):
quality.wait_for_own_builds waits for these before timing. It imports nothing of the evaluator, so
the builders (toolchain) and the judges (quality, ceilings) both read it without an import circle.
"""
from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path

from ..paths import cache_root

OWN_BUILD_DIR = "busy"
_own_seq = itertools.count()


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22): with the pid,
    it names one process (a pid reused by another process has another start time)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") or len(fields) < 20 else fields[19]   # a zombie has ended


class own_build:
    """``with own_build(pch_root, what):`` marks this process as running the tool's own background
    build (a precompiled header, `kernelskill warm`'s bindings) for as long as the block lasts."""

    def __init__(self, pch_root: Path, what: str):
        self.path = Path(pch_root) / OWN_BUILD_DIR / f"{os.getpid()}-{next(_own_seq)}.json"
        self.what = what

    def __enter__(self):
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"pid": os.getpid(), "start": _start_ticks(os.getpid()), "what": self.what,
                                       "since": time.time()}))
            os.replace(tmp, self.path)
        except OSError:
            pass                   # a marker that cannot be written: the build still goes on
        return self

    def __exit__(self, *exc):
        self.path.unlink(missing_ok=True)
        return False


def own_builds(cache: Path | None = None) -> list[dict]:
    """The tool's own background builds running now under this cache (every environment's build
    root): [{"pid", "what", "since", "marker"}]. A marker left by a process that is gone is removed."""
    if cache is None:
        cache = cache_root()
    out = []
    for marker in Path(cache).glob(f"build/*/_pch/{OWN_BUILD_DIR}/*.json"):
        try:
            data = json.loads(marker.read_text())
            pid = int(data["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue               # being written, or just removed
        start = _start_ticks(pid)
        if start is None or (data.get("start") is not None and start != data["start"]):
            marker.unlink(missing_ok=True)      # its process ended without removing it (killed)
            continue
        out.append({"pid": pid, "what": data.get("what", "?"), "since": data.get("since"), "marker": str(marker)})
    return out
