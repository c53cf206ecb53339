"""The device's measured roofline ceilings: read from their cache, measured once in a worker,
and raised when eager (trusted library kernels) beats the floor they give."""
from __future__ import annotations

import dataclasses
import shutil

import torch

from ..results import EvalResult
from ..vocab import Status, WorkerStatus
from . import roofline
from .build import cache_root
from .isolation import run_worker
from .options import Options, host_env, request, workdir


def ceilings_key(device: str, worker_env: dict) -> tuple[str, int | None]:
    """The ceilings cache key of this device (as the worker saw it), and the CPU threads it counts."""
    name = worker_env.get("gpu") if device.startswith("cuda") else host_env(device).cpu
    threads = worker_env.get("threads") if not device.startswith("cuda") else None
    return roofline.cache_key(name or "unknown", device, threads, torch.__version__), threads


def ceilings(device: str, worker_env: dict, opts: Options, refresh: bool = False) -> dict:
    """This device's measured ceilings: from the cache, or measured once (in a worker) and cached."""
    key, threads = ceilings_key(device, worker_env)
    hit = roofline.cached(cache_root(), key)
    if hit and not refresh and not roofline.stale(hit):
        return hit
    base = workdir(opts)
    out = run_worker(request("ceilings", None, None, device, dataclasses.replace(opts, threads=threads), base),
                     build_timeout=opts.build_timeout, run_timeout=opts.run_timeout, keep=base, cancel=opts.cancel)
    shutil.rmtree(base, ignore_errors=True)
    if not out.result or out.result.status != WorkerStatus.ok:
        return hit or {}
    new = out.result.ceilings
    # Asked to measure again: the new values replace the old. Re-measured because the old ones
    # were taken under load: the higher of each is kept.
    data = new if (refresh or not hit) else roofline.merge(hit, new)
    roofline.store(cache_root(), key, data)
    return data


def store_raised_ceiling(result: EvalResult, device: str, worker_env: dict, measured: dict) -> None:
    """Eager ran faster than its floor (verdict._roofline raised the ceiling it beat): store the
    raise in the cached ceilings, so later evaluations measure against it. Only from an evaluation
    whose status is ok: eager ran beside the candidate, and a flagged one may have touched it."""
    prof = result.profile
    raised = (prof.roofline or {}).get("raised_ceiling") if prof is not None else None
    if not raised:
        return
    if result.status != Status.ok:
        raised["stored"] = False
        prof.notes.append(f"roofline: the raised {raised['ceiling']} ceiling is not stored: the evaluation is "
                          f"{result.status}")
        return
    key, _ = ceilings_key(device, worker_env)
    # Re-read the cache: another evaluation may have stored (or raised) it since this one began.
    current = roofline.cached(cache_root(), key) or measured
    roofline.store(cache_root(), key, roofline.raise_ceiling(current, raised["ceiling"], raised["to"]))
    raised["stored"] = True
