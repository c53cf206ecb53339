"""Throughput of ``kernelskill bench``: candidates evaluated per minute against the executor and its
number of workers, on the shipped solutions for this device (C++ at the `small` preset on a CPU).

    python benchmarks/bench_throughput.py [--device cpu|cuda] [--runs local:1,pool:1,pool:2,ray:2] [--cold]
    python benchmarks/bench_throughput.py --device cuda --runs local:1,pool:1,ray:1 [--tasks a,b]    # a GPU machine

Each configuration runs the whole suite with a fresh results file (nothing reused) at the bench's
default settings (5 trials, 3 s timing cap per model). A first pass fills the build and reference
caches, so the warm rows measure evaluation alone. ``--cold`` adds runs from an empty build cache
(a temporary $KERNELSKILL_CACHE): compile cost included. On a GPU machine, workers = GPUs used by
the pool (one timing worker per GPU; add pool:2, pool:4, … where there are that many GPUs), and a
Ray task holds one GPU, so Ray runs one timing per GPU it sees whatever its count. Prints a
markdown table.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from kernelskill.bench import BenchSettings, ResultStore, plan, run, unique_jobs
from kernelskill.bench.report import machine_info
from kernelskill.evaluate.api import resolve_device
from kernelskill.bench.executors import cpu_cores, make_executor
from kernelskill.paths import EXAMPLES_DIR
from kernelskill.bench.suite import discover, select


def measure(device: str, name: str, workers: int, note: str, tasks: list[str] | None = None) -> dict:
    """One pass over the suite with ``workers`` on executor ``name``; jobs, seconds, candidates/min."""
    executor = make_executor(name, device, workers=None if name == "local" else workers)
    threads = executor.threads() or (None if device.startswith("cuda") else cpu_cores())
    plans = plan(select(discover(EXAMPLES_DIR), names=tasks), BenchSettings(device=device, threads=threads))
    store = ResultStore(Path(tempfile.mkdtemp(prefix="bench-throughput-")) / "results.jsonl")
    started = time.perf_counter()
    records, _ = run(plans, executor, store, fresh=True)
    seconds = time.perf_counter() - started
    n = len(unique_jobs(plans))
    ok = sum(r.status == "ok" for r in records.values())
    if name == "pool":
        workers = len(executor.slots())          # on CUDA: the GPUs there are, at most the number asked for
    row = {"executor": name, "workers": workers, "threads": threads, "cache": note, "jobs": n, "ok": ok,
           "seconds": seconds, "per_minute": n / seconds * 60, "slots": executor.slots()}
    print(f"{name} ×{workers} ({note}): {n} candidates in {seconds:.1f} s = {row['per_minute']:.1f}/min, "
          f"{ok} ok", file=sys.stderr, flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--runs", default="local:1,pool:1,pool:2,ray:2", help="executor:workers, comma-separated")
    ap.add_argument("--cold", action="store_true", help="also local:1 and pool:1 from an empty build cache")
    ap.add_argument("--tasks", help="only these examples (comma-separated names), to fit a GPU session")
    args = ap.parse_args()
    tasks = args.tasks.split(",") if args.tasks else None
    device = resolve_device(args.device)
    runs = [(r.split(":")[0], int(r.split(":")[1])) for r in args.runs.split(",")]
    rows = []
    if args.cold:
        warm_cache = os.environ.get("KERNELSKILL_CACHE")
        for name, workers in (("local", 1), ("pool", 1)):
            os.environ["KERNELSKILL_CACHE"] = tempfile.mkdtemp(prefix="kernelskill-cold-cache-")
            rows.append(measure(device, name, workers, "cold builds", tasks))
        if warm_cache:
            os.environ["KERNELSKILL_CACHE"] = warm_cache
        else:
            os.environ.pop("KERNELSKILL_CACHE")
    measure(device, "pool", 2 if device == "cpu" else 1, "warm-up pass", tasks)      # fills builds and references
    rows += [measure(device, name, workers, "warm", tasks) for name, workers in runs]
    m = machine_info(make_executor("local", device))
    where = ", ".join(m["gpus"]) if m["gpus"] else f"{m['cpu']}, {m['cores']} cores"
    print(f"\nmachine: {where}; torch {m['torch']}; device {device}; preset small on a CPU; "
          f"{'tasks ' + ', '.join(tasks) if tasks else 'every example'}; "
          f"5 trials, 3 s timing cap per model\n")
    print("| executor | workers | threads per evaluation | build cache | candidates | ok | seconds "
          "| candidates / minute |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['executor']} | {r['workers']} | {r['threads'] or '-'} | {r['cache']} | {r['jobs']} | {r['ok']} | "
              f"{r['seconds']:.0f} | {r['per_minute']:.1f} |")


if __name__ == "__main__":
    main()
