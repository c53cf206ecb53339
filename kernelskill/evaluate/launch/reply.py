"""The worker's reply: what ``python -m kernelskill.evaluate.worker`` writes to ``result.json``.

The wire format stays the JSON object the worker writes (worker.py builds it as a dict);
``WorkerReply.parse`` turns it into this dataclass once, in the trusted parent
(``isolation.run_worker``), so the evaluator reads attributes, never keys. The file is written
inside the process that ran candidate code: nothing in it is trusted beyond its shape.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelskill.vocab import WorkerStatus


@dataclass
class WorkerReply:
    """One worker's report. Fields a mode does not write keep their defaults."""
    # Every mode. None when a forged reply carries none, or a status the worker never sends.
    status: WorkerStatus | None = None
    error: str | None = None          # what failed, in words
    env: dict = field(default_factory=dict)      # what it ran on: threads, gpu, capability, driver
    # A failure in candidate or task code: where, and the traceback's tail.
    line: int | None = None
    source_line: str = ""
    traceback: str | None = None
    # Modes that import the candidate (compile, run, profile, ncu, race): its build log
    # (results.BuildLog as a dict: diagnostics, seconds, cache_hit, extensions, units, …).
    build: dict = field(default_factory=dict)
    # run: the in-place checks of each trial (also in checks.json, which the verdict reads).
    checks: list = field(default_factory=list)
    aligned: Any = None               # how the candidate's weights were aligned with the reference's
    verify_seconds: float | None = None
    pid: int | None = None
    gpu_uuid: str | None = None
    flags_after: list = field(default_factory=list)   # backend flags the candidate changed
    # run and race, once timed: samples, rounds, first call, torch.compile baseline, cost_s, …
    timing: dict | None = None
    # run (profiled in the same worker) and profile: the kernel breakdown. ``kernels_note`` is
    # the parent's, when a profiling worker apart gave none.
    kernels: dict | None = None
    kernels_note: str | None = None
    cost_s: dict = field(default_factory=dict)      # profile: where the profiling worker's time went
    ceilings: dict | None = None      # ceilings: the measured roofline ceilings
    gpu: dict | None = None           # machine: the GPU's facts
    served: int | None = None         # refserve: the requests it answered
    # The object as sent. The reference mode's reply is the reference cache's meta.json (seed,
    # distributions, plan, structure, flops, …), stored as it came and read as a dict by both sides.
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def parse(cls, data: object) -> WorkerReply | None:
        """The reply in ``data`` (result.json, decoded); None when it is not a JSON object,
        which the parent treats like a worker that never reported."""
        if not isinstance(data, dict):
            return None
        get = data.get
        return cls(status=_status(get("status")), error=get("error"), env=get("env") or {}, line=get("line"),
                   source_line=get("source_line") or "", traceback=get("traceback"), build=get("build") or {},
                   checks=get("checks") or [], aligned=get("aligned"), verify_seconds=get("verify_seconds"),
                   pid=get("pid"), gpu_uuid=get("gpu_uuid"), flags_after=get("flags_after") or [],
                   timing=get("timing"), kernels=get("kernels"), kernels_note=get("kernels_note"),
                   cost_s=get("cost_s") or {}, ceilings=get("ceilings"), gpu=get("gpu"), served=get("served"),
                   raw=data)


def _status(value: object) -> WorkerStatus | None:
    """The reply's status as a WorkerStatus; None for anything else (the parent then treats the
    worker as one that never reported: ``crashed``)."""
    try:
        return WorkerStatus(value)
    except ValueError:
        return None
