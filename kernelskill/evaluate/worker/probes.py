"""Modes that run no trials: ``ceilings`` (the device's measured roofline ceilings), ``machine``
(the GPU's facts) and ``ncu`` (one candidate call between cudaProfilerStart/Stop for Nsight Compute)."""
from __future__ import annotations

from pathlib import Path

import torch

from kernelskill.vocab import WorkerStatus
from kernelskill.evaluate.launch.request import WorkerRequest
from .core import _setup, set_phase
from .candidate import _candidate_model, _reference_data, mode_compile


def mode_ceilings(req: WorkerRequest, out: Path) -> dict:
    from kernelskill.evaluate.judge import roofline
    device = _setup(req)
    return {"status": WorkerStatus.ok, "ceilings": roofline.measure(device)}


def mode_machine(req: WorkerRequest, out: Path) -> dict:
    from kernelskill.evaluate import machine
    device = _setup(req)
    return {"status": WorkerStatus.ok, "gpu": machine.gpu_facts(device)}


def mode_ncu(req: WorkerRequest, out: Path) -> dict:
    """Run the candidate once between cudaProfilerStart/Stop, under ``ncu --profile-from-start off``."""
    device = _setup(req)
    _, _, init, trials, state = _reference_data(req)
    xs = trials.get(0)
    compiled = mode_compile(req, out)
    if compiled["status"] != WorkerStatus.ok:
        return compiled
    set_phase(out, "run")
    model, _ = _candidate_model(compiled.pop("module"), init, state, req, device)
    with torch.no_grad():
        for _ in range(2):               # JIT compiles, autotuning and lazy loads stay outside
            model(*xs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        model(*xs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    return {"status": WorkerStatus.ok, "build": compiled["build"]}
