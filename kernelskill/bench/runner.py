"""Running, resumable: the planned jobs that ``results.jsonl`` does not hold yet, through an
executor, each record stored as it lands; or, running nothing, the rows a report is written from."""
from __future__ import annotations

from ..errors import UserError
from .plan import TaskPlan, unique_jobs
from .store import ResultStore, Row


def stored(plans: list[TaskPlan], store: ResultStore) -> tuple[dict[str, Row], int]:
    """What ``run`` would reuse, running nothing: (the stored rows of these plans, how many).
    UserError when none is stored (other flags than the run's, or another folder)."""
    keys = {j.key for j in unique_jobs(plans)}
    done = {k: r for k, r in store.load().items() if k in keys}
    if not done:
        raise UserError(f"--report-only: {store.path} holds no finished job of these tasks with these flags; "
                        f"give the flags of the run that wrote it (--levels, --device, --preset, --baseline, "
                        f"--trials, --time-cap) or run without --report-only")
    return done, len(done)


def run(plans: list[TaskPlan], executor, store: ResultStore, *, fresh: bool = False, on_start=None,
        on_result=None, note=lambda _: None) -> tuple[dict[str, Row], int]:
    """Run what is not done yet; return (every row by key, how many were reused).

    ``on_start(to_run, reused)`` is called once, ``on_result(job, row)`` after each job is stored.
    """
    jobs = unique_jobs(plans)
    if fresh:
        store.reset()
    keys = {j.key for j in jobs}
    done = {k: r for k, r in store.load().items() if k in keys}
    todo = [j for j in jobs if j.key not in done]
    reused = len(jobs) - len(todo)
    if on_start:
        on_start(len(todo), reused)
    from kernelskill.evaluate.launch.isolation import prestarting
    # On a GPU machine the next worker imports torch while this one runs; on a CPU that would
    # take cores from the evaluations being timed.
    with prestarting(str(getattr(executor, "device", "")).startswith("cuda")):
        for job, record in executor.map(todo, note):
            row = store.append(record)          # the record as a rerun reads it back
            done[job.key] = row
            if on_result:
                on_result(job, row)
    return done, reused
