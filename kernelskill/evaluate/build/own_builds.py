"""The tool's own background builds, marked so that no timing runs beside them.

A detached precompiled-header maker (or `kernelskill warm`) holds ``own_build`` while it works:
``<build root>/_pch/busy/<pid>-<n>.json``, removed when done; a marker whose process is gone (killed)
counts for nothing. On a fresh 2-core machine the first evaluation's timing once ran beside the
maker its build had started and was judged contended ("other processes used 0.9 of 2 CPU cores"):
a timing now pauses them (``pause``: SIGSTOP to the maker's process group, its compiler included)
and continues them when it is done (``resume``). Each pause is a file ``busy/pause-<pid>-<start>``
of the process that holds it: a maker is continued once no live process holds a pause on it, so one
whose pauser died (killed mid-timing) is continued by the next look at the builds. It imports
nothing of the evaluator: the builders (toolchain) and the judges (quality, ceilings) both read it.
"""
from __future__ import annotations

import itertools
import json
import os
import signal
import time
from pathlib import Path

from kernelskill.paths import cache_root

OWN_BUILD_DIR = "busy"
_own_seq = itertools.count()


PAUSE_PREFIX = "pause-"


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) of a live process (/proc/<pid>/stat fields 3 and
    22); None when it is gone or a zombie. With the pid, the start time names one process (a pid
    reused by another process has another start time)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") or len(fields) < 20 else (fields[0], fields[19])   # a zombie has ended


def _start_ticks(pid: int) -> str | None:
    st = _stat(pid)
    return st[1] if st else None


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
    """The tool's own background builds under this cache (every environment's build root), running
    or paused: [{"pid", "what", "since", "marker", "paused"}]. A marker left by a process that is gone
    is removed; a build left paused by a process that is gone is continued."""
    if cache is None:
        cache = cache_root()
    out = []
    for marker in Path(cache).glob(f"build/*/_pch/{OWN_BUILD_DIR}/*.json"):
        try:
            data = json.loads(marker.read_text())
            pid = int(data["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue               # being written, or just removed
        st = _stat(pid)
        if st is None or (data.get("start") is not None and st[1] != data["start"]):
            marker.unlink(missing_ok=True)      # its process ended without removing it (killed)
            continue
        paused = st[0] == "T"
        if paused and _leads_group(pid) and not _held(marker.parent):
            _signal(pid, signal.SIGCONT)        # its pauser died mid-timing: the build goes on
            paused = False
        out.append({"pid": pid, "what": data.get("what", "?"), "since": data.get("since"), "marker": str(marker),
                    "paused": paused})
    return out


def _leads_group(pid: int) -> bool:
    """A detached maker leads its own process group, its compiler in it; a build in the foreground
    (`kernelskill warm`, a test) runs inside someone's own process, which is never stopped."""
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def _signal(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        pass                       # it just ended


def _pause_file(d: Path) -> Path:
    return d / f"{PAUSE_PREFIX}{os.getpid()}-{_start_ticks(os.getpid())}"


def _held(d: Path) -> bool:
    """Whether a live process holds a pause on the builds of marker folder ``d`` (stale files go)."""
    held = False
    for f in d.glob(f"{PAUSE_PREFIX}*"):
        pid, _, start = f.name[len(PAUSE_PREFIX):].partition("-")
        if pid.isdigit() and _start_ticks(int(pid)) == start:
            held = True
        else:
            f.unlink(missing_ok=True)          # its process is gone: it holds nothing
    return held


def pause(cache: Path | None = None) -> list[dict]:
    """Stop the tool's own detached background builds running now, for this process's timing, until
    ``resume``; returns them. A build in the foreground is not stopped: a round beside it is
    contended and re-timed (quality.RoundJudge)."""
    builds = [b for b in own_builds(cache) if _leads_group(b["pid"])]
    for b in builds:
        try:
            _pause_file(Path(b["marker"]).parent).write_text("")
        except OSError:
            continue                 # a pause that cannot be recorded is not taken
        _signal(b["pid"], signal.SIGSTOP)
        _until_stopped(b["pid"])
    return builds


def _until_stopped(pid: int, limit_s: float = 2.0) -> None:
    """A signal is delivered after kill() returns: wait (bounded) until the process is stopped, so
    that the timing after a pause never overlaps it and a look at the builds sees it paused."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        st = _stat(pid)
        if st is None or st[0] == "T":
            return
        time.sleep(0.001)


def resume(cache: Path | None = None) -> None:
    """Drop this process's pauses and continue every build no live process holds paused (one left
    stopped by a pauser that died included)."""
    if cache is None:
        cache = cache_root()
    for f in Path(cache).glob(f"build/*/_pch/{OWN_BUILD_DIR}/{PAUSE_PREFIX}{os.getpid()}-*"):
        f.unlink(missing_ok=True)
    own_builds(cache)              # continues each paused build that no live process holds
