"""What every mode of the worker shares: the functions captured before any candidate code runs,
the process's set-up (device, threads, backend flags, memory limit), seeds, phases and files written
for the parent, and the waits on it. Imported first by ``__main__``: nothing here imports candidate code."""
from __future__ import annotations

import contextlib
import json
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from kernelskill.evaluate import flags as _flags
from kernelskill.task import Task, _Expr
from kernelskill.evaluate.launch.request import WorkerRequest


# Captured before any candidate code exists in this process.
_Tensor = torch.Tensor
_equal = torch.equal
_isnan = torch.isnan
_save = torch.save
_clock = time.perf_counter
_seeders = (torch.manual_seed, torch.cuda.manual_seed, random.seed, np.random.seed)


# The files a worker writes are read once by its parent, on the same machine: a CRC over gigabytes
# of outputs is time spent on nothing (torch.save computes one per tensor by default).
if hasattr(torch.serialization, "set_crc32_options"):
    torch.serialization.set_crc32_options(False)


def set_phase(out: Path, phase: str) -> None:
    # One appended line per phase: the parent sees every phase, however short, in order.
    with open(out / "phases", "a") as f:
        f.write(phase + "\n")


def flatten(out) -> tuple[list, str]:
    """Outputs as a flat list plus a structure string (tensor, tuple[3], …)."""
    if isinstance(out, (list, tuple)):
        return list(out), f"{type(out).__name__}[{len(out)}]"
    return [out], "tensor" if isinstance(out, torch.Tensor) else type(out).__name__


def _load_task(req: WorkerRequest) -> Task:
    over = {k: (_Expr(v["expr"]) if isinstance(v, dict) else v) for k, v in req.task.overrides.items()}
    return Task.load(req.task.path, preset=req.task.preset, overrides=over)


# The backend flags this worker set up, before any candidate code ran (reported in its env).
_SET_FLAGS: dict = {}


def _setup(req: WorkerRequest) -> str:
    device = req.device
    threads = req.threads
    if threads:
        torch.set_num_threads(threads)
    if device.startswith("cuda:"):
        # The pool names GPUs by index (cuda:N). CUDA events, torch.cuda.synchronize() and the
        # current stream belong to the current device: left at GPU 0 they bracket none of the work
        # on GPU N, and the timings were the host's launch times (eager below its roofline floor,
        # zero medians with torch.compile; figures: docs/evaluator.md, "Measurements behind the code").
        torch.cuda.set_device(torch.device(device))
    # The user's backend flags (PyTorch's defaults unless the task or --flags strict say otherwise):
    # eager, torch.compile and the candidate run under them; the reference's outputs do not (strict).
    _flags.apply(req.flags or {})
    _SET_FLAGS.clear()
    _SET_FLAGS.update(_flags.current())
    limit = req.memory_limit
    if limit and not device.startswith("cuda"):
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return device


@contextlib.contextmanager
def compile_tempdir(cache_root: str | None = None):
    """The temporary folder torch.compile runs (and Inductor is imported) with: one beside the cache,
    shared by the workers. Inductor keeps its CPU precompiled header under the temporary folder, not
    under its cache directory, and fixes that path when it is imported: in a worker's own scratch
    folder the header was made again by every worker (about half of a warm compile's seconds;
    docs/optimizer.md). ``cache_root``: the request's; a spare, which has none yet, takes the one its
    environment names (``TORCHINDUCTOR_CACHE_DIR`` lies in it). Only trusted code runs inside: the
    baseline's compile before any candidate code loads, or a spare's imports."""
    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    root = Path(cache_root) if cache_root else (Path(inductor).parent if inductor else None)
    saved = tempfile.tempdir
    if root is not None:
        shared = root / "inductor-tmp"
        shared.mkdir(parents=True, exist_ok=True)
        tempfile.tempdir = str(shared)
    try:
        yield
    finally:
        tempfile.tempdir = saved


def _to(xs: list, device: str) -> list:
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]


def _cpu(xs: list) -> list:
    return [x.detach().to("cpu") if isinstance(x, torch.Tensor) else x for x in xs]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


# ---- seeds ----------------------------------------------------------------------------------
def call_seed(seed: int, trial: int) -> int:
    """The RNG seed set right before trial ``trial``'s forward call, in the reference worker and in
    the candidate's alike (KernelBench's harness does the same): a reference that draws random
    numbers (dropout in training mode) then gives the output that a candidate drawing the same
    stream gives. Distinct from the seeds the trial inputs were drawn with."""
    return seed + 1000 * (trial + 1) + 500


def seed_call(seed: int, device: str) -> None:
    """Seed every generator a forward call may draw from: torch's (CPU and each GPU), Python's, NumPy's."""
    manual_seed, cuda_seed, py_seed, np_seed = _seeders
    manual_seed(seed)
    if device.startswith("cuda"):
        cuda_seed(seed)
    py_seed(seed)
    np_seed(seed)


def _seeded_call(model, xs: list, device: str, seed: int, cpu: bool = True) -> tuple[list, str]:
    """One reference forward on ``xs`` under ``seed``: (outputs, on the CPU unless ``cpu`` is False; structure)."""
    seed_call(seed, device)
    outs, structure = flatten(model(*_to(xs, device)))
    return (_cpu(outs) if cpu else outs), structure


def _write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


# The process that started this worker (the evaluating parent); set in main().
_PARENT: int | None = None


def orphaned() -> bool:
    """The parent is gone (killed, Ctrl-C'd): nobody will read what this worker writes, and the
    GPU memory it holds is the next evaluation's. Every wait on the parent checks this."""
    return _PARENT is not None and os.getppid() != _PARENT


def _await_file(path: Path, timeout: float) -> str:
    """The text of a decision file the parent writes atomically; "" if it never comes. A worker
    whose parent died exits here at once."""
    deadline = _clock() + timeout
    while _clock() < deadline:
        try:
            return path.read_text().strip()
        except OSError:
            if orphaned():
                os._exit(3)
            time.sleep(0.01)
    return ""


def _gpu_uuid(device: str) -> str | None:
    if not device.startswith("cuda"):
        return None
    return str(getattr(torch.cuda.get_device_properties(torch.device(device)), "uuid", "") or "") or None


def _save_atomic(obj, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    _save(obj, tmp)
    os.replace(tmp, path)


def warm_profiler(device: str) -> float:
    """The profiler's one-time set-up in this process (CUPTI's, on a GPU: seconds), done on a tiny
    op so that the profiled calls later cost only themselves. Returns the seconds it took.

    Only ever in a profiling worker: a process that has run a profiler session launches kernels
    slower afterwards (benchmarks/probe_profiler_early.py), so a worker that times never does."""
    from torch.profiler import ProfilerActivity, profile
    t0 = _clock()
    cuda = device.startswith("cuda")
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as p:
        torch.zeros(8, device=device).add_(1)
        _sync(device)
    p.events()
    return _clock() - t0


_WARMED: dict[str, float] = {}


def _await_decision(out: Path, req: WorkerRequest) -> bool:
    """Outputs are on disk: wait for the parent's verdict before spending time on timing."""
    set_phase(out, "await")
    return _await_file(out / "decision", req.await_timeout) == "go"
