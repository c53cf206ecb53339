"""Precompiled headers: the one maker, for every build that uses one.

A header directory holds ``torch/extension.h`` (torch's own, or a lighter one the direct build
writes) and the command that precompiles it (``cmd.json``). ``make_pch`` makes its ``.gch``: one
maker per directory (a lock), a few at a time per cache (``maker_slots``), marked as the tool's own
background build while it waits and works, so no timing runs beside it (``own_builds``). The direct
build starts it detached (``make_pch_detached``: ``python -m kernelskill.evaluate.build.pch DIR``)
and goes on without the header; torch's ``load_inline`` path (``precompiled_header``) makes the
full header of a flag set in place on its ``PCH_AFTER``-th cold build.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from .own_builds import own_build
from .tools import cxx


def make_pch_detached(d: Path, cmd: list[str]) -> None:
    """Start the header's precompilation in its own session: it outlives a killed worker."""
    (d / "cmd.json").write_text(json.dumps(cmd))
    # At the lowest priority: it must not slow the build that asked for it, nor a timing beside it.
    subprocess.Popen(["nice", "-n", "19", sys.executable, "-m", "kernelskill.evaluate.build.pch", str(d)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, cwd=d, env=detached_env())


def detached_env() -> dict:
    """A detached maker outlives the worker whose scratch directory is its TMPDIR and HOME."""
    return {**os.environ, "PYTHONPATH": _pythonpath(), "TMPDIR": "/tmp"}


def _pythonpath() -> str:
    here = str(Path(__file__).resolve().parents[3])
    return os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)


def make_pch(d: Path) -> bool:
    """Precompile ``d/torch/extension.h`` with the command saved beside it; one maker at a time.
    While it waits for a slot and makes the header it is marked as the tool's own background build
    (``own_build``): an evaluation does not time beside it (``own_builds``)."""
    header = d / "torch" / "extension.h"
    gch = header.with_name("extension.h.gch")
    with open(d / "lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False           # another process is making it
        if gch.exists():
            return True
        with own_build(d.parent, f"precompiled header {d.name}"):
            # A few headers at a time per cache: gcc takes 1.5-2 GB and a core making one, and a test
            # run or a bench meets many flag sets at once; the others wait for a slot (holding their
            # own lock). One slot on a 2-core machine, eight on a 16-core one with the memory for them.
            slots = maker_slots()
            while True:
                for k in range(slots):
                    with open(d.parent / f"makers.{k}.lock", "w") as turn:
                        try:
                            fcntl.flock(turn, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        except OSError:
                            continue
                        return _make(d, header, gch)
                with open(d.parent / "makers.0.lock", "w") as turn:
                    fcntl.flock(turn, fcntl.LOCK_EX)      # wait until a maker ends, then look again
                    if slots == 1:
                        return _make(d, header, gch)


def maker_slots() -> int:
    """How many headers may be made at once: a core each beyond one left free, 2 GB of available
    memory each; at least one."""
    from .. import host
    cores = host.cores()
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:")) / 2**20
    except (OSError, StopIteration, ValueError):
        avail = 2.0
    return max(1, min(cores // 2, int(avail // 2), 8))


def _make(d: Path, header: Path, gch: Path) -> bool:
    if gch.exists():
        return True
    cmd = json.loads((d / "cmd.json").read_text())
    tmp = gch.with_suffix(f".{os.getpid()}.tmp")
    proc = subprocess.run([*cmd, "-x", "c++-header", str(header), "-o", str(tmp)], capture_output=True, text=True)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        (d / "failed.log").write_text(proc.stdout + proc.stderr)
        return False
    os.replace(tmp, gch)
    return True


PCH_AFTER = 3          # cold builds of a flag set before a PCH


def supported() -> bool:
    return sys.platform == "linux"


def precompiled_header(root: Path, cflags, include_paths) -> Path | None:
    """A directory holding torch/extension.h and its precompiled .gch for these flags.

    Put first on the include path, gcc picks the .gch up for ``#include <torch/extension.h>``
    and skips re-parsing torch's headers (docs/evaluator.md has the measured saving). One per
    flag set, so candidates with different flags never rebuild each other's (torch's own
    use_pch keeps a single one and deletes it whenever a build does not ask for it).
    """
    import torch.utils.cpp_extension as ext
    cflags = list(cflags or [])
    inc = ext.include_paths()
    cmd_flags = [f"-I{p}" for p in inc + [sysconfig.get_paths()["include"]] + list(include_paths or [])]
    cmd_flags += cflags + ["-DTORCH_API_INCLUDE_EXTENSION_H", "-std=c++20", "-fPIC"]
    compiler = cxx()
    key = hashlib.sha256(repr((compiler, cmd_flags)).encode()).hexdigest()[:12]
    d = root / f"full-{key}"          # beside the direct build's (light-…, bind-…): one cache, one pool of makers
    gch = d / "torch" / "extension.h.gch"
    if gch.exists():
        return d
    # Building one costs about two plain builds: only for flag sets seen before (an optimizer
    # run or a suite builds many extensions with the same flags; a one-off build does not).
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "count.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            # Another build (a parallel bench or pool) is counting or making this very header:
            # build without it rather than make the same header twice or wait a minute for it.
            return None
        if gch.exists():
            return d
        seen = d / "seen"
        count = int(seen.read_text() or 0) + 1 if seen.exists() else 1
        seen.write_text(str(count))
        if count < PCH_AFTER:
            return None
        (d / "torch").mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(inc[0]) / "torch" / "extension.h", d / "torch" / "extension.h")
        (d / "cmd.json").write_text(json.dumps([compiler, *cmd_flags]))
        # The one maker, here in the build that counted to PCH_AFTER: that build waits for it.
        return d if make_pch(d) else None


if __name__ == "__main__":
    if len(sys.argv) == 2:
        sys.exit(0 if make_pch(Path(sys.argv[1])) else 1)
    sys.exit("usage: python -m kernelskill.evaluate.build.pch DIR")
