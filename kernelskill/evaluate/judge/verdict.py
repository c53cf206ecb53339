"""The verdict: from what the worker sent back to a status, flags, VerifyResult and ProfileResult.

Runs in the trusted parent only.
"""
from __future__ import annotations

import functools
import json
import time
from pathlib import Path

import numpy as np
import torch

from kernelskill.results import KernelStat, MeasurementQuality, ModuleStat, ProfileResult, Roofline
from kernelskill.vocab import Bottleneck
from . import quality
from .correctness import compare_trial, summarize, verify_outputs
from ..launch.isolation import write_atomic
from ..launch.reply import ReferenceMeta, WorkerReply
from ..worker.timing import speedup_ci, stats

SPEEDUP_REVIEW = 10.0
DROP_COMPARED_BYTES = 256 << 20


@functools.lru_cache(maxsize=64)
def _stored_output(path: str, mtime: float) -> list:
    """One trial's stored reference outputs, memory-mapped (read once per optimizer run)."""
    return torch.load(path, weights_only=True, mmap=True)


class ReferenceOutputs:
    """The reference's outputs, trial by trial: stored files of the reference cache (memory-mapped),
    or — when the memory plan did not store them — recomputed on demand by a trusted reference
    worker (``server``, reference.RefServer)."""

    def __init__(self, ref_dir, server=None):
        self.ref_dir = ref_dir
        self.meta = meta = ReferenceMeta.load(ref_dir)
        self.n = len(meta.distributions)
        self.stored = meta.plan.get("outputs", "stored") == "stored"
        self.server = server

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> list:
        if not 0 <= i < self.n:
            raise IndexError(i)
        if self.stored:
            p = self.ref_dir / f"outputs_{i}.pt"
            return _stored_output(str(p), p.stat().st_mtime)
        if self.server is None:
            raise RuntimeError("the reference outputs are recomputed on demand, but no reference worker runs")
        return self.server.get(i)


# A candidate is held to no less than this many times how far the user's own eager (PyTorch's
# default flags) is from the strict reference: as accurate as the PyTorch the user runs is correct.
EAGER_MARGIN = 2.0


def tolerances(task, meta: ReferenceMeta) -> list[dict]:
    """Per output: the task's tolerance, the user's eager's deviation from the strict reference
    (meta.accuracy, in multiples of that tolerance: the larger of the elementwise allclose ratio
    and the relative-error ratio) and the tolerance compared with: the task's, raised to
    ``EAGER_MARGIN`` × the deviation where that is larger. Where the user's flags are the strict
    ones, eager is the strict reference (deviation 0). [] for a reference cached without it."""
    atol, rtol = task.tolerance
    acc = meta.accuracy
    if not acc:
        return []
    devs = acc.get("eager_deviation")
    if devs is None:       # not measured: the same flags (or it did not fit): the task's tolerance as it is
        devs = [{"ratio": 0.0, "rel": 0.0, "max_abs": 0.0, "measured": False} for _ in meta.output_sizes]
    out = []
    for k, d in enumerate(devs):
        ratio = max(float(d.get("ratio") or 0.0), float(d.get("rel") or 0.0))
        scale = max(1.0, EAGER_MARGIN * ratio)
        out.append({"output": k, "atol": atol, "rtol": rtol, "eager_ratio": ratio,
                    "eager_allclose_ratio": float(d.get("ratio") or 0.0), "eager_max_abs": d.get("max_abs"),
                    "margin": EAGER_MARGIN, "effective_atol": atol * scale, "effective_rtol": rtol * scale,
                    "raised": scale > 1.0, "measured": d.get("measured", True)})
    return out


def effective_tolerance(task, meta: ReferenceMeta) -> tuple:
    """(atol, rtol) to compare with: the task's numbers, or one per output where ``tolerances`` has them."""
    tols = tolerances(task, meta)
    if not tols:
        return task.tolerance
    return [t["effective_atol"] for t in tols], [t["effective_rtol"] for t in tols]


def accuracy_notes(task, meta: ReferenceMeta) -> list[str]:
    """What the reference worker found about the reference's own accuracy, for the planner and the
    MCP client: the strict fp32 reference missing the task's tolerance against float64."""
    fp64 = (meta.accuracy or {}).get("fp64") or {}
    atol, rtol = task.tolerance
    notes = []
    for m in fp64.get("misses") or []:
        frac = m.get("mismatch_fraction") or 0.0
        notes.append(f"the task's tolerance (atol={atol:g}, rtol={rtol:g}) is below the reference's own rounding: "
                     f"on trial {m['trial']} ({m['distribution']} inputs) the strict fp32 reference differs from a "
                     f"float64 computation of the same model by up to {m.get('max_abs_err') or 0:.3g} "
                     f"({100 * frac:.2g} % of elements outside tolerance; {m.get('message', '')}). A kernel that "
                     f"rounds differently from the reference, even a more exact one, can fail there")
    return notes


def reference_outputs(ref_dir, server=None) -> ReferenceOutputs:
    return ReferenceOutputs(ref_dir, server)


def trial_seeds(seed: int, dists: list[str]) -> list[int]:
    """The seed each trial's inputs were drawn with (mirrors the worker's reference mode)."""
    out, i = [], 0
    for d in dists:
        if d == "task":
            i += 1
            out.append(seed + 1000 * i)
        else:
            out.append(seed + 7)
    return out


def stochastic_message(task, meta: ReferenceMeta) -> str:
    """The ``stochastic`` verdict's message: what is wrong with the reference and what to do."""
    return (f"{task.path}: the reference is not reproducible: {meta.stochastic}. No candidate can be "
            f"verified against it. Make it deterministic: draw random numbers from torch's global "
            f"generator (the evaluator seeds it before every call), not from a generator seeded by the "
            f"clock or os.urandom; for atomics, torch.use_deterministic_algorithms(True). If the "
            f"differences are rounding noise, raise the task's tolerance ([tolerance] in task.toml).")


def random_reference_flag(what: str) -> str:
    """The note on every verdict against a reference whose output depends on the RNG seed."""
    return (f"random-reference: the reference draws random numbers ({what}), so its output depends on "
            f"the RNG seed. Each reference and candidate call is seeded alike: a candidate matches only by "
            f"drawing the same numbers (torch's own dropout does); a custom kernel must reproduce torch's "
            f"RNG stream, or the task should put the module in eval() mode (or p=0) if the randomness is "
            f"not meant to be part of it")


class TrialJudge:
    """Compares each trial's outputs as soon as the worker has written them: the worker saves one
    file per trial, and the parent compares trial i while the worker runs trial i + 1."""

    def __init__(self, task, ref_dir, meta, server=None):
        self.task_tol = task.tolerance
        self.tolerances = tolerances(task, meta)
        self.atol, self.rtol = effective_tolerance(task, meta)
        self.dists = meta.distributions
        self.seeds = trial_seeds(int(meta.seed), self.dists)
        self.ref_outs = reference_outputs(ref_dir, server)
        # A task whose outputs are large: each candidate file is deleted once compared (disk).
        self.drop = int(meta.output_bytes or 0) > DROP_COMPARED_BYTES
        self.done: dict[int, tuple] = {}
        self.unreadable: str | None = None
        self.acked: set[int] = set()  # trials whose shared outputs the worker was told it may free

    def poll(self, out_dir) -> None:
        """Compare every trial whose outputs have appeared since the last call: a file, or (large
        outputs on a GPU) tensors shared with the reference worker (``cand_ipc_I.json``)."""
        for i in range(len(self.ref_outs)):
            if i in self.done or i in self.acked:
                continue
            file, shared = out_dir / f"cand_outputs_{i}.pt", out_dir / f"cand_ipc_{i}.json"
            if self.ref_outs.server is not None and shared.exists():
                self.acked.add(i)
                try:
                    if self.unreadable is None:      # once the verdict is known nothing more is compared
                        self._compare(out_dir, i, shared)
                finally:
                    # The worker holds the shared outputs until this: it goes on to the next trial.
                    write_atomic(out_dir / f"ack_{i}", "done")
            elif self.unreadable is None and file.exists():
                self._compare(out_dir, i, file)

    @property
    def shared(self) -> bool:
        """Whether the outputs came shared in memory (handoff.py) rather than as files."""
        return bool(self.acked)

    def _compare(self, out_dir, i: int, file) -> None:
        server = self.ref_outs.server
        if server is not None:           # compared on the reference worker's device, not read here
            from kernelskill.results import TrialResult
            ans = server.compare(i, file, key=i if file.suffix == ".json" else None, seed=self.seeds[i],
                                 dist=self.dists[i], atol=self.atol, rtol=self.rtol)
            if "unreadable" in ans:
                self.unreadable = f"output-type: the outputs are not plain tensors ({ans['unreadable']})"
                return
            self.done[i] = (TrialResult.from_dict(ans["result"]), ans.get("lines") or "")
            if self.drop:
                (out_dir / f"cand_outputs_{i}.pt").unlink(missing_ok=True)
            return
        try:
            # Read in full, not mapped: the worker is still alive while this is judged.
            got = torch.load(out_dir / f"cand_outputs_{i}.pt", weights_only=True)
        except Exception as e:  # noqa: BLE001 — anything but plain tensors fails to load
            self.unreadable = f"output-type: the outputs are not plain tensors ({type(e).__name__})"
            return
        self.done[i] = compare_trial(i, self.seeds[i], self.dists[i], got, self.ref_outs[i], self.atol, self.rtol)
        if self.drop:
            del got
            (out_dir / f"cand_outputs_{i}.pt").unlink(missing_ok=True)

    def verdict(self, out_dir):
        """All trials compared (those still unread now): the VerifyResult, or None and a flag."""
        self.poll(out_dir)
        if self.unreadable:
            return None, [self.unreadable]
        missing = [i for i in range(len(self.ref_outs)) if i not in self.done]
        if missing:
            return None, [f"output-type: no outputs were written for trial {missing[0]}"]
        return summarize([self.done[i] for i in sorted(self.done)], len(self.ref_outs), *self.task_tol,
                         tolerances=self.tolerances), []


def verify_run(out_dir, task, ref_dir, meta, judge: TrialJudge | None = None) -> tuple:
    """The correctness verdict from the worker's outputs and in-place checks.

    Returns (VerifyResult | None, cheat flags); None when the outputs are not plain tensors.
    ``judge`` holds the trials already compared while the worker ran.
    """
    import json
    res = json.loads((out_dir / "checks.json").read_text())
    verify, flags = (judge or TrialJudge(task, ref_dir, meta)).verdict(out_dir)
    if verify is None:
        return None, flags
    verify.degenerate = bool(meta.degenerate)
    verify.notes = accuracy_notes(task, meta)
    verify.seconds = round(res.get("verify_seconds", 0.0), 3)
    cheats = []
    for i, check in enumerate(res.get("checks", [])):
        for problem in check.get("problems", []):
            if "not exactly torch.Tensor" in problem:
                cheats.append(f"tensor-subclass: {problem}")
                continue
            verify.correct = False
            if i < len(verify.trials):
                t = verify.trials[i]
                t.ok = False
                t.check = t.check or ("input-modified" if problem.startswith("input") else "aliasing")
                t.message = t.message or problem
            verify.mismatch = (verify.mismatch + f"\ntrial {i}: {problem}").strip()
        if meta.structure and check.get("structure") != meta.structure:
            verify.correct = False
            verify.mismatch = (verify.mismatch + f"\ntrial {i}: output structure {check.get('structure')}, "
                               f"expected {meta.structure}").strip()
    cheats += res.get("flags_after", [])
    verify.flags = list(cheats)
    return verify, cheats


def replay_flags(out_dir, task, ref_outs: list, dists: list[str], live: bool,
                 file: str = "timed_outputs.pt") -> list[str]:
    """Flags when the outputs of the timed calls differ from the reference (a result computed once
    and replayed, a cache keyed on the input's address, …). ``live``: the worker may still write
    to its folder, so the file is read in full rather than mapped."""
    meta = getattr(ref_outs, "meta", None)
    atol, rtol = effective_tolerance(task, meta) if meta else task.tolerance
    task_idx = [i for i, d in enumerate(dists) if d == "task"]
    server = getattr(ref_outs, "server", None)
    if server is not None:
        # Large outputs: each set's timed outputs compared on the reference worker's device, shared
        # there by the candidate's worker (timed_ipc.json) or read from the file it wrote.
        import json as _json
        keys = _json.loads((out_dir / "timed_keys.json").read_text())
        shared = out_dir / "timed_ipc.json"
        for idx in keys:
            ans = server.compare(task_idx[int(idx)], shared if shared.exists() else out_dir / file, key=int(idx),
                                 seed=0, dist="task", atol=atol, rtol=rtol)
            if "unreadable" in ans:
                return ["replay: the outputs of the timed calls are not plain tensors"]
            if not ans["result"].get("ok"):
                return [f"replay: outputs of timed calls do not match the reference for input set {idx} "
                        f"(results cached or replayed across calls?)"]
        return []
    try:
        timed = torch.load(out_dir / file, weights_only=True, mmap=not live)
    except Exception:  # noqa: BLE001
        return ["replay: the outputs of the timed calls are not plain tensors"]
    for idx, outs in timed.items():
        want = ref_outs[task_idx[int(idx)]]
        if not verify_outputs([outs], [want], [0], ["task"], atol, rtol).correct:
            return [f"replay: outputs of timed calls do not match the reference for input set {idx} "
                    f"(results cached or replayed across calls?)"]
    return []


def timed_profile(reply: WorkerReply, device: str, backend: str, meta: ReferenceMeta, flags: list[str]) -> ProfileResult:
    """The ProfileResult of a verified, timed candidate from its worker's reply (samples, kernels);
    the flags its numbers raise (timer-mismatch, no-custom-kernel, review) are added to ``flags``."""
    timing = reply.timing
    times = timing.times
    cand, base = times["candidate"], times["eager"]
    cand_ms, base_ms = cand.ms, base.ms
    prof = ProfileResult(device=device, candidate=stats(cand_ms, cand.rounds), baseline=stats(base_ms, base.rounds),
                         threads=timing.threads, first_call_ms=timing.first_call_ms, cost_s=dict(timing.cost_s),
                         timer="cuda-events+host" if device.startswith("cuda") else "perf_counter")
    # Samples of several rounds (fresh allocations): the interval spans each round's speedup.
    split = cand.rounds
    sp, ci = speedup_ci(base_ms, cand_ms, rounds=split)
    prof.speedup, prof.speedup_ci = sp, ci
    q = timing.quality or quality.assess(timing.raw_times(), device, sp, ci, threads=prof.threads)
    prof.quality = MeasurementQuality.from_dict(q)
    prof.decision_ms = quality.low_quantile(cand_ms)
    if not prof.quality.good:
        prof.notes.append(_no_decision_note(prof.quality))
    info = timing.compile
    if "compile" in times:
        compiled = times["compile"]
        prof.compile_baseline = stats(compiled.ms, compiled.rounds)
        prof.speedup_vs_compile, prof.speedup_vs_compile_ci = speedup_ci(compiled.ms, cand_ms, rounds=split)
        prof.notes.append(f"torch.compile baseline: compiled in {info.seconds or 0.0:.1f} s (cached per environment)"
                          + ("" if info.agrees_with_eager else
                             "; its outputs differ from eager beyond 1e-2 (Inductor numerics)"))
    elif info:
        prof.notes.append(f"torch.compile baseline failed: {info.error or '?'}")
    if device.startswith("cuda"):
        gap_c = float(np.median(np.subtract(cand.host_ms, cand_ms)))
        gap_b = float(np.median(np.subtract(base.host_ms, base_ms)))
        ev = float(np.median(cand_ms))
        if gap_c > gap_b + max(0.5 * ev, 0.05):
            flags.append(f"timer-mismatch: the host clock sees {gap_c:.3f} ms more than the CUDA events "
                         f"(eager: {gap_b:.3f} ms) — work outside the timed stream?")
    kern = reply.kernels or {}
    if reply.kernels_note:
        prof.notes.append(reply.kernels_note)
    prof.kernels = [KernelStat(**k) for k in kern.get("kernels", [])]
    prof.modules = [ModuleStat(**m) for m in kern.get("modules", [])]
    prof.launches = kern.get("launches")
    if not device.startswith("cuda") and prof.kernels:
        # Profiled CPU calls run slower than timed ones (profiler scopes, cold threads): keep
        # their shares, and apportion the timed median by them.
        for k in [*prof.kernels, *prof.modules]:
            k.time_ms = k.share * prof.candidate.median_ms
        prof.notes.append("CPU kernel times: the timed median apportioned by profiled shares")
    elif prof.kernels:
        note = reconcile_note(sum(k.time_ms for k in prof.kernels), prof.candidate.median_ms, prof.launches)
        if note:
            prof.notes.append(note)
    prof.custom_share = kern.get("custom_share")
    if backend == "none":
        prof.custom_share = 0.0
        flags.append("no-custom-kernel: the candidate runs only PyTorch operators (custom share 0)")
    elif prof.custom_share is not None and prof.custom_share == 0:
        flags.append("no-custom-kernel: none of the candidate's own kernels ran (custom share 0)")
    if meta.degenerate:
        prof.notes.append("degenerate task: speedup withheld")
        prof.speedup, prof.speedup_ci = None, []
    elif sp > SPEEDUP_REVIEW:
        flags.append(f"review: speedup {sp:.1f}× is above {SPEEDUP_REVIEW:g}×; check it before trusting it")
    return prof


def reconcile_note(kernel_ms: float, median_ms: float, launches: int | None) -> str:
    """Where a GPU call's kernels, profiled, do not add up to its timed median: what the
    difference is ("" within 10 %)."""
    if median_ms <= 0 or kernel_ms <= 0:
        return ""
    calls = f" ({launches} kernel launches a call)" if launches else ""
    if kernel_ms < 0.9 * median_ms:
        return (f"the kernels add to {kernel_ms:.3f} ms of the {median_ms:.3f} ms median: the other "
                f"{median_ms - kernel_ms:.3f} ms the GPU waits between kernels{calls}, for the host to launch "
                "them or for a synchronization; fewer, larger kernels close that gap")
    if kernel_ms > 1.1 * median_ms:
        return (f"the profiled kernels add to {kernel_ms:.3f} ms, {kernel_ms / median_ms - 1:.0%} above the "
                f"{median_ms:.3f} ms median{calls}: kernels that run side by side on several streams each "
                "count whole, and the profiler slows kernels it traces; read their shares, not their times")
    return ""


def _no_decision_note(q: MeasurementQuality) -> str:
    return (f"measurement {q.label()}: the speedup is reported with its interval, "
            "and it counts for no decision (best node, bottleneck, skill statistics, fast_p)")


def fold_processes(prof: ProfileResult, others: list, device: str) -> list[str]:
    """The speedup of a candidate timed in several worker processes: ``prof`` (the evaluation's own
    worker) and ``others`` (RaceResults of the candidate alone against eager, each in a fresh
    worker). The speedup becomes the median of the processes' speedups, its interval spans every
    process's interval, and the quality is the worst process's, noisy where the processes disagree
    beyond the limit. Returns the flags the other workers raised (a timed output that did not
    match the reference: a replay)."""
    q = prof.quality
    if q is None or prof.speedup is None:
        return []
    k = 1 if device.startswith("cuda") else 0
    rows = [(prof.speedup, list(prof.speedup_ci))]
    verdict, reasons, flags = q.verdict, list(q.reasons), []
    for i, r in enumerate(others, start=1):
        e = r.entries[0] if r.status == "ok" and r.entries else None
        if e is None or e.speedup is None or len(e.speedup_ci) != 2:
            if verdict == quality.GOOD:
                verdict = quality.NOISY
            reasons.append(f"worker process {i + 1} did not time it ({r.message or r.status}): the variation "
                           "between processes is unmeasured")
            continue
        flags += e.flags
        rq = r.quality
        rows.append((e.speedup, list(e.speedup_ci)))
        if rq is not None:
            q.history += [{**h, "process": i} for h in rq.history]
            if quality.RANK[rq.verdict] > quality.RANK[verdict]:
                verdict = rq.verdict
            reasons += [f"worker process {i + 1}: {why}" for why in rq.reasons if not rq.good]
    if len(rows) > 1:
        speeds = [sp for sp, _ in rows]
        point = float(np.median(speeds))
        lo, hi = min(ci[0] for _, ci in rows), max(ci[1] for _, ci in rows)
        rel = (hi - lo) / 2 / point
        spread = max(speeds) / min(speeds) - 1
        q.metrics.update(processes=len(rows), processes_spread=round(spread, 4), speedup_ci_rel=round(rel, 4))
        if rel > quality.SPEEDUP_CI_REL[k]:
            if verdict == quality.GOOD:
                verdict = quality.NOISY
            reasons.append(f"the speedups of {len(rows)} worker processes differ by {spread:.1%}: the interval "
                           f"over them is ±{rel:.1%} (limit ±{quality.SPEEDUP_CI_REL[k]:.0%})")
        prof.speedup, prof.speedup_ci = point, [lo, hi]
        each = " and ".join(f"{sp:.3f}× [{ci[0]:.3f}–{ci[1]:.3f}]" for sp, ci in rows)
        prof.notes.append(f"timed in {len(rows)} worker processes: {each}; the speedup is their median and "
                          "its interval spans them" + (" (torch.compile was timed in the first only)"
                                                       if prof.compile_baseline is not None else ""))
    was_good = q.good
    q.verdict, q.reasons = verdict, reasons
    if was_good and not q.good:
        prof.notes.append(_no_decision_note(q))
    return flags


# The least relative half-width of a speedup's interval, (CPU, GPU): what a rerun moves beyond the
# samples of one evaluation. On a quiet GPU repeated evaluations of one kernel spread wider than
# each one's own interval, so two of them claimed disjoint speedups; none on a CPU, whose intervals
# are far wider already (figures: docs/evaluator.md, "Measurements behind the code").
RERUN_FLOOR = (0.0, 0.005)


def rerun_floor(prof: ProfileResult, device: str) -> None:
    """Widen the speedup intervals to at least ±RERUN_FLOOR around their points."""
    f = RERUN_FLOOR[1 if device.startswith("cuda") else 0]
    if f <= 0:
        return
    for sp, name in ((prof.speedup, "speedup_ci"), (prof.speedup_vs_compile, "speedup_vs_compile_ci")):
        ci = getattr(prof, name)
        if sp is not None and len(ci) == 2:
            setattr(prof, name, [min(ci[0], sp * (1 - f)), max(ci[1], sp * (1 + f))])


EAGER_RUNS = "eager_runs.jsonl"     # in the reference's cache folder: eager medians of good evaluations
EAGER_RUNS_KEPT = 10


def eager_runs(ref_dir, where: dict) -> list[float]:
    """The eager medians (ms) of this task's last good evaluations on the same ``where`` (GPU,
    environment, timing settings), oldest first, at most EAGER_RUNS_KEPT."""
    try:
        lines = (Path(ref_dir) / EAGER_RUNS).read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            d = json.loads(line)
            if all(d.get(k) == v for k, v in where.items()):
                out.append(float(d["median_ms"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue                      # a line cut by a crash, or of another shape: skipped
    return out[-EAGER_RUNS_KEPT:]


def record_eager_run(ref_dir, where: dict, median_ms: float) -> None:
    """One good evaluation's eager median, appended (one short line: evaluations of one task on
    several GPUs append beside each other without a lock)."""
    line = json.dumps({**where, "median_ms": median_ms, "when": round(time.time(), 1)}) + "\n"
    try:
        with open(Path(ref_dir) / EAGER_RUNS, "a") as f:
            f.write(line)
    except OSError:
        pass                              # a read-only cache: the next evaluation spans less


def span_eager_runs(prof: ProfileResult, earlier: list[float]) -> None:
    """The speedup's interval widened to span ``earlier`` evaluations' eager medians against this
    candidate's median: a rerun of the same kernel reads its eager from the same spread (eager
    moved between evaluations, both worker processes of each agreeing, while the candidate held;
    figures: docs/evaluator.md, "Measurements behind the code"). The point and
    the quality verdict stay this evaluation's; ``metrics.eager_runs`` and ``eager_runs_spread``
    say what the interval spans."""
    if not earlier or prof.speedup is None or len(prof.speedup_ci) != 2 or prof.baseline is None \
            or prof.candidate is None or prof.candidate.median_ms <= 0:
        return
    runs = list(earlier) + [prof.baseline.median_ms]
    cand = prof.candidate.median_ms
    lo, hi = prof.speedup_ci
    spread = max(runs) / min(runs) - 1
    if prof.quality is not None:
        prof.quality.metrics.update(eager_runs=len(runs), eager_runs_spread=round(spread, 4))
    wide = [min(lo, min(runs) / cand), max(hi, max(runs) / cand)]
    if wide != [lo, hi]:
        prof.speedup_ci = wide
        prof.notes.append(f"the interval spans eager's medians in this task's last {len(runs)} evaluations here "
                          f"({min(runs):.4g}–{max(runs):.4g} ms, {spread:.1%} apart): what a rerun's eager reads")


def _roofline(prof: ProfileResult, task, meta: ReferenceMeta, ceilings: dict, flags: list[str], times: dict | None = None,
              flush_l2: bool = True) -> None:
    """Roofline record, bottleneck class and the floor check of a timed candidate.

    Eager faster than its floor raises the binding ceiling to what eager reached (within
    ``roofline.RAISE_LIMIT``; recorded in ``prof.roofline.raised_ceiling``, which the caller
    stores in the ceilings cache) before the candidate is measured against it."""
    from . import roofline
    gpu = prof.device.startswith("cuda")
    if not ceilings:
        prof.notes.append("roofline: no ceilings measured for this device")
        return
    if meta.flops is None:
        prof.notes.append(meta.work_note or "roofline: the task's FLOPs and bytes are unknown")
        return
    launches = sum(k.calls for k in prof.kernels) if prof.kernels else None
    busy = sum(k.time_ms for k in prof.kernels) if (gpu and prof.kernels) else None
    flops, nbytes = meta.flops, meta.bytes
    base_times = (times or {}).get("eager", {}).get("ms")
    eager_ms = quality.low_quantile(base_times) if base_times else prof.baseline.median_ms
    raised = _eager_above_floor(prof, task, flops, nbytes, ceilings, eager_ms, gpu, flush_l2)
    if raised:
        ceilings = roofline.raise_ceiling(ceilings, raised["ceiling"], raised["to"])
    args = (flops, nbytes, ceilings, task.dtype, task.allow_tf32)
    # Decisions use a low quantile of the interleaved samples: contention only ever adds time, so
    # a busy machine does not make a memory-bound kernel look latency-bound.
    cand_ms = prof.decision_ms or prof.candidate.median_ms
    roof, prof.bottleneck = roofline.analyse(*args, cand_ms, launches=launches, busy_ms=busy, gpu=gpu,
                                             flushed=flush_l2)
    prof.roofline = roof
    if roof is not None:
        roof.measured = f"p{int(quality.QUANTILE * 100)} of the timed calls"
        if raised:
            roof.raised_ceiling = raised
        if ceilings.get("limits"):
            # The hardware's limits beside the library rates the floor uses (the planner sees both).
            roof.limits = ceilings["limits"]
    if ceilings.get("quality", "good") != "good":
        prof.notes.append(f"roofline: the ceilings were measured under load ({ceilings.get('quality')}); they are "
                          "not cached: this process reuses them for 2 minutes at most, then measures them again")
    over = roof.over_roof_reason if roof is not None else None
    if over:
        prof.notes.append(f"roofline: the candidate ran at {roof.fraction:.3g}× the floor's pace, above "
                          f"the roof: {over} ({roof.over_roof_detail or ''})")
    if roof is not None and roof.bottleneck_note:
        prof.notes.append(roof.bottleneck_note)
    if prof.bottleneck and prof.quality is not None and not prof.quality.good:
        # Never classify from a noisy measurement alone: only the timing-free part, the roof the
        # arithmetic intensity puts the task under, is kept.
        memory = roof is not None and roof.roof == "memory"
        prof.bottleneck = Bottleneck.memory_bound if memory else Bottleneck.compute_bound
        prof.notes.append(f"bottleneck from the arithmetic intensity only ({prof.bottleneck}): the timing was "
                          f"{prof.quality.verdict}")
    eager, _ = roofline.analyse(*args, eager_ms, gpu=gpu, flushed=flush_l2)
    if eager is not None:
        # Eager's position is recorded even where the candidate's time gave none.
        roof = prof.roofline = roof if roof is not None else Roofline()
        roof.eager_fraction = eager.fraction
        if eager.over_roof_reason:
            roof.eager_over_roof_reason = eager.over_roof_reason
    floor = roof.floor_ms if roof is not None else None
    # On a GPU the L2 is flushed before each timed call, so the floor binds; CPU caches can hold a
    # small task's whole working set, so there it is information, not a bound (``binds``: what the
    # bench's "beyond the roofline floor" and its clipped mean go by).
    binds = bool(gpu and floor) and (roof.roof != "memory" or flush_l2)
    if roof is not None:
        roof.binds = binds
    if not binds:
        return
    work = "compulsory FLOPs at the measured peak" if roof.roof == "compute" else \
        "compulsory bytes at the measured bandwidth"
    if cand_ms < 0.95 * floor and over in roofline.EXPLAINED:
        # Below the library-rate floor for a reason the hardware allows (a tensor-core path, a rate
        # within the FMA peak, a working set the L2 holds): explained, not an alarm.
        prof.notes.append(f"review: {cand_ms:.4f} ms is below the roofline floor {floor:.4f} ms ({work}), "
                          f"explained: {over}; the ceilings are not raised from a candidate's time")
    elif cand_ms < 0.95 * floor:
        flags.append(f"review: {cand_ms:.4f} ms is below the roofline floor {floor:.4f} ms "
                     f"({work}); check it before trusting it")
    elif cand_ms < floor:
        # Within 5 %: a note, not a flag; a candidate's time never raises a ceiling.
        prof.notes.append(f"review: the candidate's {cand_ms:.4f} ms is faster than the roofline floor "
                          f"{floor:.4f} ms ({work}, fraction {floor / cand_ms:.3f}): the ceiling may be low, "
                          "or the candidate does less work than the compulsory bytes/FLOPs; the ceilings "
                          "are not raised from a candidate's time")


def _ceiling_label(which: str) -> str:
    return "bandwidth" if which == "bandwidth" else which.split(".", 1)[1]


def _eager_above_floor(prof: ProfileResult, task, flops, nbytes, ceilings: dict, eager_ms: float, gpu: bool,
                       flush_l2: bool) -> dict | None:
    """Eager (the task's PyTorch reference: library kernels, trusted) faster than its floor: a
    review note, and the raise of the binding ceiling to the rate eager reached (None: no raise)."""
    from . import roofline
    floor = roofline.floor_ms(flops, nbytes, ceilings, task.dtype, task.allow_tf32)
    if not floor or not eager_ms or eager_ms <= 0 or eager_ms >= floor:
        return None
    which = roofline.binding_ceiling(flops, nbytes, ceilings, task.dtype, task.allow_tf32)
    memory = which == "bandwidth"
    if memory and not (gpu and flush_l2):
        return None          # caches can hold the working set: the bandwidth floor is no bound here
    old = roofline.ceiling_value(ceilings, which)
    rate = (nbytes if memory else flops) / (eager_ms / 1e3)
    unit, scale = ("GB/s", 1e9) if memory else ("TFLOP/s", 1e12)
    label = _ceiling_label(which)
    reached = (f"review: eager's {eager_ms:.4f} ms is faster than the roofline floor {floor:.4f} ms: it reached "
               f"{rate / scale:.4g} {unit}, above the measured {label} ceiling {old / scale:.4g} {unit}")
    if rate > roofline.RAISE_LIMIT * old:
        prof.notes.append(f"{reached} — more than {roofline.RAISE_LIMIT:g}× it, so the ceiling is not raised: the "
                          "task's counted work (FLOPs, compulsory bytes) likely exceeds what eager does; "
                          "`kernelskill profile --remeasure-ceilings` if the ceilings were measured badly")
        return None
    prof.notes.append(f"{reached}; the ceiling is raised to what eager reached ({rate / scale:.4g} {unit}) in the "
                      "cached ceilings, and this profile's floor uses it")
    return {"ceiling": which, "from": old, "to": rate}
