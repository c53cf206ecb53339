"""Evaluate every shipped solution, the wrong ones too, and print the examples table (per solution:
verdict, eager and solution times, speedup with its 95 % CI, custom share), measured in one run on
one machine. A thin layer over ``kernelskill.bench`` (``kernelskill bench examples --include-wrong``
prints the same numbers per task).

    python benchmarks/examples_table.py [--device cuda|cpu] [--preset small] [--jobs 8] [--only cuda,triton]
                                        [--tasks a,b] [--json FILE] [--out DIR]

Builds run first, in parallel (each in its own worker); evaluations then run one per GPU (one at a
time on a CPU), so no two timings share a device. ``--json`` writes {"machine", "rows"}, the rows
that benchmarks/examples_readme.py reads.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

from kernelskill.bench import BenchSettings, ResultStore, plan, run, summarize, task_rows
from kernelskill.bench.report import solutions_markdown, verdicts_line
from kernelskill.cli.bench import Progress
from kernelskill.evaluate.api import resolve_device
from kernelskill.bench.executors import PoolExecutor, cpu_cores
from kernelskill.paths import EXAMPLES_DIR
from kernelskill.bench.suite import discover, select


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--preset", help="default: small on a CPU, full size on a GPU")
    ap.add_argument("--jobs", type=int, default=None, help="builds at once (default: every core)")
    ap.add_argument("--only", default=None, help="comma-separated backends (default: by device)")
    ap.add_argument("--tasks", default=None, help="comma-separated task names")
    ap.add_argument("--json")
    ap.add_argument("--out", help="keep results.jsonl here (a rerun resumes); default: a temporary directory")
    args = ap.parse_args()
    device = resolve_device(args.device)
    tasks = select(discover(EXAMPLES_DIR), names=args.tasks.split(",") if args.tasks else None)
    executor = PoolExecutor(device, jobs=args.jobs)
    settings = BenchSettings(device=device, preset=args.preset, include_wrong=True,
                             backends=tuple(args.only.split(",")) if args.only else None,
                             threads=executor.threads() or (None if device.startswith("cuda") else cpu_cores()))
    plans = plan(tasks, settings)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="examples-table-"))
    progress = Progress(slots=len(executor.slots()))
    records, _ = run(plans, executor, ResultStore(out / "results.jsonl"), on_result=progress, note=progress.note,
                     on_start=lambda total, reused: progress.start(total, reused, out / "results.jsonl"))
    rows = task_rows(plans, records)
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    presets = sorted({p.preset or "default" for p in plans})
    print(f"\nmachine: {name}; torch {torch.__version__}; preset {', '.join(presets)}\n")
    print(solutions_markdown(rows))
    summary = summarize(rows)
    print("\n" + verdicts_line(summary))
    if args.json:
        flat = [s for r in rows for s in r["solutions"]]
        Path(args.json).write_text(json.dumps({"machine": name, "rows": flat}, indent=2, default=str))
    v = summary["verdicts"]
    return 0 if v["as_expected"] == v["solutions"] else 1


if __name__ == "__main__":
    sys.exit(main())
