"""Mode ``reference``: the task's reference on seeded inputs (no candidate): its inputs, outputs
and weights saved, its accuracy against float64, its randomness and its work (FLOPs, bytes)."""
from __future__ import annotations

from pathlib import Path

import torch

from kernelskill.evaluate import flags as _flags
from . import guards
from . import trials as trials_mod
from kernelskill.task import Task
from kernelskill.vocab import WorkerStatus
from kernelskill.evaluate.launch.request import WorkerRequest
from .core import _SET_FLAGS, _clock, _cpu, _equal, _load_task, _save, _seeded_call, _setup, _to, call_seed


# ---- reference ------------------------------------------------------------------------------
def mode_reference(req: WorkerRequest, out: Path) -> dict:
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
    seed, n = req.seed, req.trials
    cuda = device.startswith("cuda")
    took("load")
    torch.manual_seed(seed)
    model = task.build_model(mod, init=init).to(device)
    took("model")
    param_bytes = trials_mod.nbytes(list(model.state_dict().values()))
    strict = req.strict_flags or _flags.STRICT
    # The reference's outputs are the strict ones (TF32 off everywhere): what correctness compares
    # against. The user's eager (this worker's own flags) is run beside them to measure its distance.
    with torch.no_grad(), _flags.applied(strict):
        acc = Accuracy(model, device, dict(_SET_FLAGS), strict, task.tolerance, param_bytes, cuda)
        # On a GPU every trial is drawn there, stored or not: get_inputs() of a KernelBench level-1
        # task draws gigabytes, seconds per trial on one CPU thread, most of a reference's time
        # (figures: docs/evaluator.md, "Measurements behind the code").
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
                                    out_dir=out, rotate=int(req.rotate), store_limit=req.store_limit)
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
        from kernelskill.evaluate.judge.correctness import deviation
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
        from kernelskill.evaluate.judge.correctness import compare_trial
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
    from kernelskill.evaluate.judge.correctness import compare_trial
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
