"""The isolated worker: the only process that imports candidate code.

``python -m kernelskill.evaluate.worker REQUEST.json`` — modes:
  reference  run the task's reference on seeded inputs; save inputs, outputs, weights (no candidate)
  compile    import the candidate (its load_inline builds run through the build cache)
  run        import the candidate, run the trials, time it against eager, profile it

It sends tensors and raw numbers back through files; verdicts are decided by the parent.
Everything the checks rely on is captured before the candidate is imported.
"""
from __future__ import annotations

import importlib.util
import json
import os
import random
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

# Captured before any candidate code exists in this process.
_Tensor = torch.Tensor
_equal = torch.equal
_isnan = torch.isnan
_save = torch.save
_clock = time.perf_counter
_seeders = (torch.manual_seed, torch.cuda.manual_seed, random.seed, np.random.seed)

from kernelskill.evaluate import build as _build  # noqa: E402
from kernelskill.evaluate import flags as _flags  # noqa: E402
from kernelskill.evaluate import guards  # noqa: E402
from kernelskill.evaluate import handoff  # noqa: E402
from kernelskill.evaluate import lifeline  # noqa: E402
from kernelskill.evaluate import trials as trials_mod  # noqa: E402
from kernelskill.errors import tail  # noqa: E402
from kernelskill.evaluate.timing import TimingConfig, fresh_allocations, merge_rounds, time_pair  # noqa: E402
from kernelskill.task import Task, _Expr  # noqa: E402
from kernelskill.vocab import RECHECK_PHASE, WorkerStatus  # noqa: E402

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


def _load_task(req: dict) -> Task:
    over = {k: (_Expr(v["expr"]) if isinstance(v, dict) else v) for k, v in req["task"]["overrides"].items()}
    return Task.load(req["task"]["path"], preset=req["task"].get("preset"), overrides=over)


# The backend flags this worker set up, before any candidate code ran (reported in its env).
_SET_FLAGS: dict = {}


def _setup(req: dict) -> str:
    device = req["device"]
    threads = req.get("threads")
    if threads:
        torch.set_num_threads(threads)
    if device.startswith("cuda:"):
        # The pool names GPUs by index (cuda:N). CUDA events, torch.cuda.synchronize() and the
        # current stream belong to the current device: left at GPU 0 they bracket none of the work
        # on GPU N, and the timings were the host's launch times (KernelBench on a 4-GPU H100 pool:
        # eager below its roofline floor on cuda:1 and cuda:2, 0.00 ms medians with torch.compile).
        torch.cuda.set_device(torch.device(device))
    # The user's backend flags (PyTorch's defaults unless the task or --flags strict say otherwise):
    # eager, torch.compile and the candidate run under them; the reference's outputs do not (strict).
    _flags.apply(req.get("flags") or {})
    _SET_FLAGS.clear()
    _SET_FLAGS.update(_flags.current())
    limit = req.get("memory_limit")
    if limit and not device.startswith("cuda"):
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return device


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


# ---- reference ------------------------------------------------------------------------------
def mode_reference(req: dict, out: Path) -> dict:
    """Seeded trials of the reference, one at a time under a memory plan (trials.py): each trial's
    inputs and outputs are written to their own file, or not at all when they are regenerated from
    seeds / recomputed on demand. Trial 0 is kept for the randomness checks."""
    device = _setup(req)
    cost, t = {}, _clock()

    def took(step: str) -> None:        # where the reference's seconds go: meta["plan"]["cost_s"]
        nonlocal t
        now = _clock()
        cost[step] = round(cost.get(step, 0.0) + now - t, 3)
        t = now

    task = _load_task(req)
    mod = task.module()
    init = task.init_inputs(mod)
    seed, n = req["seed"], req["trials"]
    cuda = device.startswith("cuda")
    took("load")
    torch.manual_seed(seed)
    model = task.build_model(mod, init=init).to(device)
    took("model")
    param_bytes = trials_mod.nbytes(list(model.state_dict().values()))
    strict = req.get("strict_flags") or _flags.STRICT
    # The reference's outputs are the strict ones (TF32 off everywhere): what correctness compares
    # against. The user's eager (this worker's own flags) is run beside them to measure its distance.
    with torch.no_grad(), _flags.applied(strict):
        acc = Accuracy(model, device, dict(_SET_FLAGS), strict, task.tolerance, param_bytes, cuda)
        # On a GPU every trial is drawn there, stored or not: get_inputs() of a KernelBench level-1
        # task draws gigabytes, seconds per trial on one CPU thread (55_conv: 17 s of its 25 s).
        where = device if cuda else None
        # Trial 0: its footprint and one forward's peak decide the plan.
        first = _to(trials_mod.generate(task, mod, seed, 0, where), device)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        # The reference's own failure, with its file and line (out of memory is reported as before).
        with task.error_context("Model.forward", passing=(torch.OutOfMemoryError,)):
            outs0, structure = _seeded_call(model, first, device, call_seed(seed, 0), cpu=False)
        peak = (torch.cuda.max_memory_allocated() - base) if cuda else 0
        took("first_call")
        plan = trials_mod.make_plan(input_bytes=trials_mod.nbytes(first), output_bytes=trials_mod.nbytes(outs0),
                                    param_bytes=param_bytes, peak_bytes=peak, trials=n + 1, device=device,
                                    out_dir=out, rotate=int(req.get("rotate", 3)), store_limit=req.get("store_limit"))
        if not plan["fits"]:
            gb = lambda b: f"{b / 1e9:.1f} GB"  # noqa: E731
            return {"status": WorkerStatus.task_error, "plan": plan,
                    "error": f"{task.path}: one reference and one candidate forward need about {gb(plan['needs_bytes'])} "
                             f"of GPU memory and {device} has {gb(plan['gpu_free'])} free; use a smaller preset or "
                             f"--set, or a GPU with more memory"}
        if plan["inputs"] == "seeds":
            # Every worker draws these again from their seeds: they must come out the same.
            again = trials_mod.generate(task, mod, seed, 0, plan["generated_on"])
            same = len(again) == len(first) and all(
                _equal(a, b) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) else a == b
                for a, b in zip(_to(again, device), first))
            del again
            if not same:
                return {"status": WorkerStatus.task_error, "plan": plan,
                        "error": f"{task.path}: get_inputs() returns different tensors under the same torch seed, and "
                                 f"its inputs are too large to store for every trial; draw them with torch's "
                                 f"random functions (not numpy's or Python's), or lower the sizes with --set"}
        draw_on = plan["generated_on"] or where
        dists, finite, degenerate = [], True, guards.DegenerateCheck()
        took("plan")

        def keep(i: int, xs: list, outs: list, dist: str) -> None:
            dists.append(dist)
            if plan["inputs"] == "stored":
                _save(_cpu(xs), out / f"inputs_{i}.pt")
            if plan["outputs"] == "stored":
                _save(_cpu(outs), out / f"outputs_{i}.pt")

        for i in range(n):
            xs, outs = (first, outs0) if i == 0 else (None, None)
            if i:
                xs = _to(trials_mod.generate(task, mod, seed, i, draw_on), device)
                outs, _ = _seeded_call(model, xs, device, call_seed(seed, i), cpu=False)
            finite &= all(bool(torch.isfinite(o).all()) for o in outs if isinstance(o, torch.Tensor))
            degenerate.add(outs)
            keep(i, xs, outs, "task")
            acc.add(i, "task", xs, outs, call_seed(seed, i))
            if i:
                del xs, outs
        signed = trials_mod.signed_variant(first, seed + trials_mod.SIGNED_OFFSET, draw_on)
        outs, _ = _seeded_call(model, signed, device, call_seed(seed, n), cpu=False)
        # Only a distribution on which the reference stays finite says anything.
        if not finite or all(bool(torch.isfinite(o).all()) for o in outs if isinstance(o, torch.Tensor)):
            keep(n, signed, outs, "signed")
            acc.add(n, "signed", signed, outs, call_seed(seed, n))
        del signed, outs
        took("trials")
        stochastic, randomness = reference_randomness(model, first, outs0, device, seed, task.tolerance)
        took("randomness")
        accuracy = acc.report(random=bool(randomness))
        took("accuracy")
    plan["trials"] = len(dists)
    _save({k: v.detach().cpu() for k, v in model.state_dict().items()}, out / "state.pt")
    work = _work(task)
    took("state_and_work")
    plan["cost_s"] = cost
    return {"status": WorkerStatus.ok, "seed": seed, "distributions": dists, "output_bytes": plan["output_bytes"],
            "output_sizes": [o.numel() * o.element_size() for o in outs0 if isinstance(o, torch.Tensor)],
            "structure": structure, "degenerate": degenerate.reason(), "stochastic": stochastic,
            "random": randomness, "plan": plan, "accuracy": accuracy,
            "parameter_names": [n for n, _ in model.named_parameters()], **work}


class Accuracy:
    """The reference worker's two accuracy probes, trial by trial (trusted: no candidate code):

    - **eager**: how far the user's eager (PyTorch's default flags: TF32 convolutions on a GPU) is
      from the strict reference, per output, in multiples of the task's tolerance (correctness.
      deviation). The parent never holds a candidate to less than that (verdict.tolerances);
    - **fp64**: whether the strict fp32 reference itself meets the task's tolerance against a float64
      computation of the same model, where that is cheap (``FP64_CHECK_BYTES``, ``FP64_CHECK_S``).
      A long fp32 reduction over signed inputs can miss it: then no kernel that rounds differently
      from the reference can pass, and the result says so with the numbers."""

    FP64_CHECK_BYTES = {True: 1 << 30, False: 256 << 20}     # by GPU: float64 copies of params, inputs, outputs
    FP64_CHECK_S = 20.0                                       # stop checking once this much was spent

    def __init__(self, model, device: str, user: dict, strict: dict, tol: tuple, param_bytes: int, cuda: bool):
        self.model, self.device, self.user, self.tol, self.cuda = model, device, user, tol, cuda
        # Measured wherever the two sets differ, a CPU included (a task's own flags may matter there;
        # a CPU's default-flag eager is the strict one, and costs a forward per trial, cached).
        self.differ = any(user.get(k) != v for k, v in strict.items())
        self.eager: list[dict] | None = None
        self.param_bytes = param_bytes
        self.model64 = None
        self.fp64 = {"checked": 0, "misses": [], "note": ""}
        self._fp64_s = 0.0

    def add(self, trial: int, dist: str, xs: list, outs: list, seed: int) -> None:
        from kernelskill.evaluate.correctness import deviation
        tensors = [o for o in outs if isinstance(o, torch.Tensor)]
        if self.differ:
            try:
                with _flags.applied(self.user):
                    eager, _ = _seeded_call(self.model, xs, self.device, seed, cpu=False)
                devs = deviation([o for o in eager if isinstance(o, torch.Tensor)], tensors, *self.tol)
                del eager
                self.eager = devs if self.eager is None else [
                    {k: max(a.get(k, 0), b.get(k, 0)) for k in a.keys() | b.keys()} for a, b in zip(self.eager, devs)]
            except torch.OutOfMemoryError:
                self.differ = False
                self.eager = None
                self.fp64["eager_note"] = "the user's eager was not compared with the strict reference: out of memory"
        self._check_fp64(trial, dist, xs, tensors, seed)

    def _check_fp64(self, trial: int, dist: str, xs: list, outs: list, seed: int) -> None:
        from kernelskill.evaluate.correctness import compare_trial
        if self.fp64["note"] or not outs:          # a note: the check stopped for good
            return
        if not all(o.dtype == torch.float32 for o in outs):
            self.fp64["note"] = "not checked: the outputs are not float32"
            return
        big = 2 * (self.param_bytes + trials_mod.nbytes(xs) + trials_mod.nbytes(outs))
        if big > self.FP64_CHECK_BYTES[self.cuda]:
            self.fp64["note"] = f"not checked: a float64 copy needs {big / 1e9:.2f} GB"
            return
        if self._fp64_s > self.FP64_CHECK_S:
            self.fp64["note"] = f"checked on the first {self.fp64['checked']} trials (time limit)"
            return
        t0 = _clock()
        try:
            if self.model64 is None:
                import copy
                self.model64 = copy.deepcopy(self.model).double()
            xs64 = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]
            want, _ = _seeded_call(self.model64, xs64, self.device, seed, cpu=False)
            want = [w for w in want if isinstance(w, torch.Tensor)]
            res, lines = compare_trial(trial, seed, dist, [o.double() for o in outs], want, *self.tol)
        except Exception as e:  # noqa: BLE001 — an op without float64 support: no check, not a failure
            self.fp64["note"] = f"not checked: float64 failed ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
            self.model64 = None
            return
        finally:
            self._fp64_s += _clock() - t0
        self.fp64["checked"] += 1
        if not res.ok:
            self.fp64["misses"].append({"trial": trial, "distribution": dist, "check": res.check,
                                        "max_abs_err": res.max_abs_err, "max_rel_err": res.max_rel_err,
                                        "mismatch_fraction": res.mismatch_fraction,
                                        "message": lines.splitlines()[0] if lines else res.message})

    def report(self, random: bool) -> dict:
        """meta["accuracy"]: the eager deviation per output (None: not measured: the same flags) and
        the float64 check."""
        self.model64 = None
        fp64 = dict(self.fp64)
        if random:          # float64 draws other random numbers than float32: nothing to compare
            fp64 = {"checked": 0, "misses": [], "note": "not checked: the reference draws random numbers"}
        return {"eager_flags": self.user, "flags_differ": self.differ, "eager_deviation": self.eager, "fp64": fp64}


def reference_randomness(model, xs: list, first: list, device: str, seed: int, tol: tuple) -> tuple[str, str]:
    """(stochastic, random): why the reference differs from itself on the same inputs under the same
    seed (no candidate can be verified against it), and which random numbers it draws when only
    a different seed changes its output (a candidate must draw the same stream); "" for none."""
    s = call_seed(seed, 0)
    again, _ = _seeded_call(model, xs, device, s, cpu=False)      # compared where ``first`` lives
    diff = _difference(again, first, tol)
    del again
    if diff:
        return (f"run twice on the same inputs under the same seed, its outputs differ ({diff}); "
                f"nondeterministic atomics, a generator seeded from the clock or the OS, or "
                f"time-dependent code"), ""
    other, _ = _seeded_call(model, xs, device, s + 1, cpu=False)
    if not _difference(other, first, tol):
        return "", ""
    return "", guards.random_modules(model) or "it calls a random function (torch.rand, randn, bernoulli, …)"


def _difference(got: list, want: list, tol: tuple) -> str:
    """"" when two runs' tensor outputs agree within the task's tolerance, else what differs."""
    from kernelskill.evaluate.correctness import compare_trial
    keep = lambda outs: [o for o in outs if isinstance(o, torch.Tensor)]  # noqa: E731
    res, _ = compare_trial(0, 0, "task", keep(got), keep(want), *tol)
    if res.ok:
        return ""
    worst = f", max |diff| {res.max_abs_err:.3g}" if res.max_abs_err else ""
    return res.message + worst


def _work(task: Task) -> dict:
    """FLOPs, compulsory bytes and op classes of one forward, traced on meta tensors (nothing
    computed); the bench's reference rows take their op classes from here (one trace, not two:
    a recurrent network's costs seconds)."""
    from kernelskill.features import trace
    try:
        t = trace(task, fallback=False)
    except Exception as e:  # noqa: BLE001 — an op without a meta kernel: no roofline, not a failure
        return {"flops": None, "bytes": None, "work_note": f"FLOPs not traced: {type(e).__name__}: {e}"[:300]}
    return {"flops": t["flops"], "bytes": t["bytes"], "op_classes": t["op_classes"]}


# ---- candidate ------------------------------------------------------------------------------
def import_candidate(req: dict, log: _build.BuildLog, source_path: str | None = None,
                     name: str = "candidate_module"):
    """Import the candidate from a real file (Triton needs its source on disk)."""
    source = Path(source_path or req["candidate_path"]).read_text()
    out = Path(req["out_dir"]) if req.get("out_dir") else None
    _build.install(source, log, Path(req["cache_root"]) if req.get("cache_root") else None,
                   on_step=(lambda text: set_phase(out, "step " + text.replace("\n", " "))) if out else None,
                   direct=req.get("build", "direct") != "torch", cuda_arch=req.get("cuda_arch"))
    path = Path.cwd() / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _compile_failure(e: BaseException, log: _build.BuildLog, req: dict) -> dict:
    from kernelskill.results import Diagnostic
    if isinstance(e, _build.CompileOnly):
        return {"status": WorkerStatus.compile_only, "build": _buildlog(log)}
    if isinstance(e, _build.BuildFailed):
        return {"status": WorkerStatus.compile_error, "build": _buildlog(log), "error": str(e)}
    line, text = guards.candidate_line(e)
    if isinstance(e, SyntaxError) and e.filename and e.filename.endswith("candidate_module.py"):
        line, text = e.lineno, e.text or ""
    what = e.msg if isinstance(e, SyntaxError) else e      # the location goes in the diagnostic, not the text
    diag = Diagnostic("error", f"{type(e).__name__}: {what}".strip()[:1000], line=line, column=getattr(e, "offset", None)
                      if isinstance(e, SyntaxError) else None, source_line=text or "", origin="python")
    log.diagnostics.append(diag)
    log.log_tail = tail(traceback.format_exc())
    return {"status": WorkerStatus.compile_error, "build": _buildlog(log), "error": diag.message}


def _buildlog(log: _build.BuildLog) -> dict:
    from kernelskill.results import to_dict
    return to_dict(log)


def mode_compile(req: dict, out: Path) -> dict:
    _setup(req)
    log = _build.BuildLog()
    set_phase(out, "build")
    try:
        module = import_candidate(req, log)
    except Exception as e:  # noqa: BLE001 — any failure to import is the candidate's compile error
        return _compile_failure(e, log, req)
    if not isinstance(getattr(module, "ModelNew", None), type):
        from kernelskill.results import Diagnostic
        log.diagnostics.append(Diagnostic("error", "the candidate defines no class `ModelNew`", origin="python"))
        return {"status": WorkerStatus.compile_error, "build": _buildlog(log), "error": "no ModelNew"}
    return {"status": WorkerStatus.ok, "build": _buildlog(log), "module": module}


def _reference_data(req: dict):
    """The task, its module and constructor arguments, the trial inputs and the weights.

    ``trials.get(i)`` puts trial i on the device: memory-mapped from the reference cache, or
    regenerated from its seed (trials.py)."""
    ref_dir = Path(req["ref_dir"])
    task = _load_task(req)
    mod = task.module()
    init = task.init_inputs(mod)
    meta = json.loads((ref_dir / "meta.json").read_text())
    trials = trials_mod.TrialInputs(ref_dir, meta, task, mod, req["device"])
    state = torch.load(ref_dir / "state.pt", weights_only=True)
    return task, mod, init, trials, state


def _candidate_model(module, init: list, state: dict, req: dict, device: str):
    """ModelNew built under the reference's seed, weights aligned; (model, alignment report)."""
    torch.manual_seed(req["seed"])
    model = module.ModelNew(*init)
    aligned = guards.align_weights(model, state)
    return model.to(device), aligned


def _reference_model(task, mod, init: list, state: dict, req: dict, device: str):
    """The task's Model built under the reference's seed, with the cached weights, on the device."""
    torch.manual_seed(req["seed"])
    model = task.build_model(mod, init=init)
    model.load_state_dict(state)
    return model.to(device)


def mode_run(req: dict, out: Path) -> dict:
    device = _setup(req)
    task, mod, init, trials, state = _reference_data(req)
    meta = trials.meta
    dists = meta["distributions"]
    ref_model = _reference_model(task, mod, init, state, req, device)
    compiled_ref, compile_info = _compile_baseline(req, ref_model, trials.get(0), device)
    before = guards.backend_flags()
    # The timed calls rotate through the first task trials, as many as the memory plan holds.
    rotate = max(1, min(cfg_rotate(req), (meta.get("plan") or {}).get("rotate", 3)))

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
    shares = (meta.get("plan") or {}).get("outputs") == "recompute"
    with torch.no_grad():
        for i in range(len(trials)):
            xs = trials.get(i)          # one trial on the device at a time (a level-1 task: gigabytes)
            clones = [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]
            guards.poison(device, req.get("poison_bytes", 0), req.get("poison_sizes") or ())
            seed_call(call_seed(req["seed"], i), device)    # as before the reference's call on these inputs
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
                _await_file(out / f"ack_{i}", req.get("await_timeout", 600))
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
    if req.get("timing") and _await_decision(out, req):
        cfg = TimingConfig(**req["timing"])
        models = {"eager": ref_model, "candidate": model}
        if compiled_ref is not None:
            models["compile"] = compiled_ref
        # A reference that draws random numbers: each timed call is seeded as its input set's trial
        # was (set i is trial i), so the timed outputs can be re-checked against the reference.
        reseed = (lambda idx: seed_call(call_seed(req["seed"], idx), device)) if meta.get("random") else None
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
        if req.get("profile"):
            # The parent re-checks the timed outputs while the profiler runs: here (True), or in
            # a profiling worker that waited for this phase with CUPTI set up ("apart").
            set_phase(out, "profile")
        elif shared:
            set_phase(out, RECHECK_PHASE)      # no profile: the shared outputs are re-checked now
        if req.get("profile") is True:
            res["kernels"] = guards.kernel_breakdown(model, sets[0], device, Path(req["candidate_path"]).read_text())
        t4 = _clock()
        if shared:       # the shared timed outputs live until the parent has re-checked them
            _await_file(out / "timed_checked", req.get("await_timeout", 600))
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


def mode_profile(req: dict, out: Path) -> dict:
    """The kernel breakdown, in a process of its own: set up the profiler and load the candidate
    while the timing worker verifies and times, wait for its go, then profile a few calls."""
    device = _setup(req)
    warm_s = _WARMED.get(device)
    if warm_s is None:
        warm_s = _WARMED[device] = warm_profiler(device)
    task, mod, init, trials, state = _reference_data(req)
    if req.get("build_after"):
        # The run worker builds first; this one then loads its extension from the cache (if it
        # never says so, this one builds after the wait, itself).
        set_phase(out, "build")
        _await_file(Path(req["build_after"]), float(req.get("build_wait_s", 900.0)))
    compiled = mode_compile(req, out)
    if compiled["status"] != WorkerStatus.ok:
        return compiled
    if not _await_decision(out, req):
        return {"status": WorkerStatus.stopped, "build": compiled["build"]}
    set_phase(out, "profile")
    t0 = _clock()
    model, _ = _candidate_model(compiled.pop("module"), init, state, req, device)
    kernels = guards.kernel_breakdown(model, trials.get(0), device, Path(req["candidate_path"]).read_text())
    return {"status": WorkerStatus.ok, "build": compiled["build"], "kernels": kernels,
            "cost_s": {"profiler_setup": round(warm_s, 3), "profile": round(_clock() - t0, 3)}}


def mode_race(req: dict, out: Path) -> dict:
    """Candidates verified before, timed head to head: eager and each of them, interleaved, in
    rounds the parent judges like an evaluation's. Each candidate's timed outputs are written for
    the parent to re-check (``timed_outputs_c{i}.pt``)."""
    device = _setup(req)
    task, mod, init, trials, state = _reference_data(req)
    meta = trials.meta
    dists = meta["distributions"]
    models = {"eager": _reference_model(task, mod, init, state, req, device)}
    reseed = (lambda idx: seed_call(call_seed(req["seed"], idx), device)) if meta.get("random") else None
    set_phase(out, "build")
    log = _build.BuildLog()
    for i, path in enumerate(req["candidate_paths"]):
        try:
            module = import_candidate(req, log, path, f"candidate_{i}")
        except Exception as e:  # noqa: BLE001 — a candidate that built before fails to now: data
            return {"status": WorkerStatus.compile_error, "error": f"candidate {i}: {type(e).__name__}: {e}"[:1000],
                    "build": _buildlog(log)}
        models[f"c{i}"], _ = _candidate_model(module, init, state, req, device)
    set_phase(out, "run")
    rotate = max(1, min(cfg_rotate(req), (meta.get("plan") or {}).get("rotate", 3)))
    sets = [trials.get(i) for i, d in enumerate(dists) if d == "task"][:rotate]
    (out / "checks.json").write_text(json.dumps({"pid": os.getpid(), "gpu_uuid": _gpu_uuid(device)}))
    timed, rounds = _timing_rounds(models, sets, device, TimingConfig(**req["timing"]), out, reseed,
                                   keep=[n for n in models if n != "eager"])
    for name, outs in timed["last_outputs"].items():
        if name != "eager":
            _save({idx: _cpu(flatten(o)[0]) for idx, o in outs.items()}, out / f"timed_outputs_{name}.pt")
            _write_json_atomic(out / "timed_keys.json", sorted(outs))
    return {"status": WorkerStatus.ok, "build": _buildlog(log),
            "timing": {"times": timed["times"], "reps": timed["reps"], "threads": torch.get_num_threads(),
                       "rounds": rounds, "chosen_round": timed["round"], "chosen_rounds": timed["rounds_used"]}}


def mode_refserve(req: dict, out: Path) -> dict:
    """A trusted reference worker (no candidate code) for tasks whose outputs are not stored
    (memory plan ``recompute``). It answers the parent's request files until ``stop`` or the
    parent's death:

    The requests and answers are files in ``serve_dir`` (the parent's; this worker may be a spare
    started elsewhere), its phases in its own folder as every worker's.

    ``want_I``      trial I's reference outputs (under its call seed) → ``ref_I.pt``
    ``cmp_I_K.json`` {"file", "key", "trial", "seed", "dist", "atol", "rtol"}: a candidate's outputs
                    (a file the candidate's worker wrote, or its JSON description of outputs shared
                    in memory; ``key`` picks one entry of a dict, or one set of the description) loaded
                    straight to the device and compared there with trial I's reference outputs
                    → ``res_I_K.json`` (the TrialResult). Gigabytes never cross to the host twice.
    """
    from kernelskill.evaluate.correctness import compare_trial
    from kernelskill.results import to_dict
    device = _setup(req)
    _flags.apply(req.get("strict_flags") or _flags.STRICT)     # the reference's outputs are the strict ones
    task, mod, init, trials, state = _reference_data(req)
    model = _reference_model(task, mod, init, state, req, device)
    box = Path(req.get("serve_dir") or out)
    set_phase(out, "serve")
    served = 0
    with torch.no_grad():
        while not orphaned() and not (box / "stop").exists():
            wants = sorted(box.glob("want_*")) + sorted(box.glob("cmp_*.json"))
            if not wants:
                time.sleep(0.01)
                continue
            for w in wants:
                if w.name.startswith("want_"):
                    i = int(w.name.split("_")[1])
                    outs, _ = _seeded_call(model, trials.get(i), device, call_seed(req["seed"], i))
                    _save_atomic(outs, box / f"ref_{i}.pt")
                else:
                    ask = json.loads(w.read_text())
                    i = int(ask["trial"])
                    want, _ = _seeded_call(model, trials.get(i), device, call_seed(req["seed"], i), cpu=False)
                    try:
                        if ask["file"].endswith(".json"):     # shared in memory (handoff.py)
                            sets = json.loads(Path(ask["file"]).read_text())["sets"]
                            got = handoff.open_outputs(sets[str(ask["key"])], device)
                        else:
                            got = torch.load(ask["file"], weights_only=True, map_location=device)
                            if ask.get("key") is not None:
                                got = got[ask["key"]]
                            got = list(got)
                    except Exception as e:  # noqa: BLE001 — anything but plain tensors: the parent flags it
                        got, answer = None, {"unreadable": f"{type(e).__name__}: {e}"[:300]}
                    if got is not None:
                        args = (i, int(ask["seed"]), ask["dist"])
                        # One number, or one per output (verdict.tolerances).
                        tol = tuple([float(x) for x in t] if isinstance(t, list) else float(t)
                                    for t in (ask["atol"], ask["rtol"]))
                        try:
                            res, lines = compare_trial(*args, got, want, *tol)
                        except torch.OutOfMemoryError:
                            # Non-finite values take the exact (float64) path: on the host, which has room.
                            torch.cuda.empty_cache()
                            res, lines = compare_trial(*args, _cpu(got), _cpu(want), *tol)
                        answer = {"result": to_dict(res), "lines": lines}
                    del want
                    got = None                       # a shared output is released here, before the answer
                    if device.startswith("cuda"):
                        torch.cuda.synchronize()
                        torch.cuda.empty_cache()     # the candidate's worker shares this GPU
                    _write_json_atomic(box / w.name.replace("cmp_", "res_"), answer)
                w.unlink()
                served += 1
                set_phase(out, "serve")          # each answer restarts the phase's clock
    return {"status": WorkerStatus.ok, "served": served}


def cfg_rotate(req: dict) -> int:
    return int((req.get("timing") or {}).get("rotate", 3))


def _compile_baseline(req: dict, ref_model, xs: list, device: str):
    """torch.compile of the reference, compiled (first call) before any candidate code loads.

    Inductor's artifacts persist in the cache directory the parent names (TORCHINDUCTOR_CACHE_DIR),
    so a task is compiled once per environment. A failure is a note, never the candidate's fault.
    """
    if req.get("baseline", "eager") not in ("compile", "both") or not req.get("timing"):
        return None, None
    t0 = _clock()
    try:
        compiled = torch.compile(ref_model)
        with torch.no_grad():
            seed_call(call_seed(req["seed"], 0), device)
            got, _ = flatten(compiled(*xs))
            seed_call(call_seed(req["seed"], 0), device)
            want, _ = flatten(ref_model(*xs))
        _sync(device)
    except Exception as e:  # noqa: BLE001
        return None, {"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}
    agree = all(isinstance(g, torch.Tensor) and g.shape == w.shape and
                bool(torch.allclose(g.float(), w.float(), atol=1e-2, rtol=1e-2)) for g, w in zip(got, want))
    return compiled, {"ok": True, "seconds": round(_clock() - t0, 3), "agrees_with_eager": agree}


def mode_ceilings(req: dict, out: Path) -> dict:
    from kernelskill.evaluate import roofline
    device = _setup(req)
    return {"status": WorkerStatus.ok, "ceilings": roofline.measure(device)}


def mode_machine(req: dict, out: Path) -> dict:
    from kernelskill.evaluate import machine
    device = _setup(req)
    return {"status": WorkerStatus.ok, "gpu": machine.gpu_facts(device)}


def mode_ncu(req: dict, out: Path) -> dict:
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


def worker_env(device: str) -> dict:
    """What the numbers were measured on (the parent never initialises CUDA itself)."""
    env = {"threads": torch.get_num_threads(), "flags": dict(_SET_FLAGS)}
    if device.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(gpu=props.name, capability=f"{props.major}.{props.minor}")
        try:
            import subprocess
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            pass
    return env


def _await_decision(out: Path, req: dict) -> bool:
    """Outputs are on disk: wait for the parent's verdict before spending time on timing."""
    set_phase(out, "await")
    return _await_file(out / "decision", req.get("await_timeout", 600)) == "go"


MODES = {"reference": mode_reference, "compile": mode_compile, "run": mode_run, "ceilings": mode_ceilings,
         "machine": mode_machine, "ncu": mode_ncu, "profile": mode_profile, "race": mode_race, "refserve": mode_refserve}

SPARE_IDLE_S = 1800.0


def wait_as_spare(out: Path, warm: str | None) -> Path | None:
    """A prestarted worker: Python, torch and this module are imported (and, for profiling, the
    profiler set up; for a GPU, CUDA's runtime started: 0.34 s of a build's call on an H100 host
    otherwise); wait for the request the parent hands over. None: the parent is gone or
    never came back, and this process just exits. No request, no candidate code: nothing else runs.
    Its parent is the pid that started it (``_PARENT``: it may have died while this process imported torch)."""
    if warm == "cuda-runtime":            # isolation.SPARE_CUDA_RUNTIME: the build's arch, read ahead
        try:
            _build.gpu_arch()
        except Exception:  # noqa: BLE001 — a CUDA that fails here fails the request, which reports it
            pass
    elif warm:
        _setup({"device": warm})
        _WARMED[warm] = warm_profiler(warm)
    (out / "spare-ready").write_text("")
    deadline = _clock() + SPARE_IDLE_S
    path = out / "request.json"
    while _clock() < deadline and not orphaned():
        if path.exists():
            return path
        time.sleep(0.01)
    return None


def main(argv: list[str]) -> int:
    global _PARENT
    lifeline.hold()       # first: from here on this worker's group dies with its owner, stuck or not
    _PARENT = int(argv[3]) if argv[1] == "--spare" else os.getppid()
    if argv[1] == "--spare":
        path = wait_as_spare(Path(argv[2]), argv[4] if len(argv) > 4 else None)
        if path is None:
            os._exit(0)
        argv = [argv[0], str(path)]
    req = json.loads(Path(argv[1]).read_text())
    out = Path(req["out_dir"])
    set_phase(out, "setup")
    try:
        result = MODES[req["mode"]](req, out)
    except torch.OutOfMemoryError as e:
        result = {"status": WorkerStatus.runtime_error, "error": f"out of memory: {str(e).splitlines()[0]}",
                  "traceback": tail(traceback.format_exc())}
    except Exception as e:  # noqa: BLE001 — the worker reports every failure as data
        line, text = guards.candidate_line(e)
        task_error = guards.is_task_error(e)          # its message names the file and line already
        result = {"status": WorkerStatus.task_error if task_error else WorkerStatus.runtime_error,
                  "error": (str(e) if task_error else f"{type(e).__name__}: {e}")[:2000], "line": line,
                  "source_line": text,
                  "traceback": tail(traceback.format_exc())}
        if guards.is_triton_compile_error(e):
            result["status"] = WorkerStatus.compile_error
    result.pop("module", None)
    result["env"] = worker_env(req["device"])
    tmp = out / "result.json.tmp"
    tmp.write_text(json.dumps(result, default=str))
    os.replace(tmp, out / "result.json")
    set_phase(out, "done")
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: a candidate's atexit hooks or broken destructors change nothing now.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
