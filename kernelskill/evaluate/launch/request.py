"""The worker's request: what the trusted parent asks one worker to do (``request.json``).

It mirrors ``reply.WorkerReply``: the wire format is a JSON object, written by ``to_dict`` (fields
left at None are not written) and read back by ``WorkerRequest.parse`` inside the worker, so both
sides read attributes, never keys. ``options.request`` builds the fields every mode shares; each
caller then sets the ones its mode reads (commented by mode below).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kernelskill.vocab import ProfileMode


@dataclass
class TaskRef:
    """The task as the worker loads it again: its file, preset and overrides (an expression as ``{"expr": …}``)."""
    path: str
    preset: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass
class WorkerRequest:
    mode: str                                   # reference, compile, run, profile, race, refserve, ceilings, machine, ncu
    device: str
    seed: int = 0
    trials: int = 0
    threads: int | None = None
    cache_root: str | None = None               # the parent's $KERNELSKILL_CACHE: builds and objects
    env: dict[str, str] = field(default_factory=dict)    # the worker's thread variables (OMP_NUM_THREADS, …)
    baseline: str = "eager"                     # eager | compile | both
    build: str = "direct"                       # direct | torch
    cuda_arch: str | None = None
    task: TaskRef | None = None
    flags_mode: str = "default"                 # the backend flags timed under: default | task | strict
    flags: dict[str, Any] = field(default_factory=dict)
    strict_flags: dict[str, Any] = field(default_factory=dict)    # the reference's own (strict fp32)
    candidate_path: str | None = None
    memory_limit: int | None = None             # bytes of address space (CPU workers)
    out_dir: str | None = None                  # set by launch.isolation.run_worker
    await_timeout: float = 600.0                # how long a wait on the parent lasts
    # reference
    rotate: int = 3                             # input sets the timing rotates through
    store_limit: int | None = None
    # run, profile, race, refserve, ncu
    ref_dir: str | None = None
    # run
    poison_bytes: int = 0
    poison_sizes: list[int] = field(default_factory=list)
    timing: dict | None = None                  # timing.TimingConfig as a dict; None: verify only
    profile: ProfileMode = ProfileMode.off
    # profile (a profiling worker apart): builds after the run worker, loading what it built
    build_after: str | None = None
    build_wait_s: float = 900.0
    # race
    candidate_paths: list[str] = field(default_factory=list)
    # refserve
    serve_dir: str | None = None

    def to_dict(self) -> dict:
        """The JSON object written as ``request.json``."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            out[f.name] = dataclasses.asdict(value) if isinstance(value, TaskRef) else value
        return out

    @classmethod
    def parse(cls, data: dict) -> WorkerRequest:
        """The request in ``data`` (request.json, decoded). A key this version does not know is an
        error: parent and worker are the same installed code."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"request.json: unknown keys {unknown}")
        kw = dict(data)
        if kw.get("task") is not None:
            kw["task"] = TaskRef(**kw["task"])
        if "profile" in kw:
            kw["profile"] = ProfileMode(kw["profile"])
        return cls(**kw)

    def replace(self, **changes) -> WorkerRequest:
        """A copy with ``changes`` (a request handed to a worker is never changed after)."""
        return dataclasses.replace(self, **changes)
