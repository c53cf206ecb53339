"""KernelBench's scoring: a row per solution and per task from the stored rows, then the suite's
metrics — correct_rate, fast_p, the geometric mean speedup (plain and clipped), and what the tasks
cost — over them."""
from __future__ import annotations

import math
from typing import Any

from ..results import Roofline
from ..vocab import EVALUATED, RowStatus
from .plan import TaskPlan
from .store import Row

FAST = (0.0, 1.0, 1.5, 2.0)
# The clipped geometric mean bounds each speedup to [1/CLIP, CLIP] (and to the task's roofline bound
# where it is known): one absurd task can no longer carry or sink a suite's mean (issue 26).
CLIP = 100.0


def solution_row(p: TaskPlan, job, rec: Row) -> dict:
    """One evaluated solution (examples_table's row: task, solution, expected, status, speedup, …)."""
    res = rec.result
    prof = res.profile if res else None
    roof = (prof.roofline if prof else None) or Roofline()
    ms = lambda stats: stats.median_ms if stats else None  # noqa: E731
    row = {"task": p.task.id, "level": p.task.level, "solution": rec.best_file or job.solution,
           "expected": job.expected, "status": rec.status, "as_expected": rec.status == job.expected,
           "speedup": res.speedup if res else None, "ci": (prof.speedup_ci or None) if prof else None,
           "quality": res.quality if res else None,
           "speedup_vs_compile": prof.speedup_vs_compile if prof else None,
           "eager_ms": ms(prof.baseline) if prof else None, "cand_ms": ms(prof.candidate) if prof else None,
           "compile_ms": ms(prof.compile_baseline) if prof else None,
           "custom_share": res.custom_share if res else None,
           "flags": res.flags if res else [], "message": rec.message, "seconds": rec.seconds,
           "device": rec.device, "gpu": res.env.gpu if res and res.env else None,
           "floor_ms": roof.floor_ms, "floor_binds": roof.binds,
           "eager_fraction": roof.eager_fraction, "eager_over_roof_reason": roof.eager_over_roof_reason,
           # The row is plain JSON-ready data: the class's name, not the enum.
           "bottleneck": str(prof.bottleneck) if prof and prof.bottleneck else None, "op_classes": rec.op_classes,
           "phases": (res.phases if res else None) or {}}
    row.update(_shapes_fields(job, res))
    if job.kind == "optimize":
        row.update({k: getattr(rec, k) for k in ("run_dir", "attempts", "reason", "tokens", "usd")})
    return row


def _shapes_fields(job, res) -> dict:
    """The solution's backend and, where it was checked at derived shapes (``--shapes``), its label:
    ``generalizes`` yes | specialised | no, or None when unchecked (not correct at the task's sizes, or
    run without --shapes); ``shapes_ran`` the shapes it ran at (the skipped ones, where the reference
    does not run, left out)."""
    backend = res.compile.backend if res and res.compile and res.compile.backend else None
    if backend is None and getattr(job, "source", None):
        from ..candidate import detect_backend
        backend = detect_backend(job.source)
    s = res.shapes if res else None
    return {"backend": backend, "generalizes": s.generalizes if s else None,
            "shapes_ran": sum(c.verdict != "skipped" for c in s.shapes) if s else None,
            "shapes_summary": s.summary if s else None}


# The labels of ``--shapes`` (evaluate.shapes): ok at every shape it ran at; a clean refusal at some
# (and nothing worse); a wrong value or a crash at some (its verdict then is incorrect or a crash).
SHAPE_LABELS = ("yes", "specialised", "no")


def shapes_counts(sols: list[dict]) -> dict:
    """Over solutions: ``checked`` correct at the task's sizes and run at one derived shape or more;
    of them ``yes`` (generalize), ``specialised``, ``no`` (incorrect or crashed at some shape);
    ``share`` = yes / checked (None when none was checked). ``none_ran``: checked, but at no shape
    (the reference runs at none of them): apart, neither generalizing nor not. A solution without
    a shapes check (incorrect at the task's sizes, or run without --shapes) counts nowhere."""
    labelled = [s for s in sols if s.get("generalizes")]
    checked = [s for s in labelled if s.get("shapes_ran")]
    out = {"checked": len(checked), **{k: sum(s["generalizes"] == k for s in checked) for k in SHAPE_LABELS},
           "none_ran": len(labelled) - len(checked)}
    out["share"] = out["yes"] / len(checked) if checked else None
    return out


def shapes_summary(rows: list[dict]) -> dict | None:
    """``--shapes`` over a suite's solutions: ``shapes_counts`` overall and per backend; None when no
    solution was checked at derived shapes (a run without --shapes says nothing about it)."""
    sols = [s for r in rows for s in r["solutions"] if s.get("generalizes")]
    if not sols:
        return None
    backends = sorted({s.get("backend") or "?" for s in sols})
    return {**shapes_counts(sols),
            "by_backend": {b: shapes_counts([s for s in sols if (s.get("backend") or "?") == b]) for b in backends}}


def task_rows(plans: list[TaskPlan], records: dict[str, Row]) -> list[dict]:
    """Per task: its best verified solution (status ok, highest speedup), all solutions nested."""
    rows = []
    for p in plans:
        sols = [solution_row(p, j, records[j.key]) for j in p.jobs if j.key in records]
        honest = [r for r in sols if r["expected"] == "ok"]
        ok = [r for r in honest if r["status"] == "ok"]
        # A solution measured well beats one whose timing was noisy, whatever the noisy one read.
        best = max(ok, key=lambda r: (r["quality"] in ("good", None), r["speedup"] or 0.0)) if ok else None
        first = best or (honest[0] if honest else None)
        if p.error:
            status, message = RowStatus.task_error, p.error
        elif first is None:
            status = RowStatus.no_solution if not any(j.expected == "ok" for j in p.jobs) else RowStatus.pending
            message = p.note if status == RowStatus.no_solution else "not run yet"
        else:
            status, message = first["status"], first["message"]
        rows.append({"task": p.task.id, "level": p.task.level, "preset": p.preset, "status": status,
                     "speedup": best["speedup"] if best else None, "ci": best["ci"] if best else None,
                     "quality": best["quality"] if best else None,
                     "speedup_vs_compile": best["speedup_vs_compile"] if best else None,
                     "custom_share": best["custom_share"] if best else None,
                     "generalizes": best.get("generalizes") if best else None,
                     "eager_ms": (first or {}).get("eager_ms"), "solution": best["solution"] if best else None,
                     "message": message, "solutions": sols,
                     # What the task itself costs (the same in every solution's run): from the first.
                     **{k: (first or {}).get(k) for k in ("compile_ms", "floor_ms", "floor_binds", "eager_fraction",
                                                          "bottleneck", "op_classes", "seconds", "gpu")}})
    return rows


def geomean(xs: list[float]) -> float | None:
    """The geometric mean; None for no values."""
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def summarize(rows: list[dict]) -> dict:
    """KernelBench's metrics over every task (a task with no solution counts in n, not as correct):
    correct_rate = correct / n; fast_p = (correct and speedup > p) / n; geomean over correct tasks.

    Only good measurements count for speed: a correct task whose timing stayed noisy or contended
    (after the evaluator's re-times) is counted apart (``timing_not_good``) and left out of fast_p's
    numerator and denominator and of the geometric mean. Beside the plain geometric mean, one with
    each speedup clipped to [1/CLIP, CLIP] and to the task's roofline bound (eager time over the
    floor), and the tasks whose speedup is beyond that bound (``impossible_tasks``)."""
    n = len(rows)
    correct = [r for r in rows if r["status"] == "ok"]
    unsure = [r for r in correct if r.get("quality") not in ("good", None)]
    measured = [r for r in correct if r.get("quality") in ("good", None)]
    speedups = [r["speedup"] for r in measured if r["speedup"] is not None and r["speedup"] > 0]
    out: dict[str, Any] = {"n": n, "correct": len(correct), "correct_rate": len(correct) / n if n else 0.0,
                           "timing_not_good": len(unsure), "timing_not_good_tasks": [r["task"] for r in unsure]}
    timed_n = n - len(unsure)
    for p in FAST:
        name = f"fast_{p:g}".replace(".", "_")
        out[name] = sum(1 for s in speedups if s > p) / timed_n if timed_n else 0.0
    out["geomean_speedup"] = geomean(speedups)
    # A speedup that puts the candidate below its roofline floor (eager time / floor) is physically
    # impossible: the floor is the time the compulsory bytes and FLOPs take at the measured ceilings —
    # where it binds (``floor_binds``, the evaluator's: on a GPU, its L2 flushed; on a CPU its caches
    # may hold the working set, so there the floor is information). Rows from before the field: GPU rows.
    impossible, clipped = [], []
    for r in measured:
        if r["speedup"] is None or r["speedup"] <= 0:
            continue
        binds = r.get("floor_binds")
        binds = bool(r.get("gpu")) if binds is None else binds
        roof = r["eager_ms"] / r["floor_ms"] if binds and r.get("eager_ms") and r.get("floor_ms") else None
        if roof is not None and r["speedup"] > roof * 1.05:
            impossible.append(r["task"])
        clipped.append(min(max(r["speedup"], 1 / CLIP), CLIP, roof if roof else CLIP))
    out["geomean_speedup_clipped"] = geomean(clipped)
    out["impossible_tasks"] = impossible
    vs_compile = [r["speedup_vs_compile"] for r in measured if r.get("speedup_vs_compile")]
    if vs_compile:
        out["geomean_speedup_vs_compile"] = geomean(vs_compile)
    out["statuses"] = {s: sum(r["status"] == s for r in rows) for s in sorted({r["status"] for r in rows})}
    # What the suite's tasks are, whatever solved them: torch.compile against eager where both were
    # timed, the bottleneck classes, and the evaluation time the jobs took (summed, every executor slot).
    both = [r["eager_ms"] / r["compile_ms"] for r in rows if r["status"] == "ok" and r.get("eager_ms")
            and r.get("compile_ms") and r.get("quality") in ("good", None)]
    if both:
        out["compile_over_eager"] = {"n": len(both), "geomean": geomean(both),
                                     "faster": sum(x > 1 for x in both)}
    out["bottlenecks"] = {b: sum(r.get("bottleneck") == b for r in rows)
                          for b in sorted({r["bottleneck"] for r in rows if r.get("bottleneck")})}
    out["job_seconds"] = round(sum(s.get("seconds") or 0.0 for r in rows for s in r["solutions"]), 1)
    # Where those seconds went, by the evaluator's steps (EvalResult.phases), summed over the jobs.
    steps: dict[str, float] = {}
    for sol in (s for r in rows for s in r["solutions"]):
        for step, sec in (sol.get("phases") or {}).items():
            steps[step] = steps.get(step, 0.0) + sec
    out["phase_seconds"] = {k: round(v, 1) for k, v in sorted(steps.items(), key=lambda kv: -kv[1])}
    sols = [s for r in rows for s in r["solutions"]]
    honest = [s for s in sols if s["expected"] == "ok"]
    out["verdicts"] = {"solutions": len(sols), "as_expected": sum(s["as_expected"] for s in sols),
                       "honest_rejected": sum(s["status"] != "ok" for s in honest),
                       "faster_than_eager": sum(s["status"] == "ok" and (s["speedup"] or 0) > 1 for s in honest),
                       "honest": len(honest)}
    shapes = shapes_summary(rows)
    if shapes is not None:
        out["shapes"] = shapes
    return out


def all_evaluated(rows: list[dict]) -> bool:
    """A --reference run: every task got a verdict of its own (ok, or stochastic: a reference that
    differs from itself under one seed); anything else (task_error, timeout, crashed, …) did not."""
    return all(r["status"] in EVALUATED for r in rows)


def all_as_expected(rows: list[dict]) -> bool:
    """Every evaluated solution (or optimize run) got its expected verdict, and every task loaded."""
    return all(r["status"] not in (RowStatus.task_error, RowStatus.pending) for r in rows) and \
        all(s["as_expected"] for r in rows for s in r["solutions"])
