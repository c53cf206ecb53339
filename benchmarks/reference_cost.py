"""Where a `kernelskill bench --reference` job's seconds go: per task, the reference worker (cold
reference cache) and each phase of the evaluation of the reference as its own candidate, timed
from the parent's side (the phase callbacks), in a session with workers started ahead (as the bench
runs them).

    python benchmarks/reference_cost.py KernelBench/level1/2_Standard_matrix_multiplication_.py ... [--device cuda]

Prints one table row per task: seconds for the reference worker, then per phase of evaluate().
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernelskill.evaluate.api import Options, profile, reference  # noqa: E402
from kernelskill.evaluate.launch.isolation import prestarting  # noqa: E402
from kernelskill.evaluate.worker.timing import TimingConfig  # noqa: E402
from kernelskill.bench import DEFAULT_TIMING, op_classes  # noqa: E402
from kernelskill.task import Task  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tasks", nargs="+")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-profile", action="store_true", help="evaluate without the kernel breakdown")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()
    opts = Options(device=a.device, timing=TimingConfig(**DEFAULT_TIMING), profile=not a.no_profile)
    rows = []
    with prestarting(a.device.startswith("cuda")):
        for path in a.tasks:
            task = Task.load(path)
            t0 = time.perf_counter()
            op_classes(task)
            t1 = time.perf_counter()
            reference(task, a.device, opts)
            t2 = time.perf_counter()
            marks = [("start", t2)]
            r = profile(task, None, opts=opts, on_phase=lambda name: marks.append((name, time.perf_counter())))
            t3 = time.perf_counter()
            phases: dict[str, float] = {}
            for (name, t), (_, nxt) in zip(marks, marks[1:] + [("end", t3)]):
                phases[name] = phases.get(name, 0.0) + nxt - t
            row = {"task": task.name, "status": r.status, "op_classes_s": round(t1 - t0, 2),
                   "reference_s": round(t2 - t1, 2), "evaluate_s": round(t3 - t2, 2),
                   "phases": {k: round(v, 2) for k, v in phases.items()},
                   "cost_s": r.profile.cost_s if r.profile else None,
                   "plan": (r.verify.memory_plan or {}).get("outputs") if r.verify else None}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\n{'task':<44} {'classes':>7} {'ref':>6} {'eval':>6}  phases")
    for row in rows:
        ph = " ".join(f"{k} {v:.1f}" for k, v in row["phases"].items())
        print(f"{row['task'][:44]:<44} {row['op_classes_s']:>7.1f} {row['reference_s']:>6.1f} {row['evaluate_s']:>6.1f}  {ph}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
