"""The processes of a test's evaluations, read from /proc: what is running under a process, and
which of those is a worker stuck in a given candidate."""
from __future__ import annotations

import json
import os
from pathlib import Path


def proc_stat(pid: int) -> tuple[int, str, str] | None:
    """(parent pid, state, start time) of a live process; None when gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else (int(fields[1]), fields[0], fields[19])


def descendants(root: int) -> dict[int, str]:
    """Every live process under ``root``: pid -> start time (to tell a reused pid)."""
    parents: dict[int, int] = {}
    starts: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := proc_stat(int(entry.name))):
            parents[int(entry.name)], starts[int(entry.name)] = st[0], st[2]
    out = {}
    for pid in parents:
        p, seen = pid, 0
        while p in parents and seen < 64:
            p, seen = parents[p], seen + 1
            if p == root:
                out[pid] = starts[pid]
                break
    return out


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def running_candidate(root: int, marker: str = "while True") -> int | None:
    """The pid of a worker under ``root`` running a candidate whose source holds ``marker`` (mode run,
    phase run): a candidate that hangs there sits in that state until something kills it."""
    for pid in descendants(root):
        if "kernelskill.evaluate.worker" not in cmdline(pid):
            continue
        # Its folders, from where it runs (a forked worker carries its zygote's command line): the
        # scratch folder it works in lies beside its out folder, spawned, forked or started ahead.
        try:
            out_dir = Path(os.readlink(f"/proc/{pid}/cwd")).parent / "out"
        except OSError:
            continue
        try:
            request = json.loads((out_dir / "request.json").read_text())
            phases = (out_dir / "phases").read_text().split()
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        try:
            hung = marker in Path(request.get("candidate_path", "")).read_text()
        except OSError:
            hung = False
        if request.get("mode") == "run" and hung and phases and phases[-1] == "run":
            return pid
    return None
