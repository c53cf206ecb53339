"""Modes ``run``, ``profile`` and ``race``: the candidate's trials, timed against eager (and
torch.compile), profiled, or several verified candidates re-timed head to head."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

from kernelskill.evaluate.build import extensions as _build
from . import guards
from . import handoff
from .timing import TimingConfig, fresh_allocations, merge_rounds, time_pair
from kernelskill.vocab import RECHECK_PHASE, ProfileMode, WorkerStatus
from kernelskill.evaluate.launch.request import WorkerRequest
from .core import (
    _Tensor, _WARMED, _await_decision, _await_file, _clock, _cpu, _equal, _gpu_uuid, _isnan, _save, _save_atomic,
    _setup, _sync, _write_json_atomic, call_seed, compile_tempdir, flatten, seed_call, set_phase, warm_profiler)
from .candidate import _buildlog, _candidate_model, _reference_data, _reference_model, import_candidate, mode_compile


def mode_run(req: WorkerRequest, out: Path) -> dict:
    device = _setup(req)
    task, mod, init, trials, state = _reference_data(req)
    meta = trials.meta
    dists = meta.distributions
    ref_model = _reference_model(task, mod, init, state, req, device)
    compiled_ref, compile_info = _compile_baseline(req, ref_model, trials.get(0), device)
    before = guards.backend_flags()
    # The timed calls rotate through the first task trials, as many as the memory plan holds.
    rotate = max(1, min(cfg_rotate(req), meta.plan.get("rotate", 3)))

    compiled = mode_compile(req, out)
    if compiled["status"] != WorkerStatus.ok:
        return compiled
    module = compiled.pop("module")
    set_phase(out, "run")
    t0 = _clock()
    model, aligned = _candidate_model(module, init, state, req, device)
    checks, sets = [], []
    # The memory plan's large outputs: compared by the reference worker in the memory they are in
    # (the GPU's through CUDA IPC, a CPU's shared), not written (handoff.py).
    shares = meta.recompute
    with torch.no_grad():
        for i in range(len(trials)):
            xs = trials.get(i)          # one trial on the device at a time (a level-1 task: gigabytes)
            clones = [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]
            guards.poison(device, req.poison_bytes, req.poison_sizes or ())
            seed_call(call_seed(req.seed, i), device)    # as before the reference's call on these inputs
            t_call = _clock()
            result = model(*clones)
            _sync(device)
            if i == 0:     # the first call: Triton kernels compile here
                first_call_ms = (_clock() - t_call) * 1e3
            flat, structure = flatten(result)
            checks.append(guards.output_checks(flat, structure, xs, clones, model, _Tensor, _equal, _isnan))
            # One file per trial, complete when it appears: the parent compares trial i while
            # this process runs trial i + 1. Outputs too large to store stay on the GPU: shared
            # with the reference worker, held until the parent says they were compared.
            del clones, result
            if shares and _share({str(i): flat}, device, out / f"cand_ipc_{i}.json"):
                _await_file(out / f"ack_{i}", req.await_timeout)
            else:
                _save_atomic(_cpu([o if isinstance(o, _Tensor) else torch.tensor(float("nan")) for o in flat]),
                             out / f"cand_outputs_{i}.pt")
            if dists[i] == "task" and len(sets) < rotate:
                sets.append(xs)
            del xs, flat
    verify_s = _clock() - t0
    res = {"status": WorkerStatus.ok, "build": compiled["build"], "checks": checks, "aligned": aligned,
           "verify_seconds": verify_s, "pid": os.getpid(), "gpu_uuid": _gpu_uuid(device), "flags_after": guards.flag_changes(before, guards.backend_flags())}
    (out / "checks.json").write_text(json.dumps(res, default=str))
    if req.timing and _await_decision(out, req):
        cfg = TimingConfig(**req.timing)
        models = {"eager": ref_model, "candidate": model}
        if compiled_ref is not None:
            models["compile"] = compiled_ref
        # A reference that draws random numbers: each timed call is seeded as its input set's trial
        # was (set i is trial i), so the timed outputs can be re-checked against the reference.
        reseed = (lambda idx: seed_call(call_seed(req.seed, idx), device)) if meta.random else None
        t1 = _clock()
        timed, rounds = _timing_rounds(models, sets, device, cfg, out, reseed, keep=("candidate",))
        t2 = _clock()
        last = {idx: flatten(o)[0] for idx, o in timed["last_outputs"]["candidate"].items()}
        shared = shares and _share({str(idx): o for idx, o in last.items()}, device, out / "timed_ipc.json")
        if not shared:
            _save({idx: _cpu(o) for idx, o in last.items()}, out / "timed_outputs.pt")
        _write_json_atomic(out / "timed_keys.json", sorted(last))
        t3 = _clock()
        res["timing"] = {"times": timed["times"], "reps": timed["reps"], "threads": torch.get_num_threads(),
                         "first_call_ms": first_call_ms, "compile": compile_info, "rounds": rounds,
                         "spin_ms": timed.get("spin_ms"),
                         "chosen_round": timed["round"], "chosen_rounds": timed["rounds_used"],
                         "flush_l2": cfg.flush_l2}
        if req.profile != ProfileMode.off:
            # The parent re-checks the timed outputs while the profiler runs: here, or in
            # a profiling worker that waited for this phase with CUPTI set up ("apart").
            set_phase(out, "profile")
        elif shared:
            set_phase(out, RECHECK_PHASE)      # no profile: the shared outputs are re-checked now
        if req.profile == ProfileMode.here:
            res["kernels"] = guards.kernel_breakdown(model, sets[0], device, Path(req.candidate_path).read_text())
        t4 = _clock()
        if shared:       # the shared timed outputs live until the parent has re-checked them
            _await_file(out / "timed_checked", req.await_timeout)
        # Where the worker's time went (the cost figures in docs/evaluator.md).
        res["timing"]["cost_s"] = {"timing": round(t2 - t1, 3), "save_timed_outputs": round(t3 - t2, 3),
                                   "profile": round(t4 - t3, 3), "await_recheck": round(_clock() - t4, 3)}
        res["flags_after"] = guards.flag_changes(before, guards.backend_flags())
    return res


def _share(sets: dict, device: str, path: Path) -> bool:
    """Share each set of outputs with the reference worker in the memory they are in (handoff.py):
    their description, by key, in the JSON file ``path``. False, and nothing written, when one
    cannot be shared (the caller writes the file instead). On a GPU the cached blocks go back
    first: the reference worker recomputes beside this process."""
    described = {key: handoff.describe(outs, _Tensor, device) for key, outs in sets.items()}
    if any(d is None for d in described.values()):
        return False
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    _write_json_atomic(path, {"sets": described})
    return True


def _timing_rounds(models: dict, sets: list, device: str, cfg: TimingConfig, out: Path,
                   reseed=None, keep=None) -> tuple[dict, int]:
    """Time the models; after each round the parent judges its quality and answers ``again D``
    (wait D seconds, time again on fresh allocations of the inputs) or ``done K[,K2…]`` (report
    those rounds, their samples merged). Returns that timing and the number of rounds. Each
    round's samples go to ``timing_K.json`` for the parent."""
    kept, k, idle = [], 0, True
    most = cfg.min_rounds(device) + cfg.retimes
    while True:
        set_phase(out, "time")
        if kept:                 # only the newest round's outputs are held (a large task's are gigabytes)
            kept[-1]["last_outputs"] = None
            fresh_allocations(sets)
        timed = time_pair(models, sets, device, cfg, reseed=reseed, idle=idle, keep=keep)
        kept.append(timed)
        _write_json_atomic(out / f"timing_{k}.json", {"times": timed["times"], "reps": timed["reps"]})
        set_phase(out, "timed")
        answer = _await_file(out / f"round_{k}", cfg.time_cap_s * 4 + 600).split()
        if answer and answer[0] == "again" and k + 1 < most:
            wait = min(float(answer[1]) if len(answer) > 1 else 0.0, 60.0)
            time.sleep(wait)
            idle = wait > 0.05          # right after a round the GPU is warm: a short warm-up will do
            k += 1
            continue
        picks = [int(x) for x in answer[1].split(",") if x.isdigit() and int(x) <= k] \
            if len(answer) > 1 and answer[0] == "done" else []
        picks = picks or [k]
        # The reported rounds' times; the last round's timed outputs, re-checked by the parent (any
        # round's calls must match the reference, so the newest stands for all of them).
        times = merge_rounds([kept[i]["times"] for i in picks])
        return {"times": times, "reps": sum(kept[i]["reps"] for i in picks), "spin_ms": timed.get("spin_ms"),
                "last_outputs": timed["last_outputs"], "round": picks[0], "rounds_used": picks}, k + 1


def mode_profile(req: WorkerRequest, out: Path) -> dict:
    """The kernel breakdown, in a process of its own: set up the profiler and load the candidate
    while the timing worker verifies and times, wait for its go, then profile a few calls."""
    device = _setup(req)
    warm_s = _WARMED.get(device)
    if warm_s is None:
        warm_s = _WARMED[device] = warm_profiler(device)
    task, mod, init, trials, state = _reference_data(req)
    if req.build_after:
        # The run worker builds first; this one then loads its extension from the cache (if it
        # never says so, this one builds after the wait, itself).
        set_phase(out, "build")
        _await_file(Path(req.build_after), float(req.build_wait_s))
    compiled = mode_compile(req, out)
    if compiled["status"] != WorkerStatus.ok:
        return compiled
    if not _await_decision(out, req):
        return {"status": WorkerStatus.stopped, "build": compiled["build"]}
    set_phase(out, "profile")
    t0 = _clock()
    model, _ = _candidate_model(compiled.pop("module"), init, state, req, device)
    kernels = guards.kernel_breakdown(model, trials.get(0), device, Path(req.candidate_path).read_text())
    return {"status": WorkerStatus.ok, "build": compiled["build"], "kernels": kernels,
            "cost_s": {"profiler_setup": round(warm_s, 3), "profile": round(_clock() - t0, 3)}}


def mode_race(req: WorkerRequest, out: Path) -> dict:
    """Candidates verified before, timed head to head: eager and each of them, interleaved, in
    rounds the parent judges like an evaluation's. Each candidate's timed outputs are written for
    the parent to re-check (``timed_outputs_c{i}.pt``)."""
    device = _setup(req)
    task, mod, init, trials, state = _reference_data(req)
    meta = trials.meta
    dists = meta.distributions
    models = {"eager": _reference_model(task, mod, init, state, req, device)}
    reseed = (lambda idx: seed_call(call_seed(req.seed, idx), device)) if meta.random else None
    set_phase(out, "build")
    log = _build.BuildLog()
    for i, path in enumerate(req.candidate_paths):
        try:
            module = import_candidate(req, log, path, f"candidate_{i}")
        except Exception as e:  # noqa: BLE001 — a candidate that built before fails to now: data
            return {"status": WorkerStatus.compile_error, "error": f"candidate {i}: {type(e).__name__}: {e}"[:1000],
                    "build": _buildlog(log)}
        models[f"c{i}"], _ = _candidate_model(module, init, state, req, device)
    set_phase(out, "run")
    rotate = max(1, min(cfg_rotate(req), meta.plan.get("rotate", 3)))
    sets = [trials.get(i) for i, d in enumerate(dists) if d == "task"][:rotate]
    (out / "checks.json").write_text(json.dumps({"pid": os.getpid(), "gpu_uuid": _gpu_uuid(device)}))
    timed, rounds = _timing_rounds(models, sets, device, TimingConfig(**req.timing), out, reseed,
                                   keep=[n for n in models if n != "eager"])
    for name, outs in timed["last_outputs"].items():
        if name != "eager":
            _save({idx: _cpu(flatten(o)[0]) for idx, o in outs.items()}, out / f"timed_outputs_{name}.pt")
            _write_json_atomic(out / "timed_keys.json", sorted(outs))
    return {"status": WorkerStatus.ok, "build": _buildlog(log),
            "timing": {"times": timed["times"], "reps": timed["reps"], "threads": torch.get_num_threads(),
                       "rounds": rounds, "chosen_round": timed["round"], "chosen_rounds": timed["rounds_used"]}}


def cfg_rotate(req: WorkerRequest) -> int:
    return int((req.timing or {}).get("rotate", 3))


def _compile_baseline(req: WorkerRequest, ref_model, xs: list, device: str):
    """torch.compile of the reference, compiled (first call) before any candidate code loads.

    Inductor's artifacts persist in the cache directory the parent names (TORCHINDUCTOR_CACHE_DIR),
    so a task is compiled once per environment. A failure is a note, never the candidate's fault.
    """
    if req.baseline not in ("compile", "both") or not req.timing:
        return None, None
    t0 = _clock()
    # No candidate code has run yet: the compile runs in the temporary folder the workers share
    # (Inductor's precompiled header lies there; Inductor locks it).
    try:
        with compile_tempdir(req.cache_root):
            compiled = torch.compile(ref_model)
            with torch.no_grad():
                seed_call(call_seed(req.seed, 0), device)
                got, _ = flatten(compiled(*xs))
                seed_call(call_seed(req.seed, 0), device)
                want, _ = flatten(ref_model(*xs))
            _sync(device)
    except Exception as e:  # noqa: BLE001
        return None, {"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}
    agree = all(isinstance(g, torch.Tensor) and g.shape == w.shape and
                bool(torch.allclose(g.float(), w.float(), atol=1e-2, rtol=1e-2)) for g, w in zip(got, want))
    return compiled, {"ok": True, "seconds": round(_clock() - t0, 3), "agrees_with_eager": agree}
