"""How to evaluate (``Options``), where (``resolve_device``), and the request a worker is sent.

The bottom of the evaluator's trusted side: every module that starts a worker (reference,
compiling, ceilings, evaluation, race, ncu) builds its request here, and imports nothing above it.
"""
from __future__ import annotations

import dataclasses
import os
import re
import platform
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable

import torch

from ..candidate import Candidate
from ..errors import UserError
from ..results import Env
from ..task import Task, _Expr
from ..vocab import Backend
from . import flags as flags_mod
from . import host
from .launch import isolation
from .launch.request import TaskRef, WorkerRequest
from .cache import cache_root
from .worker.timing import TimingConfig

BASELINES = ("eager", "compile", "both")
BUILDS = ("direct", "torch")


@dataclasses.dataclass
class Options:
    """How to evaluate. The defaults are the protocol; tests and quick looks shrink them."""
    device: str = "auto"
    trials: int = 5
    seed: int = 42
    timing: TimingConfig | None = dataclasses.field(default_factory=TimingConfig)
    profile: bool = True
    # Profile in a worker of its own that sets the profiler up while the candidate is verified
    # and timed (CUPTI's set-up costs seconds, and a process that ran a profiler session times
    # launches slower afterwards). None: on a GPU yes, on a CPU (no such set-up) no.
    profile_apart: bool | None = None
    baseline: str = "eager"          # eager | compile | both: which baselines are timed with the candidate
    # Correctness at derived shapes after a correct verdict (evaluate.shapes): "auto" (presets, each
    # size constant halved, doubled and made a prime), or preset names; None: the task's sizes only.
    shapes: str | None = None
    shapes_timed: bool = False       # time the candidate at each derived shape too
    # The backend flags eager, torch.compile and the candidate run under (flags.py): "default", PyTorch's
    # own (or the task's [flags]), as a user's process has them; "strict": TF32 off everywhere.
    flags: str = "default"
    ncu: bool = False                # Nsight Compute metrics of the candidate's kernels (GPU only)
    # How candidates' extensions are built: "direct" (the split build: one unit per source, shared
    # precompiled headers, torch's build where it does not apply) or "torch" (load_inline for all).
    build: str = "direct"
    # The CUDA target of a compile-only check (a machine that cannot run CUDA): None, the GPU
    # present, else sm_90. A GPU run builds for the GPU present regardless.
    cuda_arch: str | None = None
    build_timeout: float = 900.0
    run_timeout: float = 300.0
    threads: int | None = None
    memory_fraction: float = 0.5     # CPU runs: the worker's address-space cap, of physical memory
    remeasure_ceilings: bool = False # measure the device's roofline ceilings again (replacing the cache)
    # At most this many bytes of trial inputs or reference outputs are written to the reference
    # cache (None: the memory plan's own budgets, trials.py); beyond it inputs come from seeds and
    # outputs are recomputed on demand.
    store_limit: int | None = None
    keep_dir: Path | None = None
    # Set by another thread to stop the evaluation: its workers are killed at once and evaluate()
    # raises isolation.Cancelled (the MCP server sets it when a client cancels or goes away).
    cancel: threading.Event | None = dataclasses.field(default=None, compare=False, repr=False)
    # Hears each step of a build as the worker reports it ("compile kernel.cpp", "link", …): the
    # CLI's progress line, MCP progress notifications, the bench's per-job status.
    on_step: Callable[[str], None] | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.build not in BUILDS:
            raise UserError(f"build = {self.build!r}: choose one of {', '.join(BUILDS)} (\"direct\": the split build, "
                            f"the default; \"torch\": torch's load_inline for every extension)")
        if self.cuda_arch is not None and not re.fullmatch(r"sm_\d{2,3}a?", self.cuda_arch):
            raise UserError(f"cuda_arch = {self.cuda_arch!r}: name a CUDA target like sm_90 or sm_80 (nvcc's -arch), "
                            f"or leave it out for the GPU present")


def resolve(task, candidate) -> tuple[Task | None, Candidate | None]:
    """A task (a Task or its path) and a candidate (a Candidate, a file's Path, or source text) as objects."""
    if task is not None and not isinstance(task, Task):
        task = Task.load(task)
    # A Path is a file to read; a string is always source (never a path a caller could smuggle in).
    if isinstance(candidate, Path):
        candidate = Candidate.from_file(candidate)
    elif candidate is not None and not isinstance(candidate, Candidate):
        candidate = Candidate.from_source(str(candidate))
    return task, candidate


def resolve_device(device: str, backend: str | None = None) -> str:
    """auto → cuda when the backend needs it or a GPU is present, else cpu."""
    has_cuda = bool(torch.version.cuda) and torch.cuda.is_available()
    if device == "auto":
        if backend == Backend.cpp:
            return "cpu"
        return "cuda" if has_cuda else "cpu"
    if device.startswith("cuda") and not has_cuda:
        raise UserError(f"--device {device}: this machine has no usable CUDA device "
                        f"(torch {torch.__version__}, CUDA {torch.version.cuda}); use --device cpu")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise UserError(f"--device {device}: expected cpu, cuda or cuda:N")
    return device


def machine_backend() -> Backend:
    """The backend this machine runs: cuda with a usable GPU, else C++ on the CPU (what MCP's
    lookup_skills and `skills search` default to)."""
    return Backend.cuda if resolve_device("auto") == "cuda" else Backend.cpp


def worker_threads(opts: Options) -> int:
    """The threads a worker pins torch and OpenMP to: the option, else every core this process may use."""
    return isolation.worker_threads(opts.threads)


def request(mode: str, task: Task | None, cand: Candidate | None, device: str, opts: Options, base: Path,
            **fields) -> WorkerRequest:
    """The request a worker of ``mode`` is sent, with the fields its mode reads (``fields``); the
    candidate's source is written into ``base``."""
    threads = worker_threads(opts)
    req = WorkerRequest(mode=mode, device=device, seed=opts.seed, trials=opts.trials, threads=threads,
                        cache_root=str(cache_root()), env=isolation.worker_env_vars(threads),
                        baseline=opts.baseline, build=opts.build, cuda_arch=opts.cuda_arch, **fields)
    if task is not None:
        req.task = TaskRef(path=str(task.path), preset=task.preset,
                           overrides={k: ({"expr": str(v)} if isinstance(v, _Expr) else v) for k, v in task.overrides.items()})
        req.flags_mode, req.flags = backend_flags(task, opts)
        req.strict_flags = dict(flags_mod.STRICT)
    if cand is not None:
        path = base / "candidate.py"
        path.write_text(cand.source)
        req.candidate_path = str(path)
    if device == "cpu":
        try:
            req.memory_limit = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * opts.memory_fraction)
        except (ValueError, OSError):
            pass
    return req


def backend_flags(task: Task, opts: Options) -> tuple[str, dict]:
    """(label, settings): the backend flags an evaluation of ``task`` times under (flags.resolve)."""
    try:
        return flags_mod.resolve(task.flags, task.flags_mode, opts.flags)
    except ValueError as e:
        raise UserError(f"--flags {opts.flags}: expected one of {', '.join(flags_mod.MODES)}") from e


def workdir(opts: Options) -> Path:
    """A fresh folder for one worker's request, scratch and output (under ``opts.keep_dir`` if set)."""
    return Path(tempfile.mkdtemp(prefix="kernelskill-", dir=opts.keep_dir)) if opts.keep_dir else host.temp_dir("kernelskill-")


def mkdir(p: Path) -> Path:
    """``p``, created with its parents if missing."""
    p.mkdir(parents=True, exist_ok=True)
    return p


def host_env(device: str) -> Env:
    """What this (trusted) process knows of the environment; the worker's own report is merged in later."""
    try:
        import triton  # noqa: F401
        triton_v = triton.__version__
    except Exception:  # noqa: BLE001 — triton is optional
        triton_v = None
    env = Env(python=sys.version.split()[0], torch=torch.__version__, cuda=torch.version.cuda, triton=triton_v,
              device=device, cpu=platform.processor() or platform.machine(), platform=platform.platform())
    env.fingerprint = f"{env.torch}|{env.cuda}|{env.python}|{platform.machine()}"
    return env
