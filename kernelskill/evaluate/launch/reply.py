"""The worker's reply: what ``python -m kernelskill.evaluate.worker`` writes to ``result.json``.

The wire format stays the JSON object the worker writes (worker.py builds it as a dict);
``WorkerReply.parse`` turns it into this dataclass once, in the trusted parent
(``isolation.run_worker``), so the evaluator reads attributes, never keys. The file is written
inside the process that ran candidate code: nothing in it is trusted beyond its shape.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelskill.vocab import WorkerStatus


@dataclass
class Samples:
    """One model's timed calls, as the worker took them (interleaved with the other models')."""
    ms: list[float]                   # each call: CUDA events on a GPU, perf_counter on a CPU
    host_ms: list[float] = field(default_factory=list)      # the host's clock around each call
    device_ms: list[float] = field(default_factory=list)    # hide_launch: the device's own time
    enqueue_ms: list[float] = field(default_factory=list)   # hide_launch: the host's enqueue time
    rounds: list[int] | None = None   # the samples each timing round gave (several rounds merged)

    @classmethod
    def parse(cls, data: dict) -> Samples:
        """One model's samples; ValueError unless ``ms`` is a non-empty list of numbers."""
        ms = data.get("ms")
        if not isinstance(ms, list) or not ms or not all(isinstance(x, (int, float)) for x in ms):
            raise ValueError("timing: a model's ms is not a non-empty list of numbers")
        return cls(ms=ms, host_ms=list(data.get("host_ms") or []),
                   device_ms=list(data.get("device_ms") or []), enqueue_ms=list(data.get("enqueue_ms") or []),
                   rounds=data.get("rounds"))

    def to_dict(self) -> dict:
        """The wire form ({"ms": [...], ...}, empty lists left out), as the round files hold it."""
        out = {"ms": self.ms}
        for name in ("host_ms", "device_ms", "enqueue_ms"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.rounds is not None:
            out["rounds"] = self.rounds
        return out


@dataclass
class CompileInfo:
    """How the torch.compile baseline was made in the worker (``baseline`` compile or both)."""
    ok: bool
    seconds: float | None = None
    agrees_with_eager: bool | None = None   # its outputs within 1e-2 of eager's (Inductor numerics)
    error: str | None = None


@dataclass
class TimingReply:
    """A run or race worker's timing: every model's samples, and how they were taken."""
    times: dict[str, Samples]         # run: candidate, eager (and compile); race: c0, c1, …, eager
    reps: int = 0                     # calls per model in the kept round(s)
    threads: int | None = None        # torch's intra-op threads in the worker
    rounds: int = 1                   # timing rounds the worker ran
    chosen_round: int | None = None   # the round kept (one)
    chosen_rounds: list[int] | None = None   # the rounds kept and merged (several)
    first_call_ms: float | None = None   # the candidate's first call (Triton compiles there)
    compile: CompileInfo | None = None   # the torch.compile baseline's making; None: not asked for
    spin_ms: float | None = None      # the GPU spin before each round (hide_launch)
    flush_l2: bool = True             # whether L2 was flushed before each timed call
    cost_s: dict[str, float] = field(default_factory=dict)   # where the worker's time went
    # Set by the parent: the rounds' judged quality (judge.quality.RoundJudge.summary).
    quality: dict | None = None

    @classmethod
    def parse(cls, data: object) -> TimingReply | None:
        """The timing in a reply; None when there is none. A malformed one raises ValueError."""
        if data is None:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("times"), dict):
            raise ValueError("timing: not an object with times")
        info = data.get("compile")
        return cls(times={str(k): Samples.parse(v) for k, v in data["times"].items()},
                   reps=data.get("reps") or 0, threads=data.get("threads"), rounds=data.get("rounds") or 1,
                   chosen_round=data.get("chosen_round"), chosen_rounds=data.get("chosen_rounds"),
                   first_call_ms=data.get("first_call_ms"),
                   compile=CompileInfo(**{k: info.get(k) for k in ("ok", "seconds", "agrees_with_eager", "error")})
                   if isinstance(info, dict) else None,
                   spin_ms=data.get("spin_ms"), flush_l2=data.get("flush_l2", True),
                   cost_s=dict(data.get("cost_s") or {}), quality=data.get("quality"))

    def kept_rounds(self) -> int | list[int] | None:
        """The round(s) whose samples these are."""
        return self.chosen_rounds or self.chosen_round

    def raw_times(self) -> dict:
        """``times`` in the wire form the round judge's statistics read (``quality.assess``)."""
        return {name: s.to_dict() for name, s in self.times.items()}


@dataclass
class ReferenceMeta:
    """What the reference worker found (its reply, stored as the reference cache's ``meta.json``):
    the trials' seeds and distributions, the outputs' sizes, what makes the task special
    (degenerate, stochastic, random), its memory plan, accuracy probes and work (FLOPs, bytes).
    The reference worker runs no candidate code: this file is trusted."""
    seed: int
    distributions: list[str]          # trial i's input distribution: "task" (get_inputs) or "signed"
    output_bytes: int                 # one call's outputs, all tensors
    output_sizes: list[int] = field(default_factory=list)   # bytes of each output tensor
    structure: Any = None             # the outputs' structure ("tensor", a tuple of them, …)
    degenerate: str = ""              # why a speedup on this task means nothing ("": it does)
    stochastic: str = ""              # why the reference is not reproducible ("": it is)
    random: str = ""                  # how it draws random numbers, each call seeded ("": it does not)
    # The memory plan (worker/trials.py): inputs and outputs "stored" or regenerated/"recompute",
    # the rotation, the budgets it was made from and where the reference's seconds went.
    plan: dict = field(default_factory=dict)
    accuracy: dict | None = None      # eager's flags, its deviation from them, the fp64 probe
    parameter_names: list[str] = field(default_factory=list)
    flops: int | None = None          # one forward call's, traced (None: not traced, see work_note)
    bytes: int | None = None          # the bytes one call must move at least
    op_classes: list[str] = field(default_factory=list)
    work_note: str | None = None
    env: dict = field(default_factory=dict)   # the worker's threads and backend flags
    status: str = "ok"

    @classmethod
    def parse(cls, data: dict) -> ReferenceMeta:
        """The record in ``data``; a key this version does not know is an error (the cache key
        carries the protocol's version, so another version's file is never read)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"meta.json: unknown keys {unknown}")
        return cls(**data)

    @classmethod
    def load(cls, ref_dir: Path) -> ReferenceMeta:
        return cls.parse(json.loads((Path(ref_dir) / "meta.json").read_text()))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def recompute(self) -> bool:
        """Whether the reference outputs are recomputed on demand (too large to store)."""
        return self.plan.get("outputs") == "recompute"


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
    timing: TimingReply | None = None
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
        try:
            timing = TimingReply.parse(get("timing"))
        except (ValueError, TypeError, AttributeError):
            return None               # a forged or broken timing: as if the worker never reported
        return cls(status=_status(get("status")), error=get("error"), env=get("env") or {}, line=get("line"),
                   source_line=get("source_line") or "", traceback=get("traceback"), build=get("build") or {},
                   checks=get("checks") or [], aligned=get("aligned"), verify_seconds=get("verify_seconds"),
                   pid=get("pid"), gpu_uuid=get("gpu_uuid"), flags_after=get("flags_after") or [],
                   timing=timing, kernels=get("kernels"), kernels_note=get("kernels_note"),
                   cost_s=get("cost_s") or {}, ceilings=get("ceilings"), gpu=get("gpu"), served=get("served"),
                   raw=data)


def _status(value: object) -> WorkerStatus | None:
    """The reply's status as a WorkerStatus; None for anything else (the parent then treats the
    worker as one that never reported: ``crashed``)."""
    try:
        return WorkerStatus(value)
    except ValueError:
        return None
