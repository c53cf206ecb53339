"""Evaluate every shipped solution and print the examples table (task, eager time, best verified
speedup), measured in one run on one machine.

    python benchmarks/examples_table.py [--device cuda|cpu] [--preset small] [--jobs 8] [--only cuda,triton]

Builds run first, in parallel (each in its own worker); evaluations then run one at a time, so
no two timings share the device.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from kernelskill import Candidate, Task
from kernelskill.evaluate import compile, evaluate
from kernelskill.evaluate.api import Options
from kernelskill.evaluate.timing import TimingConfig

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def expected(path: Path) -> str:
    m = re.match(r"#\s*expect:\s*(\w+)", path.read_text())
    return m.group(1) if m else "ok"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--preset")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--only", default=None, help="comma-separated backends (default: by device)")
    ap.add_argument("--tasks", default=None, help="comma-separated task names")
    ap.add_argument("--json")
    args = ap.parse_args()
    backends = args.only.split(",") if args.only else (["cuda", "triton"] if args.device == "cuda" else ["cpp"])
    tasks = sorted(p for p in EXAMPLES.iterdir() if (p / "task.toml").exists())
    if args.tasks:
        tasks = [t for t in tasks if t.name in args.tasks.split(",")]
    work = []
    for t in tasks:
        for b in backends:
            work += [(t, p) for p in sorted((t / "solutions").glob(f"{b}_*.py"))]
            work += [(t, p) for p in sorted((t / "solutions" / "wrong").glob(f"{b}_*.py"))]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        builds = list(pool.map(lambda tp: compile(Candidate.from_file(tp[1]), device=args.device), work))
    print(f"built {len(work)} solutions in {time.perf_counter() - t0:.0f} s "
          f"({sum(b.ok for b in builds)} ok)", file=sys.stderr, flush=True)
    opts = Options(device=args.device, timing=TimingConfig(warmup=3, min_reps=10, max_reps=100, time_cap_s=3.0))
    rows = []
    for (task_dir, path), build in zip(work, builds):
        task = Task.load(task_dir, preset=args.preset)
        t = time.perf_counter()
        r = evaluate(task, Candidate.from_file(path), opts=opts)
        exp = expected(path)
        rows.append({"task": task.name, "level": task.level, "solution": str(path.relative_to(task_dir)),
                     "expected": exp, "status": r.status, "as_expected": r.status == exp,
                     "speedup": r.speedup, "ci": r.profile.speedup_ci if r.profile else None,
                     "eager_ms": r.profile.baseline.median_ms if r.profile else None,
                     "cand_ms": r.profile.candidate.median_ms if r.profile else None,
                     "custom_share": r.custom_share, "flags": r.flags, "message": r.message,
                     "seconds": time.perf_counter() - t})
        print(f"{task.name:28} {path.name:40} {r.status:13} "
              f"{'' if r.speedup is None else f'{r.speedup:6.2f}x'}  {r.message[:80]}", file=sys.stderr, flush=True)
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"\nmachine: {name}; torch {torch.__version__}; preset {args.preset or 'default'}\n")
    print("| task | level | solution | verdict | eager (ms) | solution (ms) | speedup [95% CI] | custom share |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        sp = f"{r['speedup']:.2f}× [{r['ci'][0]:.2f}–{r['ci'][1]:.2f}]" if r["speedup"] else "-"
        verdict = r["status"] + ("" if r["as_expected"] else f" (expected {r['expected']})")
        em = f"{r['eager_ms']:.3f}" if r["eager_ms"] else "-"
        cm = f"{r['cand_ms']:.3f}" if r["cand_ms"] else "-"
        cs = f"{r['custom_share']:.0%}" if r["custom_share"] is not None else "-"
        print(f"| {r['task']} | {r['level']} | {r['solution']} | {verdict} | {em} | {cm} | {sp} | {cs} |")
    honest = [r for r in rows if r["expected"] == "ok"]
    faster = [r for r in honest if r["status"] == "ok" and r["speedup"] and r["speedup"] > 1]
    print(f"\n{sum(r['as_expected'] for r in rows)}/{len(rows)} verdicts as expected; "
          f"false positives on honest solutions: {sum(r['status'] != 'ok' for r in honest)}; "
          f"faster than eager: {len(faster)}/{len(honest)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": name, "rows": rows}, indent=2, default=str))


if __name__ == "__main__":
    main()
