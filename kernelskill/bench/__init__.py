"""``kernelskill bench``: a suite of tasks through an executor, scored with KernelBench's metrics.

    from kernelskill.bench.suite import discover, resolve_suite, select
    tasks = select(discover(resolve_suite("examples")), levels={1, 2}, limit=5)
    plans = plan(tasks, BenchSettings(device="cpu"))
    rows_by_key, reused = run(plans, make_executor("pool", "cpu"), ResultStore(out / "results.jsonl"))
    rows = task_rows(plans, rows_by_key); summary = summarize(rows)

A job is one solution of one task (or, with ``--optimize``, one optimizer run on a task). Every
finished job is one JSON line in ``results.jsonl``, flushed at once, keyed by everything behind
its numbers: a rerun skips what is done, and a crash or Ctrl-C loses nothing finished.

The flow, a module each:

- ``suite``: the tasks of a suite (examples/, task directories, KernelBench files as shipped);
- ``jobs``: what one job is and does (``EvalJob``, ``ReferenceJob``, ``OptimizeJob``; ``job_key``);
- ``plan``: which jobs a bench runs (``BenchSettings`` → a ``TaskPlan`` per task);
- ``executors``: where they run (local, a pool over the cores and GPUs, Ray);
- ``store``: ``results.jsonl`` (``ResultStore``), each line read back as a ``Row``;
- ``runner``: what is not stored yet, run and stored (``run``; ``stored`` for ``--report-only``);
- ``score``: KernelBench's metrics over the rows (``task_rows``, ``summarize``: fast_p, geomean);
- ``report``, ``baseline``: what is printed and written; baseline files and ``--compare``.

This package re-exports the names other code imports. ``kernelskill.bench.plan`` is the function
here; the module is ``from kernelskill.bench.plan import …`` (``sys.modules``).
"""
from __future__ import annotations

from .jobs import EvalJob, OptimizeJob, ReferenceJob, job_key, op_classes, reference_op_classes
from .plan import BACKENDS, DEFAULT_TIMING, FLAGS_PROTOCOL, BenchSettings, TaskPlan, plan, unique_jobs
from .runner import run, stored
from .score import CLIP, FAST, all_as_expected, all_evaluated, geomean, solution_row, summarize, task_rows
from .store import ResultStore, Row

__all__ = ["BACKENDS", "CLIP", "DEFAULT_TIMING", "FAST", "FLAGS_PROTOCOL", "BenchSettings", "EvalJob", "OptimizeJob",
           "ReferenceJob", "ResultStore", "Row", "TaskPlan", "all_as_expected", "all_evaluated", "geomean", "job_key",
           "op_classes", "plan", "reference_op_classes", "run", "solution_row", "stored", "summarize", "task_rows",
           "unique_jobs"]
