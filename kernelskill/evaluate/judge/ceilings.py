"""The device's measured roofline ceilings: read from their cache, measured once in a worker,
and raised when eager (trusted library kernels) beats the floor they give.

Only a quiet measurement is cached: ceilings measured while other processes competed (``quality``
not "good") serve, labelled, the evaluations of this process for ``RECENT_S`` seconds, and are never
written; after that an evaluation measures again. A raise from eager's rate is stored only from an ``ok`` evaluation whose
timing was good. The tool's own background builds are paused while it measures."""
from __future__ import annotations

import dataclasses
import shutil
import time

import torch

from kernelskill.results import EvalResult
from kernelskill.vocab import Status
from ..build import own_builds
from . import quality, roofline
from ..cache import cache_root
from ..launch.isolation import run_worker
from ..options import Options, host_env, request, workdir


def ceilings_key(device: str, worker_env: dict) -> tuple[str, int | None]:
    """The ceilings cache key of this device (as the worker saw it), and the CPU threads it counts."""
    name = worker_env.get("gpu") if device.startswith("cuda") else host_env(device).cpu
    threads = worker_env.get("threads") if not device.startswith("cuda") else None
    return roofline.cache_key(name or "unknown", device, threads, torch.__version__), threads


# A measurement under load serves this process's next evaluations for this long (in memory only,
# labelled): measuring again at every evaluation of a busy machine cost seconds each time, and
# every new measurement was under load again (figures: docs/evaluator.md, "Measurements behind the code").
RECENT_S = 120.0
_RECENT: dict[tuple[str, str], tuple[float, dict]] = {}


def good(data: dict | None) -> bool:
    """Ceilings measured on a quiet machine (the only ones cached)."""
    return bool(data) and data.get("quality", "good") == "good"


def ceilings(device: str, worker_env: dict, opts: Options, refresh: bool = False) -> dict:
    """This device's measured ceilings: from the cache, or measured (in a worker) and cached when the
    measurement was quiet. One taken under load is returned (its ``quality`` says so), kept in
    memory for this process's evaluations of the next ``RECENT_S`` seconds, and not cached; asked to measure again (``refresh``), a good cached record
    is kept over a measurement under load."""
    key, threads = ceilings_key(device, worker_env)
    hit = roofline.cached(cache_root(), key)
    if not good(hit):
        hit = None            # a record stored under load (before this rule): measured again
    if hit and not refresh:
        return hit
    mine = (str(cache_root()), key)              # another cache (a test's own) measures its own
    recent = _RECENT.get(mine)
    if recent and not refresh and time.monotonic() - recent[0] < RECENT_S:
        return {**recent[1], "reused_s": round(time.monotonic() - recent[0], 1)}
    # A quiet machine: the tool's own background builds (precompiled headers) are paused meanwhile.
    paused = own_builds.pause()
    base = workdir(opts)
    try:
        out = run_worker(request("ceilings", None, None, device, dataclasses.replace(opts, threads=threads), base),
                         opts, keep=base)
    finally:
        if paused:
            own_builds.resume()
        shutil.rmtree(base, ignore_errors=True)
    if out.failure():
        return hit or {}
    new = dict(out.result.ceilings)
    if paused:
        new["own_builds_paused"] = quality.paused_text(paused, "the measurement")
    if not good(new):
        # Under load: labelled, never cached; this process's next evaluations reuse it for RECENT_S.
        new = {**new, "cached": False}
        if not hit:
            _RECENT[mine] = (time.monotonic(), new)
        return hit or new
    roofline.store(cache_root(), key, new)
    _RECENT.pop(mine, None)
    return new


def store_raised_ceiling(result: EvalResult, device: str, worker_env: dict, measured: dict) -> None:
    """Eager ran faster than its floor (verdict._roofline raised the ceiling it beat): store the
    raise in the cached ceilings, so later evaluations measure against it. Only from an evaluation
    whose status is ok (eager ran beside the candidate, and a flagged one may have touched it), whose
    timing was good (eager's rate under load is no ceiling), and onto ceilings measured quietly."""
    prof = result.profile
    raised = prof.roofline.raised_ceiling if prof is not None and prof.roofline is not None else None
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
