"""compile(), verify(), profile(), evaluate(), machine(): what the CLI, optimizer, TUI and MCP server call.

Candidate code never runs in this process: workers do (``isolation.run_worker``); the modules
below decide the verdict from the data they send back. One evaluation's steps are
``evaluation.Evaluation``'s; the evaluator's other public names are re-exported here.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import time
from typing import Callable

from ..candidate import Candidate
from ..errors import UserError
from ..results import EvalResult
from ..vocab import Status
from . import machine as mach
from .cache import cache_root, store_json
from .judge.ceilings import ceilings, store_raised_ceiling
from .build.step import check_triton, compile, user_paths
from .evaluation import Evaluation
from .launch.isolation import run_worker
from .options import BASELINES, Options, request, resolve, resolve_device, worker_threads, workdir
from .reference import PROTOCOL, RefServer, reference, reference_dir, reference_key, reference_server
from .shapes import generalize

__all__ = ["BASELINES", "PROTOCOL", "Options", "RefServer", "ceilings", "check_triton", "compile", "evaluate",
           "machine", "profile", "reference", "reference_dir", "reference_key", "reference_server", "resolve_device",
           "store_raised_ceiling", "user_paths", "verify"]


def evaluate(task, candidate, *, opts: Options | None = None, on_phase: Callable[[str], None] | None = None,
             **overrides) -> EvalResult:
    """compile → verify → time → profile one candidate against its task; every failure is data."""
    opts = dataclasses.replace(opts or Options(), **overrides)
    task, cand = resolve(task, candidate)
    result = Evaluation(task, cand, opts, on_phase).run()
    if opts.shapes and result.ok:
        _check_shapes(task, cand, opts, result, on_phase)
    return result


def _check_shapes(task, cand, opts: Options, result: EvalResult, on_phase) -> None:
    """``opts.shapes``: the correct candidate checked at derived shapes; a wrong value or a crash at
    any of them fails the verdict, a clean refusal is a label (evaluate.shapes)."""
    if on_phase:
        on_phase("shapes")

    def say(i: int, n: int, label: str) -> None:
        if opts.on_step:
            opts.on_step(f"shape {i + 1} of {n}: {label}")
    s = result.shapes = generalize(task, cand, dataclasses.replace(opts, shapes=None), evaluate, opts.shapes,
                                   timed=opts.shapes_timed, on_shape=say)
    if s.generalizes == "no":
        bad = next(c for c in s.shapes if c.verdict in ("incorrect", "crashed"))
        result.status = Status.incorrect if bad.verdict == "incorrect" else Status.runtime_error
        result.message = f"correct at the task's sizes, but {s.summary}"


def verify(task, candidate, **kw) -> EvalResult:
    """Correctness only: compile and the trials, no timing."""
    return evaluate(task, candidate, timing=None, profile=False, **kw)


def profile(task, candidate=None, **kw) -> EvalResult:
    """Timing and kernel breakdown of a candidate (or of the reference itself when None)."""
    task, cand = resolve(task, candidate)
    if cand is None:
        cand = Candidate.from_source(task.source + "\n\nModelNew = Model\n")
    return evaluate(task, cand, **kw)


def machine(device: str, opts: Options | None = None, refresh: bool = False) -> dict:
    """What the agents are told about this machine (``evaluate.machine``): the CPU and, for a GPU
    device, the GPU's facts, read once and cached per machine; the measured ceilings from their own
    cache (measured now when there are none), so a raised ceiling shows at once."""
    opts = opts or Options(device=device)
    path = cache_root() / "machine" / f"{mach.cache_key(device)}.json"
    profile = None
    if not refresh:
        try:
            profile = json.loads(path.read_text())
        except (OSError, ValueError):
            profile = None
        if not isinstance(profile, dict) or profile.get("version") != mach.MACHINE_VERSION:
            profile = None
    if profile is None:
        profile = {"version": mach.MACHINE_VERSION, "device": device,
                   "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"), "cpu": mach.cpu_facts()}
        if device.startswith("cuda"):
            base = workdir(opts)
            out = run_worker(request("machine", None, None, device, opts, base), opts, keep=base)
            shutil.rmtree(base, ignore_errors=True)
            reply = out.result
            why = out.failure()
            if why:
                raise UserError(f"cannot read the GPU's properties on {device}: {why}")
            profile["gpu"], profile["env"] = reply.gpu, reply.env
        else:
            profile["env"] = {"threads": worker_threads(opts)}
        store_json(path, profile)
    profile["ceilings"] = ceilings(device, profile.get("env") or {}, opts)
    return profile
