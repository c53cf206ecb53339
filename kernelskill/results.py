"""Result dataclasses: every arrow of the data flow carries one of these, and each
round-trips through JSON (``to_dict`` / ``from_dict``)."""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .vocab import Bottleneck, Status


def to_dict(obj: Any) -> Any:
    """Plain JSON-ready data from a (nested) result dataclass."""
    if isinstance(obj, OpenRecord):
        return obj.wire()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(_wire_value(f, getattr(obj, f.name))) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, float) and obj != obj:  # NaN is not JSON
        return None
    if isinstance(obj, Enum):                  # a Status is its plain string in JSON and in dicts
        return obj.value
    return obj


def _build(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _build(args[0], value) if len(args) == 1 else value
    if origin is list:
        (inner,) = typing.get_args(tp) or (Any,)
        return [_build(inner, v) for v in value]
    if isinstance(tp, type) and issubclass(tp, OpenRecord):
        return tp.from_wire(value) if value else None   # {}: the record was never written
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp(value)                       # an unknown status is an error here, not later
    return value


def from_dict(cls: type, data: dict) -> Any:
    """Rebuild a result dataclass (and its nested ones) from ``to_dict`` output."""
    if issubclass(cls, OpenRecord):
        return cls.from_wire(data)
    hints = typing.get_type_hints(cls)
    kwargs = {f.name: _build(hints[f.name], data[f.name])
              for f in dataclasses.fields(cls) if f.name in data}
    return cls(**kwargs)


class JsonMixin:
    def to_dict(self) -> dict:
        return to_dict(self)

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, data: dict):
        return from_dict(cls, data)

    @classmethod
    def from_json(cls, text: str):
        return from_dict(cls, json.loads(text))


def _wire_value(f: dataclasses.Field, value: Any) -> Any:
    """A field's value as JSON holds it: a field declared with ``metadata={"json_none": x}`` writes
    ``x`` for None (an optional record that older versions wrote as an empty object)."""
    return f.metadata["json_none"] if value is None and "json_none" in f.metadata else value


class OpenRecord(JsonMixin):
    """A dataclass written as one flat JSON object of optional keys, the way it was written when it
    was a dict: a field left None is no key at all (the writer never set it), and a key no field
    names (written by another version) is kept in ``extra`` and written back at the top level, so
    that loading and saving a stored record changes nothing in it."""

    def wire(self) -> dict:
        out = {f.name: to_dict(getattr(self, f.name)) for f in dataclasses.fields(self)
               if f.name != "extra" and getattr(self, f.name) is not None}
        return {**to_dict(getattr(self, "extra", None) or {}), **out}

    @classmethod
    def from_wire(cls, data: dict):
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        known = {k: _build(hints[k], v) for k, v in data.items() if k in names}
        rest = {k: v for k, v in data.items() if k not in names}
        return cls(**known, extra=rest) if rest else cls(**known)


@dataclass
class Diagnostic(JsonMixin):
    """One compiler message, pointed at the candidate's own source where possible."""
    severity: str                 # error | warning | note
    message: str
    line: int | None = None       # line in the candidate file (or in `file`)
    column: int | None = None
    file: str = "candidate"       # "candidate" when mapped into the candidate's source
    source_line: str = ""         # the text of that line
    origin: str = "python"        # python | cpp | cuda | triton | link

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" + (f":{self.column}" if self.column else "") if self.line else self.file
        text = f"{where}: {self.severity}: {self.message}"
        return text + (f"\n    {self.source_line.strip()}" if self.source_line.strip() else "")


@dataclass
class CompileResult(JsonMixin):
    ok: bool
    backend: str
    seconds: float = 0.0
    cache_hit: bool = False
    compile_only: bool = False    # built but not loadable here (CUDA source on a machine without CUDA)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    log_tail: str = ""
    extensions: list[str] = field(default_factory=list)
    # How it was built: "direct" (split units, cached objects, precompiled light header:
    # evaluate/build/direct.py) or "torch" (load_inline's own build; `fallback` says why), and the
    # seconds each translation unit took to compile (none: every object came from the cache).
    path: str = ""
    fallback: str = ""
    units: dict[str, float] = field(default_factory=dict)
    # The build's timeline: [seconds since it began in the worker, what it did] (a unit started,
    # compiled, failed, the link), so that a slow build says where its seconds went.
    steps: list = field(default_factory=list)


@dataclass
class TrialResult(JsonMixin):
    trial: int
    seed: int
    distribution: str             # "task" (get_inputs as written) or "signed" (a second distribution)
    ok: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None   # ‖out−ref‖ / ‖ref‖
    mismatch_fraction: float | None = None
    check: str = ""               # which check failed (shape, dtype, allclose, …), "" when ok
    message: str = ""


@dataclass
class VerifyResult(JsonMixin):
    correct: bool
    trials: list[TrialResult] = field(default_factory=list)
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatch: str = ""            # the report the debugger agent reads
    flags: list[str] = field(default_factory=list)
    degenerate: bool = False
    atol: float | None = None
    rtol: float | None = None
    seconds: float = 0.0
    memory_plan: dict = field(default_factory=dict)   # how the trials were held (evaluate/worker/trials.py)
    # Per output: the task's tolerance, how far PyTorch's default-flag eager is from the strict
    # reference (in multiples of it) and the tolerance compared with (evaluate/verdict.tolerances).
    tolerances: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)    # e.g. the strict reference itself misses the tolerance vs fp64


@dataclass
class TimingStats(JsonMixin):
    median_ms: float
    iqr_ms: float
    n: int
    min_ms: float = 0.0
    mean_ms: float = 0.0


@dataclass
class MeasurementQuality(JsonMixin):
    """Whether a timing can be acted on (evaluate/judge/quality.py): good | noisy | contended, and why."""
    verdict: str = "good"
    reasons: list[str] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)   # interval width, median ÷ min, drift, host and GPU state
    rounds: int = 1                               # timing rounds run (each on fresh allocations)
    chosen_round: int = 0                         # the first round reported
    chosen_rounds: list[int] = field(default_factory=list)   # the rounds reported, their samples merged
    history: list[dict] = field(default_factory=list)   # per round: verdict, speedup, interval, reasons

    @property
    def good(self) -> bool:
        return self.verdict == "good"

    def label(self) -> str:
        """One short phrase for a person: "good", or "noisy: <first reason>" (+ timed n×)."""
        text = self.verdict if self.good or not self.reasons else f"{self.verdict}: {self.reasons[0]}"
        return text + (f"; timed {self.rounds}×" if self.rounds > 1 and not self.good else "")


@dataclass
class KernelStat(JsonMixin):
    name: str
    calls: int
    time_ms: float
    share: float
    custom: bool


@dataclass
class ModuleStat(JsonMixin):
    """The time of one submodule of the model per call (its kernels on a GPU, its ops on a CPU);
    ``module`` is its name in ``named_modules()`` ("(forward)": the model's own forward)."""
    module: str
    type: str
    time_ms: float
    share: float
    launches: int
    top: str = ""               # its most expensive kernel (op)


@dataclass
class Roofline(OpenRecord):
    """The roofline position of one measured model (evaluate/judge/roofline.analyse), and what
    verdict._roofline adds. Every field is optional: a record holds only what was known when it
    was written (stored records predate some fields), and a None field is absent from its JSON."""
    # The task's compulsory work per call and the device's roofs it is measured against.
    flops: int | None = None              # FLOPs one call counts
    bytes: int | None = None              # compulsory bytes one call moves (inputs read, outputs written)
    intensity: float | None = None        # flops / bytes, FLOP/B (inf when no bytes)
    ridge: float | None = None            # FLOP/B at which the compute and memory roofs meet
    peak_tflops: float | None = None      # the measured matmul rate for the dtype (the compute roof), TFLOP/s
    bandwidth_gbs: float | None = None    # the measured copy bandwidth (the memory roof), GB/s
    roof: str | None = None               # "memory" (intensity below the ridge) | "compute"
    ceilings: str | None = None           # which ceilings: the device's name and when they were measured
    # The candidate against them.
    floor_ms: float | None = None         # the time the compulsory work needs at the roofs, ms
    fraction: float | None = None         # floor_ms / the candidate's time (1 = on the roof; above 1: see over_roof_*)
    achieved_gbs: float | None = None     # compulsory bytes / the candidate's time, GB/s
    achieved_tflops: float | None = None  # flops / the candidate's time, TFLOP/s
    measured: str | None = None           # which statistic of the timed calls the fraction divides by
    launches: int | None = None           # kernel launches (GPU) or top-level ops (CPU) per call
    launch_us: float | None = None        # the measured per-launch overhead of an eager op, µs
    busy: float | None = None             # share of the call the GPU's kernels ran (0–1; GPU only)
    # The hardware's limits beside the library's measured rates.
    fma_peak_tflops: float | None = None  # fp32 FMA peak (float32 tasks), TFLOP/s
    tensor_peak_tflops: float | None = None   # tensor-core peak of the path the dtype may take, TFLOP/s
    dtype: str | None = None              # the task's dtype the peaks were read for
    tf32_allowed: bool | None = None      # fp32 matmuls may use TF32 (its peak then)
    hw_floor_ms: float | None = None      # the floor at the hardware's limits, ms
    hw_fraction: float | None = None      # hw_floor_ms / the candidate's time
    hw_peak_tflops: float | None = None   # the fastest path's peak the hardware floor uses, TFLOP/s
    limits: dict | None = None            # the ceilings' hardware limits as measured with them (machine.gpu_limits)
    # Faster than the floor: why (one of roofline.OVER_*), the numbers behind it, and what that
    # leaves of the bottleneck class.
    over_roof_reason: str | None = None
    over_roof_detail: str | None = None
    bottleneck_note: str | None = None
    # Eager (the task's PyTorch reference) against the same floor.
    eager_fraction: float | None = None   # floor_ms / eager's time
    eager_over_roof_reason: str | None = None
    raised_ceiling: dict | None = None    # eager beat its floor: {"ceiling", "from", "to", "stored"} of the raise
    binds: bool | None = None             # the floor bounds speedups (GPU, L2 flushed): bench's clip goes by it
    extra: dict = field(default_factory=dict)   # keys of a stored record that no field names


@dataclass
class ProfileResult(JsonMixin):
    device: str
    candidate: TimingStats | None = None
    baseline: TimingStats | None = None          # PyTorch eager
    compile_baseline: TimingStats | None = None  # torch.compile, when asked for
    speedup: float | None = None                 # baseline median / candidate median
    speedup_ci: list[float] = field(default_factory=list)   # [low, high], 95 %
    speedup_vs_compile: float | None = None
    speedup_vs_compile_ci: list[float] = field(default_factory=list)
    kernels: list[KernelStat] = field(default_factory=list)
    modules: list[ModuleStat] = field(default_factory=list)     # the same time by the module that ran it
    launches: int | None = None                  # kernel launches (GPU) or top-level ops (CPU) a call makes
    custom_share: float | None = None
    threads: int | None = None
    first_call_ms: float | None = None           # the candidate's first call (Triton compiles here)
    timer: str = ""
    # None: no roofline (no ceilings for the device, or the task's work is unknown); written as {}.
    roofline: Roofline | None = field(default=None, metadata={"json_none": {}})
    bottleneck: Bottleneck | None = None
    ncu: dict = field(default_factory=dict)        # Nsight Compute metrics (--ncu): totals and per kernel
    cost_s: dict = field(default_factory=dict)     # the worker's seconds: timing, saving outputs, profiling
    notes: list[str] = field(default_factory=list)
    quality: MeasurementQuality | None = None     # None: not timed
    decision_ms: float | None = None               # the candidate's low quantile (roofline, bottleneck)
    baseline_flags: str = "default"                # the backend flags timed under: default | task | strict

    def speedup_text(self, digits: int = 2) -> str:
        """The speedup as a person should read it: with its interval, and its quality when not good."""
        if self.speedup is None:
            return "speedup withheld"
        text = f"{self.speedup:.{digits}f}×"
        if len(self.speedup_ci) == 2:
            text += f" [{self.speedup_ci[0]:.{digits}f}–{self.speedup_ci[1]:.{digits}f}]"
        if self.quality is not None and not self.quality.good:
            text += f" ({self.quality.verdict})"
        if self.baseline_flags == "strict":
            # Not the PyTorch a user runs (its cuDNN convolutions use TF32): say so wherever it is shown.
            text += " (strict fp32 flags)"
        return text


@dataclass
class RaceEntry(JsonMixin):
    """One candidate of a head-to-head race."""
    candidate_hash: str
    stats: TimingStats | None = None
    speedup: float | None = None              # eager median / its median, same run
    speedup_ci: list[float] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)   # a timed output that did not match: out of the race


@dataclass
class RaceResult(JsonMixin):
    """Candidates timed head to head, interleaved with eager (``evaluate.race``)."""
    status: str                                  # a RaceStatus: ok | failed
    entries: list[RaceEntry] = field(default_factory=list)
    winner: int | None = None                    # index into entries: the fastest with confidence, else None
    ratio: float | None = None                   # median(entries[0]) / median(entries[1]): > 1, the second is faster
    ratio_ci: list[float] = field(default_factory=list)
    quality: MeasurementQuality | None = None
    message: str = ""
    seconds: float = 0.0


@dataclass
class Env(JsonMixin):
    python: str = ""
    torch: str = ""
    cuda: str | None = None
    triton: str | None = None
    device: str = "cpu"
    gpu: str | None = None
    capability: str | None = None
    driver: str | None = None
    cpu: str = ""
    threads: int | None = None
    platform: str = ""
    fingerprint: str = ""
    # The PyTorch backend flags eager, torch.compile and the candidate ran under, as the worker set
    # them before any candidate code (evaluate/flags.py), and which set: default | task | strict.
    flags: dict = field(default_factory=dict)
    flags_mode: str = "default"


@dataclass
class ShapeCheck(JsonMixin):
    """The candidate at one derived shape (evaluate.shapes): ok | refused | incorrect | crashed | skipped."""
    label: str                    # "batch_size=31 (a prime near 32)", "preset small"
    sets: dict = field(default_factory=dict)     # the constants as set there
    verdict: str = "ok"
    message: str = ""
    speedup: float | None = None  # where timed


@dataclass
class ShapesResult(JsonMixin):
    """Does it generalize beyond the task's sizes: yes | specialised (clean refusals) | no."""
    generalizes: str
    summary: str = ""
    shapes: list[ShapeCheck] = field(default_factory=list)


@dataclass
class EvalResult(JsonMixin):
    status: Status
    compile: CompileResult
    verify: VerifyResult | None = None
    profile: ProfileResult | None = None
    env: Env = field(default_factory=Env)
    flags: list[str] = field(default_factory=list)
    message: str = ""             # one line: why this status
    log_tail: str = ""
    task: str = ""
    candidate_hash: str = ""
    seconds: float = 0.0
    # Where the seconds went: the parent's steps (reference: its worker, or the cache; plan; start: the run worker's
    # start-up; judge) and the worker's phases (setup, build, run, await, time, timed, profile,
    # recheck), each summed over its spans.
    phases: dict[str, float] = field(default_factory=dict)
    shapes: ShapesResult | None = None     # --shapes: the candidate at derived shapes

    @property
    def ok(self) -> bool:
        return self.status == Status.ok

    @property
    def speedup(self) -> float | None:
        return self.profile.speedup if self.profile else None

    @property
    def custom_share(self) -> float | None:
        return self.profile.custom_share if self.profile else None

    def to_dict(self) -> dict:
        d = to_dict(self)
        # Scripts read these at the top level.
        return {"status": self.status, "flags": list(self.flags), "speedup": self.speedup,
                "custom_share": self.custom_share, "quality": self.quality, **d}

    @property
    def quality(self) -> str | None:
        """good | noisy | contended for a timed result, None when nothing was timed."""
        q = self.profile.quality if self.profile else None
        return q.verdict if q else None

    @classmethod
    def from_dict(cls, data: dict) -> "EvalResult":
        keep = {k: v for k, v in data.items() if k not in ("speedup", "custom_share", "quality")}
        return from_dict(cls, keep)
