"""The device's measured roofline ceilings: read from their cache, measured once in a worker,
and raised when eager (trusted library kernels) beats the floor they give.

Only a quiet measurement is cached: ceilings measured while other processes competed (``quality``
not "good") serve the evaluation that measured them, labelled, and are never written; the next
evaluation measures again. A raise from eager's rate is stored only from an ``ok`` evaluation whose
timing was good. The tool's own background builds are paused while it measures."""
from __future__ import annotations

import dataclasses
import shutil

import torch

from ..results import EvalResult
from ..vocab import Status, WorkerStatus
from . import own_builds, quality, roofline
from .build import cache_root
from .isolation import run_worker
from .options import Options, host_env, request, workdir


def ceilings_key(device: str, worker_env: dict) -> tuple[str, int | None]:
    """The ceilings cache key of this device (as the worker saw it), and the CPU threads it counts."""
    name = worker_env.get("gpu") if device.startswith("cuda") else host_env(device).cpu
    threads = worker_env.get("threads") if not device.startswith("cuda") else None
    return roofline.cache_key(name or "unknown", device, threads, torch.__version__), threads


def good(data: dict | None) -> bool:
    """Ceilings measured on a quiet machine (the only ones cached)."""
    return bool(data) and data.get("quality", "good") == "good"


def ceilings(device: str, worker_env: dict, opts: Options, refresh: bool = False) -> dict:
    """This device's measured ceilings: from the cache, or measured (in a worker) and cached when the
    measurement was quiet. One taken under load is returned for this evaluation only (its
    ``quality`` says so) and not cached; asked to measure again (``refresh``), a good cached record
    is kept over a measurement under load."""
    key, threads = ceilings_key(device, worker_env)
    hit = roofline.cached(cache_root(), key)
    if not good(hit):
        hit = None            # a record stored under load (before this rule): measured again
    if hit and not refresh:
        return hit
    # A quiet machine: the tool's own background builds (precompiled headers) are paused meanwhile.
    paused = own_builds.pause()
    base = workdir(opts)
    try:
        out = run_worker(request("ceilings", None, None, device, dataclasses.replace(opts, threads=threads), base),
                         build_timeout=opts.build_timeout, run_timeout=opts.run_timeout, keep=base, cancel=opts.cancel)
    finally:
        if paused:
            own_builds.resume()
        shutil.rmtree(base, ignore_errors=True)
    if not out.result or out.result.status != WorkerStatus.ok:
        return hit or {}
    new = dict(out.result.ceilings)
    if paused:
        new["own_builds_paused"] = quality.paused_text(paused, "the measurement")
    if not good(new):
        # Under load: used by this evaluation at most, labelled; never cached, so the next one measures again.
        return hit or {**new, "cached": False}
    roofline.store(cache_root(), key, new)
    return new


def store_raised_ceiling(result: EvalResult, device: str, worker_env: dict, measured: dict) -> None:
    """Eager ran faster than its floor (verdict._roofline raised the ceiling it beat): store the
    raise in the cached ceilings, so later evaluations measure against it. Only from an evaluation
    whose status is ok (eager ran beside the candidate, and a flagged one may have touched it), whose
    timing was good (eager's rate under load is no ceiling), and onto ceilings measured quietly."""
    prof = result.profile
    raised = (prof.roofline or {}).get("raised_ceiling") if prof is not None else None
    if not raised:
        return
    why = (f"the evaluation is {result.status}" if result.status != Status.ok else
           f"eager's rate was measured {prof.quality.verdict}" if prof.quality is not None and not prof.quality.good
           else None)
    key, _ = ceilings_key(device, worker_env)
    # Re-read the cache: another evaluation may have stored (or raised) it since this one began.
    current = roofline.cached(cache_root(), key) or measured
    if why is None and not good(current):
        why = f"the ceilings it raises were measured under load ({current.get('quality')})"
    if why is not None:
        raised["stored"] = False
        prof.notes.append(f"roofline: the raised {raised['ceiling']} ceiling is not stored: {why}")
        return
    roofline.store(cache_root(), key, roofline.raise_ceiling(current, raised["ceiling"], raised["to"]))
    raised["stored"] = True
